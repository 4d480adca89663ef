"""The policy contract: what a policy gives the engine, and what the engine gives it.

A :class:`Policy` is a few pure functions over a NamedTuple *state*, written for ONE
run (the engine adds the run and cell axes with ``vmap``), like an optax
``GradientTransformation``.  Each round ``t = 1, 2, ...`` of each run::

    decision = select_fn(key, state, t, ctx)            # a Decision: play decision.arm
    values   = the observations of the arm played        # (num_arms,), 0 where unrevealed
    state    = update_fn(state, arm, values, ctx)

``diagnostics_fn(state)`` reports per-run counters at the end.  ``consolidate_fn``
(optional) is applied to every run after the rounds where
:func:`jaxbandit.estimator.consolidation_due` holds: policies that keep a weighted
estimator (:mod:`jaxbandit.estimator`) consolidate it there, which keeps float32
sums accurate over 10**7 rounds without a per-round branch.

Expensive per-run work (an LP solve) is the one optional mechanism, a :class:`Solver`:
``select_fn`` returns ``Decision(arm, needs_solve=True, request)`` for the runs that need
it; the engine serves the requests of just those runs, stage by stage (each
:class:`Stage` only for the runs the previous stage left unresolved, gathered into
compact buffers), folds each stage's answer into the state of the runs it served
(``fold_fn``), and ``finish_fn`` turns the final answer into the arm.  Runs that did
not ask get a zeroed placeholder answer, which ``finish_fn`` must ignore.

A compiled engine is reused only for the same computation: the cache key is a
fingerprint of the policy's functions (their code, and every value their closures
and defaults hold) and static options, never its name, so numeric hyper-parameters
passed in ``params`` (traced, read as ``ctx.params[...]``) share one program while a
hyper-parameter captured in a closure compiles its own.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from jaxbandit._types import Array

__all__ = ["BATCHING", "OWN_ARM", "Context", "Decision", "Policy", "Solver", "Stage", "play"]

BATCHING = ("compact", "single_pass", "rare")
OWN_ARM = "own_arm"  # Policy.options["feedback"] of a policy that learns an arm only by playing it
_NO_PARAMS: Mapping = MappingProxyType({})


class Context(NamedTuple):
    """What a policy may know about its cell (one instance, one hyper-parameter set).

    Attributes:
        sigma: ``(num_arms, num_arms)`` known noise levels (row = arm played).
        precision: ``(num_arms, num_arms)`` ``1 / sigma**2`` (``inf`` for noise-free).
        horizon: ``()`` int32, the number of rounds (only oracle policies may use it).
        true_mean: ``(num_arms,)`` the true means (only oracle policies may use it).
        params: ``{name: ()}`` the numeric hyper-parameters, traced: a grid of values
            shares one compiled program.
    """

    sigma: Array
    precision: Array
    horizon: Array
    true_mean: Array
    params: dict


class Decision(NamedTuple):
    """What ``select_fn`` returns.

    Attributes:
        arm: ``()`` int32, the arm to play when no solve is needed (a host integer
            beyond int32's range saturates, :func:`host_arm`, instead of wrapping
            around into ``[0, num_arms)`` when JAX converts it).
        needs_solve: ``()`` bool, whether the policy's :class:`Solver` must serve this run.
        request: a fixed-shape pytree the solver's stages read (``None`` without a solver).
    """

    arm: Array
    needs_solve: Array
    request: Any = None


def host_arm(arm):
    """An arm a policy's function returns, before JAX converts it: a host integer
    (Python or numpy) beyond int32's range saturated to it, so that it stays outside
    ``[0, num_arms)`` where JAX's conversion would wrap it in; any other value as it is."""
    limits = np.iinfo(np.int32)
    if isinstance(arm, (int, np.integer)) and not isinstance(arm, bool) and not limits.min <= arm <= limits.max:
        return np.int32(limits.max if arm > 0 else limits.min)
    if isinstance(arm, np.ndarray) and np.issubdtype(arm.dtype, np.integer) and np.iinfo(arm.dtype).bits > 32:
        return int32_arm(arm)
    return arm


def saturating_select(select_fn: Callable) -> Callable:
    """``select_fn`` whose decision's arm goes through :func:`host_arm`, as the engine
    (and the policy check) call it: before JAX converts a host integer.  A value that
    is no function is returned as it is, for the check to name."""
    if not callable(select_fn):
        return select_fn

    def select(key, state, t, ctx):
        decision = select_fn(key, state, t, ctx)
        return decision._replace(arm=host_arm(decision.arm)) if isinstance(decision, Decision) else decision

    return select


def saturating_finish(finish_fn: Callable) -> Callable:
    """A solver's ``finish_fn`` whose arm goes through :func:`host_arm` (see
    :func:`saturating_select`)."""
    if not callable(finish_fn):
        return finish_fn

    def finish(state, decision, answer, t, ctx):
        finished = finish_fn(state, decision, answer, t, ctx)
        return (host_arm(finished[0]), finished[1]) if isinstance(finished, tuple) and len(finished) == 2 else finished

    return finish


def play(arm) -> Decision:
    """A decision that needs no solve: play ``arm`` (an integer scalar).

    An integer arm becomes int32 (saturating, as :func:`int32_arm`); anything else is
    kept as given, so that a float arm is reported by the policy check rather than
    silently truncated.
    """
    arm = jnp.asarray(host_arm(arm))
    if jnp.issubdtype(arm.dtype, jnp.integer):
        arm = int32_arm(arm)
    return Decision(arm=arm, needs_solve=jnp.asarray(False))


