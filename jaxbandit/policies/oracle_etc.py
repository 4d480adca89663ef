"""Oracle explore-then-commit on the lower-bound LP (the paper's remark at the end of §4).

Knowing the true means, solve the paper's LP (eq. (3)) once, ``c* = c*(mu)``, then

1. **explore**: play each arm ``i`` exactly ``n_i = ceil(c*_i log T)`` times, in index
   order: round ``t`` plays the smallest arm ``i`` with ``N_i(t) < n_i``;
2. **observe**: then, while some arm has no sample yet, play the arm that observes the
   first of them most precisely (the LP asks nothing of an arm that a play observes
   noise-free, so ``c*`` may leave it unobserved);
3. **commit**: once every quota is met and every arm observed, play for the rest of the
   horizon the arm with the best weighted estimate ``argmax mu_hat`` (paper eq. (1);
   smallest index on ties), fixed at the end of the exploration phase.

The paper shows this schedule pays ``sum_i c*_i Delta_i log T + sum_i Delta_i`` for
exploration and then errs with small probability: the benchmark an algorithm that
does not know ``mu`` tries to reach.  It is an *oracle*: it reads the horizon
``ctx.horizon`` (``T``) and the true means ``ctx.true_mean`` from its context, which no
ordinary policy may do.  ``c*(mu)`` comes from :func:`jaxbandit.bound_lp.solve_lower_bound`, solved
once per cell at ``init_fn`` with the project's LP solver; the LP status is reported in
the diagnostics (``lp_status``, 0 = optimal).  If the solve is not optimal (e.g. a tie
for the best mean, where the LP has no finite solution) the quotas are empty: the
policy observes each arm once and commits to ``argmax mu_hat`` of those samples
(among tied arms a sample decides, so runs differ): check ``lp_status``.

Diagnostics: ``exploration_rounds`` (rounds spent on quotas and first observations),
``committed_arm`` (``-1`` while exploring), ``lp_status``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxbandit import estimator
from jaxbandit._types import Array
from jaxbandit.base import Context, Policy, play

__all__ = ["oracle_etc", "ETCState", "exploration_quota"]


class ETCState(NamedTuple):
    """State of ``oracle_etc`` (one run)."""

    stats: estimator.EstimatorState
    quota: Array  # (K,) float: ceil(c*_i log T), plays required of each arm
    committed_arm: Array  # int32, -1 while exploring
    exploration_rounds: Array  # int32
    lp_status: Array  # int32 status of the lower-bound LP


def exploration_quota(c: Array, horizon: Array) -> Array:
    """``(K,)`` ``ceil(c_i log T)`` as floats (``T >= 1``; ``log 1 = 0``: no exploration)."""
    log_horizon = jnp.log(jnp.maximum(horizon, 1).astype(c.dtype))
    return jnp.ceil(c * log_horizon)


def _left_to_do(stats: estimator.EstimatorState, quota: Array):
    """``(below, unobserved)``: ``(K,)`` bool, the arms below their quota and those with
    no sample yet."""
    return stats.counts.astype(quota.dtype) < quota, estimator.weighted_counts(stats) == 0


def _next_exploration_arm(state: ETCState, precision: Array):
    """``(arm, exploring)``: the smallest arm below its quota; else the arm whose play
    observes the first unobserved arm most precisely; and whether either exists."""
    below, unobserved = _left_to_do(state.stats, state.quota)
    observer = jnp.argmax(precision[:, jnp.argmax(unobserved)])
    arm = jnp.where(jnp.any(below), jnp.argmax(below), observer)
    return arm.astype(jnp.int32), jnp.any(below) | jnp.any(unobserved)


def oracle_etc() -> Policy:
    """Oracle explore-then-commit with the LP allocation ``ceil(c*_i(mu) log T)``.

    No hyper-parameters: it reads ``ctx.horizon`` and ``ctx.true_mean`` (an oracle).
    """

    def init_fn(ctx: Context) -> ETCState:
        from jaxbandit.bound_lp import solve_lower_bound  # the paper's LP, eq. (3)

        num_arms = ctx.sigma.shape[-1]
        dtype = ctx.sigma.dtype
        solution = solve_lower_bound(ctx.true_mean, ctx.precision)
        ok = solution.status == 0
        c = jnp.where(ok, jnp.maximum(solution.c.astype(dtype), 0), jnp.zeros(num_arms, dtype))
        return ETCState(
            stats=estimator.init(num_arms, dtype),
            quota=exploration_quota(c, ctx.horizon),
            committed_arm=jnp.asarray(-1, jnp.int32),
            exploration_rounds=jnp.zeros((), jnp.int32),
            lp_status=jnp.asarray(solution.status, jnp.int32),
        )

    def select_fn(key, state: ETCState, t, ctx):
        del key, t  # deterministic; the schedule depends on the counts only
        arm, exploring = _next_exploration_arm(state, ctx.precision)
        # Not exploring means committed: the update that ended the exploration chose the arm.
        return play(jnp.where(exploring, arm, state.committed_arm))

    def update_fn(state: ETCState, arm, values, ctx):
        _, exploring = _next_exploration_arm(state, ctx.precision)
        stats = estimator.update(state.stats, arm, values, ctx.precision[arm])
        below, unobserved = _left_to_do(stats, state.quota)
        # Commit once, on the round that meets the last quota or observes the last arm.
        decide = (state.committed_arm < 0) & ~jnp.any(below) & ~jnp.any(unobserved)
        committed = jnp.where(decide, jnp.argmax(estimator.mean(stats)).astype(jnp.int32), state.committed_arm)
        return ETCState(
            stats=stats,
            quota=state.quota,
            committed_arm=committed,
            exploration_rounds=state.exploration_rounds + exploring.astype(jnp.int32),
            lp_status=state.lp_status,
        )

    def diagnostics_fn(state: ETCState) -> dict:
        return {
            "exploration_rounds": state.exploration_rounds,
            "committed_arm": state.committed_arm,
            "lp_status": state.lp_status,
        }

    def consolidate_fn(state: ETCState) -> ETCState:
        return ETCState(
            estimator.consolidate(state.stats), state.quota, state.committed_arm, state.exploration_rounds, state.lp_status
        )

    return Policy(init_fn, select_fn, update_fn, diagnostics_fn, consolidate_fn=consolidate_fn, name="oracle_etc")
