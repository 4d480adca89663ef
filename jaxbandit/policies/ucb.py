"""Upper-confidence-bound policies.

* ``ucb`` — UCB with own-arm feedback only (Auer et al., 2002, with a Gaussian width):
  index ``mean_i + sigma_ii * sqrt(2 alpha log t / N_i)``, where ``mean_i`` averages the
  arm's own rewards; side observations are ignored.  Each arm is played once first.
* ``ucb_n`` — UCB-N (Caron et al., UAI 2012) with the weighted estimator of the paper:
  index ``mu_hat_i + sqrt(2 alpha log t / zeta_i)``; starts with the paper's initial
  rounds (for arm j, play ``argmin_i sigma[i, j]``).

``t`` counts rounds from 1; ties in the index go to the smallest arm index.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxbandit import estimator
from jaxbandit.base import Policy, play
from jaxbandit.policies._common import check_exploration, estimator_policy, initial_side_arm, log_round, params_check

__all__ = ["ucb", "ucb_n", "ucb_n_index"]

_check_params = params_check(alpha=check_exploration)


def ucb(alpha: float = 1.0) -> Policy:
    """UCB with own-arm feedback only.

    Args:
        alpha: exploration constant in (0, 1e30] (default 1, the asymptotically optimal ``2 log t``
            width: ``regret / log T -> sum 2 sigma_ii^2 / Delta_i``, the Lai-Robbins
            constant, and ``alpha`` times it for ``alpha > 1``; below 1 the policy is
            not consistent: some runs lock onto a worse arm).
    """
    params = _check_params({"alpha": alpha})

    def select_fn(key, state, t, ctx):
        del key  # deterministic
        num_arms = ctx.sigma.shape[-1]
        counts = state.stats.counts.astype(ctx.sigma.dtype)
        own_sigma = jnp.diagonal(ctx.sigma)
        width = own_sigma * jnp.sqrt(2 * ctx.params["alpha"] * log_round(t, counts.dtype) / jnp.maximum(counts, 1))
        index = estimator.mean(state.stats) + width
        return play(jnp.where(t <= num_arms, t - 1, jnp.argmax(index).astype(jnp.int32)))

    return estimator_policy("ucb", params, select_fn, own_arm_only=True, check_params=_check_params)


def ucb_n_index(stats: estimator.EstimatorState, t, alpha) -> jnp.ndarray:
    """``(K,)`` UCB-N index ``mu_hat + sqrt(2 alpha log t / zeta)`` (+inf where zeta = 0)."""
    zeta = estimator.weighted_counts(stats)
    safe_zeta = jnp.where(zeta > 0, zeta, jnp.ones_like(zeta))
    width = jnp.sqrt(2 * alpha * log_round(t, zeta.dtype) * (1 / safe_zeta))
    return jnp.where(zeta > 0, estimator.mean(stats) + width, jnp.asarray(jnp.inf, zeta.dtype))


def ucb_n(alpha: float = 1.0) -> Policy:
    """UCB-N with side observations and the weighted estimator.

    UCB-N assumes that a play reveals the arm played: an arm that does not observe
    itself (``sigma[i, i] = inf``) keeps its estimate while played and its index grows
    with ``t``, so once it leads it is played forever (``ucb_maxn``, ``ts_n`` and the LP
    policies learn it from the arms that observe it).

    Args:
        alpha: exploration constant in (0, 1e30] (default 1).
    """
    params = _check_params({"alpha": alpha})

    def select_fn(key, state, t, ctx):
        del key  # deterministic
        num_arms = ctx.sigma.shape[-1]
        index = ucb_n_index(state.stats, t, ctx.params["alpha"])
        return play(jnp.where(t <= num_arms, initial_side_arm(ctx, t), jnp.argmax(index).astype(jnp.int32)))

    return estimator_policy("ucb_n", params, select_fn, check_params=_check_params)
