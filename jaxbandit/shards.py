"""Independent pieces of a sweep: shard ``I/N`` runs some of its cell groups.

A job array (SLURM ``--array=0-(N-1)``, or a shell loop) starts ``N`` independent
jobs on the same sweep directory, each with its own ``I``; together they run every
cell group once.  The split is a pure function of the configuration and ``N``:
groups are dealt, most expensive first, to the shard with the least work so far
(greedy longest-processing-time), so each job computes the same split without talking
to the others.  Shards are 0-based, ``I`` in ``0 .. N-1``, as ``SLURM_ARRAY_TASK_ID``.

A group's results do not depend on which job runs it (its noise depends only on the
seed, the cell and the run), so a shard's results are bit-identical to the same
groups of an unsharded run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Set
from typing import Sequence, Union

from jaxbandit._numbers import ArgumentError, integer

__all__ = ["Shard", "parse", "estimated_cost", "assign", "select"]

# A round of a policy that solves LPs costs several rounds of an index policy (see
# benchmarks/README.md); the split only needs the order of magnitude.
LP_POLICY_FACTOR = 4.0

_SPEC = re.compile(r"^\s*([0-9]+)\s*/\s*([0-9]+)\s*$")  # ASCII digits only


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based: ``0 <= index < count``)."""

    index: int
    count: int

    def __post_init__(self):
        for name in ("index", "count"):  # stored as the int the integer rule reads (2.0 is 2)
            object.__setattr__(self, name, integer(f"shard {name}", getattr(self, name), None))
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ArgumentError(
                f"shard must be I/N with 0 <= I < N (0-based, as SLURM_ARRAY_TASK_ID with "
                f"--array=0-(N-1)), got {self.index}/{self.count}.",
                argument="shard",
            )

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse(spec: Union[str, Shard, Sequence[int]]) -> Shard:
    """A :class:`Shard` from ``"I/N"``, an ``(I, N)`` pair or a Shard.

    Raises:
        ArgumentError (a ValueError, naming ``shard``): not two integers ``0 <= I < N``;
            the message shows ``spec``.
    """
    if isinstance(spec, Shard):
        return spec
    if isinstance(spec, str):
        match = _SPEC.match(spec)
        if match is None:
            raise ArgumentError(
                f"shard must be I/N with integers 0 <= I < N (0-based, as SLURM_ARRAY_TASK_ID "
                f"with --array=0-(N-1)), got {spec!r}.",
                argument="shard",
            )
        return Shard(int(match.group(1)), int(match.group(2)))
    # a sequence of two (tuple, list, array, range); a dict or a set would give its keys
    # in their own order
    if isinstance(spec, (Mapping, Set)) or not hasattr(spec, "__len__") or len(spec) != 2:
        raise ArgumentError(f"shard must be 'I/N' or a pair (I, N), got {spec!r}.", argument="shard")
    return Shard(*spec)


def estimated_cost(group, runs: int) -> float:
    """Relative cost of a cell group: runs x horizon x cells x arms x policy factor.

    Each round observes every arm, so its cost grows with the number of arms; a
    policy with an LP :class:`~jaxbandit.base.Solver` pays :data:`LP_POLICY_FACTOR`.
    """
    factor = LP_POLICY_FACTOR if group.policy.solver is not None else 1.0
    return float(runs) * group.horizon * len(group.cells) * group.num_arms * factor


def assign(costs: Sequence[float], count: int) -> list:
    """Greedy longest-processing-time split of items with ``costs`` into ``count`` shards.

    Items are taken from the most to the least expensive (plan order among equal
    costs) and each goes to the shard with the least cost so far (the lowest index
    among equals), so the result is deterministic.

    Returns:
        ``count`` lists of item indices, each in increasing order.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}.")
    loads = [0.0] * count
    shards: list = [[] for _ in range(count)]
    for item in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        target = min(range(count), key=lambda s: (loads[s], s))
        loads[target] += costs[item]
        shards[target].append(item)
    return [sorted(items) for items in shards]


def select(groups: Sequence, runs: int, shard: Shard) -> list:
    """The groups (in plan order) that shard ``shard`` runs."""
    # With more shards than groups each group gets a shard of its own (every cost is
    # positive), so the split over len(groups) shards is the same: no list per empty shard.
    count = min(shard.count, len(groups))
    if shard.index >= count:
        return []
    chosen = assign([estimated_cost(g, runs) for g in groups], count)[shard.index]
    return [groups[i] for i in chosen]
