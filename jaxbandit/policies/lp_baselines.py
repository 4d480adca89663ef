"""LP-based exploration of Buccapatnam, Eryilmaz and Shroff (SIGMETRICS 2014, "Stochastic
bandits with side observations on networks"; journal version with F. Liu: "Reward
maximization under uncertainty: leveraging side-observations on networks", JMLR 2018,
arXiv:1704.07943): ``eps_greedy_lp`` and ``ucb_lp``.

Both policies explore arm ``i`` at a rate proportional to ``z*_i``, the optimal solution
of the LP relaxation of the minimum dominating set of the observation graph (their
problem "P2"):

    minimise  sum_i z_i   subject to   sum_{i observes j} z_i >= 1  for every arm j,  z >= 0,

with ``gamma* = sum_i z*_i``.  An exploration round plays arm ``i`` with probability
``z*_i / gamma*``.

Generalisation to a side-information matrix ``sigma`` (graph -> weighted feedback).
The covering constraint of arm ``j`` is weighted by precisions normalised per column:

    sum_i z_i * W[i, j] / max_k W[k, j]  >=  1        (W = 1 / sigma**2),

i.e. a unit of exploration must give arm ``j`` as much information as one play of its
best observer.  Why this normalisation: (a) on graph feedback (``sigma`` in {s, inf})
``W[i, j] / max_k W[k, j]`` is the adjacency indicator, so the LP is exactly P2; (b) it
is invariant to rescaling the noise of one arm's observations, like the original
(which counts observations, not their precision); (c) a column with a noise-free
observer (``W = inf``) counts noise-free observers as 1 and every other observer as 0
(one exact sample beats any number of noisy ones).  Unnormalised alternatives
(``sum_i z_i W[i, j] >= c``) would make the exploration budget depend on the units of
``sigma`` across arms.  The LP is solved once per cell, at ``init_fn``, with the
project's solver (:func:`jaxbandit.lp.solve`, canonical optimum: smallest ``sum z``, then
lexicographically smallest ``z``, so ties between optimal covers are resolved
deterministically).  A solve that does not end ``OPTIMAL`` is reported in the
diagnostics (``lp_status``) and the policy then explores uniformly (``z = 1``).

Deviations from the published policies, all deliberate and listed here:

* Estimator: the weighted estimator of the paper (eq. (1)) replaces sample means over
  all observations (identical on graph feedback with a common ``s``).
* Initial rounds: rounds ``t <= K`` play the paper's initial rounds (for arm
  ``j = t - 1`` play ``argmin_i sigma[i, j]``), as every policy in this package does,
  so that no decision is taken on an arm never observed.  The published policies have
  no such phase (their first rounds explore with probability ``min(1, ...) = 1``).
* Rewards: the published analysis assumes rewards in [0, 1]; here they are Gaussian,
  so the constants ``c`` (and ``d``) are free parameters to tune, not the ones of the
  theorems.

The exact published pseudo-code could not be retrieved while writing this module
(only the abstracts of both versions were reachable), so the rules below are our
reconstruction from the papers' description — "a randomized policy and a UCB-based
policy, both of which explore each action at a rate that is a function of its network
position" — and the ε-greedy scheme they extend (Auer, Cesa-Bianchi, Fischer 2002,
``epsilon_t = min(1, c K / (d**2 t))`` with ``K`` replaced by ``gamma*``):

* ``eps_greedy_lp(c, d)``: with probability ``epsilon_t = min(1, c gamma* / (d**2 t))``
  explore (arm ``i`` with probability ``z*_i / gamma*``), else play ``argmax mu_hat``.
* ``ucb_lp(c, alpha)``: with probability ``epsilon_t = min(1, c gamma* / t)`` explore as
  above, else play ``argmax`` of the UCB-N index ``mu_hat_i + sqrt(2 alpha log t / zeta_i)``
  (no gap lower bound ``d`` is needed: the index does the rest of the exploration).

Randomness: each round draws two uniforms from the run's policy stream at counter ``t``
(:func:`jaxbandit.rng.uniform`): the first decides exploration (``u0 <= epsilon_t``),
the second picks the arm by inverting the CDF of ``z* / gamma*`` (the arm ``i`` with
``F(i-1) <= u1 < F(i)``).  On a standard bandit ``z* = 1``, ``gamma* = K`` and this is
exactly ``eps_greedy``'s uniform draw, so ``eps_greedy_lp(c, d=1)`` plays the same arms
as ``eps_greedy(c)``.  Ties in ``argmax`` go to the smallest arm index.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxbandit import estimator, lp, rng
from jaxbandit._types import Array
from jaxbandit.base import Context, Policy, play
from jaxbandit.policies._common import check_exploration, check_positive, consolidate_stats, initial_side_arm, params_check
from jaxbandit.policies.ucb import ucb_n_index

__all__ = [
    "eps_greedy_lp",
    "ucb_lp",
    "LPExplorationState",
    "cover_constraints",
    "solve_cover",
    "exploration_arm",
]

_check_eps_greedy_lp = params_check(c=check_positive, d=check_positive)
_check_ucb_lp = params_check(c=check_positive, alpha=check_exploration)


class LPExplorationState(NamedTuple):
    """State of ``eps_greedy_lp`` / ``ucb_lp`` (one run)."""

    stats: estimator.EstimatorState
    initial_rounds: Array  # int32, rounds spent in the initial phase
    explore_weights: Array  # (K,) z*, the LP cover (uniform if the solve failed)
    lp_status: Array  # int32 LPStatus code of the cover LP


def cover_constraints(precision: Array) -> tuple[Array, Array, Array]:
    """``(cost, A, b)`` of the weighted dominating-set relaxation ``min 1@z, A z >= b``.

    Args:
        precision: ``(K, K)`` ``W = 1 / sigma**2``, row = arm played (``inf`` allowed).

    Returns:
        ``cost`` ``(K,)`` ones, ``A`` ``(K, K)`` with ``A[j, i] = W[i, j] / max_k W[k, j]``
        (noise-free observers count 1, others 0 in a column with a noise-free observer),
        ``b`` ``(K,)`` ones.
    """
    dtype = precision.dtype
    best = jnp.max(precision, axis=0, keepdims=True)  # (1, K): best precision on each column
    exact_column = jnp.isinf(best)
    safe_best = jnp.where((best > 0) & ~exact_column, best, jnp.ones_like(best))
    ratio = jnp.where(
        exact_column,
        jnp.isinf(precision).astype(dtype),
        jnp.where(jnp.isinf(precision), jnp.ones_like(precision), precision / safe_best),
    )
    num_arms = precision.shape[-1]
    ones = jnp.ones(num_arms, dtype)
    return ones, ratio.T, ones


def solve_cover(precision: Array) -> tuple[Array, Array]:
    """Solve the weighted dominating-set relaxation (one instance).

    Returns:
        ``(z, status)``: ``(K,)`` the canonical optimal cover ``z*`` — or ``ones(K)`` (the
        bandit cover) when the solve is not optimal — and the int32 LP status.
    """
    cost, matrix, rhs = cover_constraints(precision)
    solution = lp.solve(cost, matrix, rhs)
    ok = solution.status == lp.LPStatus.OPTIMAL
    z = jnp.where(ok, jnp.maximum(solution.x, 0), jnp.ones_like(solution.x))
    return z, solution.status.astype(jnp.int32)


def exploration_arm(weights: Array, u: Array) -> Array:
    """Arm drawn with probability ``weights / sum(weights)`` by inverting the CDF at ``u``.

    Returns the arm ``i`` with ``F(i-1) <= u < F(i)``; a ``u`` at or above the last
    (rounded) CDF value maps to the last arm with a positive weight.
    """
    cdf = jnp.cumsum(weights) / jnp.sum(weights)
    num_arms = weights.shape[-1]
    last_positive = num_arms - 1 - jnp.argmax(weights[::-1] > 0)
    arm = jnp.sum((cdf <= u).astype(jnp.int32))
    return jnp.minimum(arm, last_positive).astype(jnp.int32)


def _init(ctx: Context) -> LPExplorationState:
    num_arms = ctx.sigma.shape[-1]
    z, status = solve_cover(ctx.precision)
    return LPExplorationState(
        stats=estimator.init(num_arms, ctx.sigma.dtype),
        initial_rounds=jnp.zeros((), jnp.int32),
        explore_weights=z.astype(ctx.sigma.dtype),
        lp_status=status,
    )


def _update(state: LPExplorationState, arm, values, ctx) -> LPExplorationState:
    num_arms = ctx.sigma.shape[-1]
    initial = state.stats.counts.sum() < num_arms
    stats = estimator.update(state.stats, arm, values, ctx.precision[arm])
    return LPExplorationState(
        stats=stats,
        initial_rounds=state.initial_rounds + initial.astype(jnp.int32),
        explore_weights=state.explore_weights,
        lp_status=state.lp_status,
    )


def _diagnostics(state: LPExplorationState) -> dict:
    return {
        "initial_rounds": state.initial_rounds,
        "lp_status": state.lp_status,
        "lp_gamma": jnp.sum(state.explore_weights),
    }


def _explore_or(key, state: LPExplorationState, t, ctx, epsilon_scale, exploit_arm):
    """Shared round: initial rounds, then explore w.p. ``min(1, scale gamma*/t)`` or exploit."""
    num_arms = ctx.sigma.shape[-1]
    dtype = ctx.sigma.dtype
    coin, pick = rng.uniform(key, t, 2, dtype)
    gamma = jnp.sum(state.explore_weights)
    epsilon = jnp.minimum(jnp.asarray(1.0, dtype), epsilon_scale * gamma / t.astype(dtype))
    explore = exploration_arm(state.explore_weights, pick)
    arm = jnp.where(coin <= epsilon, explore, exploit_arm)
    return play(jnp.where(t <= num_arms, initial_side_arm(ctx, t), arm))


def eps_greedy_lp(c: float = 1.0, d: float = 1.0) -> Policy:
    """ε-greedy-LP: LP-weighted random exploration at rate ``min(1, c gamma*/(d**2 t))``.

    Args:
        c: exploration scale > 0 (default 1).
        d: assumed lower bound > 0 on the smallest gap (default 1, which with ``c = 1``
            matches ``eps_greedy``'s default schedule on a standard bandit).

    Raises:
        ValueError: ``c`` or ``d`` is not a finite number > 0.
    """
    params = _check_eps_greedy_lp({"c": c, "d": d})

    def select_fn(key, state, t, ctx):
        scale = ctx.params["c"] / jnp.square(ctx.params["d"])
        best = jnp.argmax(estimator.mean(state.stats)).astype(jnp.int32)
        return _explore_or(key, state, t, ctx, scale, best)

    return Policy(
        _init, select_fn, _update, _diagnostics, consolidate_fn=consolidate_stats, name="eps_greedy_lp",
        params=params, check_params=_check_eps_greedy_lp,
    )  # fmt: skip


def ucb_lp(c: float = 1.0, alpha: float = 1.0) -> Policy:
    """UCB-LP: LP-weighted random exploration at rate ``min(1, c gamma*/t)``, UCB-N otherwise.

    Args:
        c: exploration scale > 0 (default 1).
        alpha: exploration constant in (0, 1e30] of the UCB-N index (default 1).

    Raises:
        ValueError: ``c`` or ``alpha`` is not a finite number > 0.
    """
    params = _check_ucb_lp({"c": c, "alpha": alpha})

    def select_fn(key, state, t, ctx):
        index = ucb_n_index(state.stats, t, ctx.params["alpha"])
        best = jnp.argmax(index).astype(jnp.int32)
        return _explore_or(key, state, t, ctx, ctx.params["c"], best)

    return Policy(
        _init, select_fn, _update, _diagnostics, consolidate_fn=consolidate_stats, name="ucb_lp",
        params=params, check_params=_check_ucb_lp,
    )  # fmt: skip
