"""Interfaces shared by policies and the engine.

A policy is a :class:`Policy` of pure functions over a NamedTuple state, written for ONE
run; :mod:`jaxbandit.simulate` adds the batch axes (runs, cells) with ``vmap``.

A round has two halves so that expensive per-run work (an LP solve) runs only for the
runs that need it:

1. ``select_fn`` returns a :class:`Decision`: the arm to play, or ``needs_solve=True``
   with a ``request`` (a fixed-shape pytree);
2. the engine gathers the requests of the runs that need a solve into a compact buffer,
   calls ``solve_fn`` on them as one batch, scatters the answers back, and calls
   ``finish_fn`` for every run (runs that did not ask get a placeholder answer and must
   ignore it).

Policies without expensive work leave ``solve_fn`` and ``finish_fn`` as ``None``.  A
policy may add a second, rarer stage: ``fallback_solve_fn`` runs (compacted the same
way) only for the runs whose first answer has ``needs_fallback`` set — e.g. a cheap
warm-start check first, a full LP solve only where the check fails — and, with
``fallback_update_fn``, fold what that stage found into the state of exactly those runs
(e.g. a new factorised warm start), so that large per-run data never travels through
the dense answers.  A third stage, ``check_fn`` with ``check_update_fn``, may sit
between the two (e.g. a re-use of the last answer first, then the check, then the
full solve): each later stage serves the runs whose answer so far has
``needs_fallback``.

Weighted estimators (:class:`jaxbandit.estimator.EstimatorState`) anywhere in a state
need only :func:`jaxbandit.estimator.update` each round: the engine consolidates them at
the fixed rounds of :func:`jaxbandit.estimator.consolidation_due`.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from jaxbandit._types import Array

__all__ = ["Context", "Decision", "Policy"]


class Context(NamedTuple):
    """What a policy may know about its cell (one instance, one hyper-parameter set).

    Attributes:
        sigma: ``(num_arms, num_arms)`` known side-information matrix.
        precision: ``(num_arms, num_arms)`` ``1 / sigma**2``.
        horizon: scalar int, the number of rounds (only oracle policies may use it).
        true_mean: ``(num_arms,)`` the true means (only oracle policies may use it).
        params: dict of numeric hyper-parameters (traced, so a grid shares one compile).
    """

    sigma: Array
    precision: Array
    horizon: Array
    true_mean: Array
    params: dict


class Decision(NamedTuple):
    """First half of a round.

    Attributes:
        arm: scalar int32, the arm to play when no solve is needed.
        needs_solve: scalar bool, whether ``solve_fn`` must run for this run.
        request: pytree consumed by ``solve_fn`` (``None`` for policies without one).
    """

    arm: Array
    needs_solve: Array
    request: Any = None


class Policy(NamedTuple):
    """A bandit policy as pure functions (see the module docstring).

    Attributes:
        name: registry name.
        params: numeric hyper-parameters; passed to every function as ``ctx.params``.
        init_fn: ``(ctx) -> state``.
        select_fn: ``(key, state, t, ctx) -> Decision``; ``key`` is the run's ``(2,)``
            uint32 policy key (use :func:`jaxbandit.rng.uniform` / ``standard_normal``
            with counter ``t``), ``t`` the round number counted from 1.
        update_fn: ``(state, arm, values, ctx) -> state`` with the ``(num_arms,)``
            observations of the round (0 where not revealed).
        diagnostics_fn: ``(state) -> dict[str, scalar]`` per-run counters.
        solve_fn: optional ``(request, ctx) -> answer``.
        finish_fn: optional ``(state, decision, answer, t, ctx) -> (arm, state)``.
        options: static (non-numeric) options, for the record.
        fallback_solve_fn: optional ``(request, ctx) -> answer`` (same structure as
            ``solve_fn``'s, which must then have a bool ``needs_fallback`` field).
        fallback_update_fn: optional ``(state, answer, ctx) -> state``, applied (before
            ``finish_fn``) to the runs the fallback stage served, with their fallback
            answer; the engine gathers and scatters just those runs' states, and of
            them only the leaves the function replaces (return the others as given).
        counts_fn: optional ``(state) -> (num_arms,)`` int32 plays of each arm, for a
            policy whose state already counts them: the engine then keeps no copy
            (one pass over the state per round less).
        check_fn: optional ``(request, ctx) -> answer``, a stage between ``solve_fn``
            and ``fallback_solve_fn`` (same answer structure), for the runs whose
            ``solve_fn`` answer has ``needs_fallback``; its own ``needs_fallback``
            sends a run on to ``fallback_solve_fn``.  With a ``check_fn``, ``solve_fn``
            should be cheap: the engine serves its runs in one pass of the smallest
            buffer that holds them all (up to a quarter of the runs; beyond that it
            evaluates ``solve_fn`` for every run).
        check_update_fn: optional ``(state, answer, ctx) -> state``, as
            ``fallback_update_fn`` for the runs ``check_fn`` served.
        solve_reads_state: if True, ``solve_fn``, ``check_fn`` and ``fallback_solve_fn``
            are called as ``(request, ctx, state)`` with the run's current state.  Large
            per-run data the stages read (a factorised warm start) then stays out of
            the request: a request that copies part of the state which a later stage
            updates makes XLA copy that part of the state for every run, every round.
    """

    name: str
    params: dict
    init_fn: Callable
    select_fn: Callable
    update_fn: Callable
    diagnostics_fn: Callable
    solve_fn: Optional[Callable] = None
    finish_fn: Optional[Callable] = None
    options: dict = {}
    fallback_solve_fn: Optional[Callable] = None
    counts_fn: Optional[Callable] = None
    fallback_update_fn: Optional[Callable] = None
    check_fn: Optional[Callable] = None
    check_update_fn: Optional[Callable] = None
    solve_reads_state: bool = False