def options_record(options: Mapping) -> dict:
    """``Policy.options`` as JSON values, for records and identities: numpy values as
    numbers, any other value JSON cannot hold by its type's name (an address would
    differ between processes)."""

    def plain(value):
        if isinstance(value, (np.ndarray, np.generic)):
            return value.tolist()
        return f"<{type(value).__module__}.{type(value).__qualname__}>"

    return json.loads(json.dumps(dict(options), sort_keys=True, default=plain))


def option_params(options: Mapping) -> dict:
    """The hyper-parameters among ``Policy.options`` (``lp_explore``'s ``case_c_rule``),
    as :func:`options_record` gives them, one value each (a list or a table as its JSON
    text: a column of results holds one value per cell): every option but
    ``"feedback"``, the contract's declaration of how the policy learns, not an argument
    of its factory."""
    one = lambda value: json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value  # noqa: E731
    return {name: one(value) for name, value in options_record(options).items() if name != "feedback"}


def int32_arm(arm):
    """An integer ``arm`` as int32, saturating: an arm beyond int32's range (an int64 or
    uint32 one) stays outside ``[0, num_arms)``, where the engine reports it, instead of
    wrapping around into it."""
    xp = np if isinstance(arm, np.ndarray) else jnp  # a host array stays on the host
    limits = np.iinfo(np.int32)
    if xp.issubdtype(arm.dtype, xp.unsignedinteger) and np.iinfo(arm.dtype).bits >= 32:
        arm = xp.minimum(arm, xp.asarray(limits.max, arm.dtype))
    elif np.iinfo(arm.dtype).bits > 32:
        arm = xp.clip(arm, xp.asarray(limits.min, arm.dtype), xp.asarray(limits.max, arm.dtype))
    return arm.astype(xp.int32)


class Stage(NamedTuple):
    """One step of a :class:`Solver`, served only to the runs still waiting for it.

    Attributes:
        solve_fn: ``(request, state, ctx) -> (answer, resolved)`` for one run.  Every
            stage of a solver returns answers of the same structure; ``resolved``
            (``()`` bool) False sends the run on to the next stage (the last stage's
            answer is final whatever it says).
        fold_fn: optional ``(state, answer, ctx) -> state``, applied to the runs this
            stage served (resolved or not), e.g. to keep a new warm start.  Only the
            leaves it replaces are written back, so return the others as given.
        batching: how the engine batches the waiting runs: ``"compact"`` (a buffer of
            ``solve_batch`` runs, repeated until all are served),
            ``"single_pass"`` (a cheap stage: one pass of the smallest buffer holding
            them all, or every run at once when over a quarter wait; no ``fold_fn``) or
            ``"rare"`` (an expensive stage few runs reach: one small buffer, repeated).
            The choice changes speed only, never results.
    """

    solve_fn: Callable
    fold_fn: Optional[Callable] = None
    batching: str = "compact"


class Solver(NamedTuple):
    """Per-run expensive work, served only to the runs whose decision needs it.

    Attributes:
        stages: a non-empty tuple of :class:`Stage`, tried in order.
        finish_fn: ``(state, decision, answer, t, ctx) -> (arm, state)`` for every run;
            ``answer`` is meaningful only where ``decision.needs_solve``.
    """

    stages: tuple
    finish_fn: Callable


class Policy(NamedTuple):
    """A bandit policy as pure functions of one run (see the module docstring).

    Attributes:
        init_fn: ``(ctx) -> state``.
        select_fn: ``(key, state, t, ctx) -> Decision``.  ``key`` is the run's ``(2,)``
            uint32 policy key for :func:`jaxbandit.rng.uniform` and
            :func:`jaxbandit.rng.standard_normal` with counter ``t`` (one of them,
            or each from its own :func:`jaxbandit.rng.fold_in` key: at one counter
            they are dependent); ``t`` is the ``()`` int32 round, counted from 1.
        update_fn: ``(state, arm, values, ctx) -> state``; ``values`` are the round's
            ``(num_arms,)`` observations (0 where the arm played reveals nothing).
        diagnostics_fn: optional ``(state) -> {name: ()}`` per-run counters.
        consolidate_fn: optional ``(state) -> state`` (see the module docstring).
        solver: optional :class:`Solver`.
        name: a label for results; it plays no part in caching.
        params: ``{name: number}`` numeric hyper-parameters, given to every function as
            ``ctx.params``.
        options: static, non-numeric options, for the record.  ``{"feedback":
            "own_arm"}`` declares that the policy learns each arm only from playing it:
            a simulation refuses an instance with an arm that does not observe itself
            (``sigma[i, i] = inf``), where such a policy would play that arm forever.
        check_params: optional ``(params) -> Any`` for ONE cell's ``{name: float}``:
            raises ``ValueError`` naming a value the policy cannot use (e.g. a negative
            exploration scale).  A simulation calls it on every cell's values before it
            starts, so a grid passed as ``params`` gets the checks the factory applies
            to its own arguments; it plays no part in caching.
    """

    init_fn: Callable
    select_fn: Callable
    update_fn: Callable
    diagnostics_fn: Optional[Callable] = None
    consolidate_fn: Optional[Callable] = None
    solver: Optional[Solver] = None
    name: str = "policy"
    params: Mapping = _NO_PARAMS
    options: Mapping = _NO_PARAMS
    check_params: Optional[Callable] = None

    def __repr__(self) -> str:
        # what tells policies apart for a reader; the functions' addresses say nothing
        solver = ", solver" if self.solver is not None else ""
        return f"Policy(name={self.name!r}, params={dict(self.params)!r}, options={dict(self.options)!r}{solver})"
