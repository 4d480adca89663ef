"""Greedy and epsilon-greedy on the weighted estimator (all side observations).

Both start with the paper's initial rounds (for arm j, play ``argmin_i sigma[i, j]``),
then play ``argmax mu_hat`` (smallest index on ties).  ``eps_greedy`` explores a
uniformly random arm with probability ``epsilon_t = min(1, c K / t)`` (Auer et al.,
2002, with their ``d = 1``).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxbandit import estimator, rng
from jaxbandit.base import Policy, play
from jaxbandit.policies._common import check_positive, estimator_policy, initial_side_arm, params_check

__all__ = ["greedy", "eps_greedy"]

_check_params = params_check(c=check_positive)


def greedy() -> Policy:
    """Pure exploitation after the initial rounds (no hyper-parameters).

    An arm that does not observe itself (``sigma[i, i] = inf``) and leads the estimates
    is played forever: its plays change nothing the policy reads."""

    def select_fn(key, state, t, ctx):
        del key  # deterministic
        num_arms = ctx.sigma.shape[-1]
        best = jnp.argmax(estimator.mean(state.stats)).astype(jnp.int32)
        return play(jnp.where(t <= num_arms, initial_side_arm(ctx, t), best))

    return estimator_policy("greedy", {}, select_fn)


def eps_greedy(c: float = 1.0) -> Policy:
    """Epsilon-greedy with ``epsilon_t = min(1, c K / t)``.

    Args:
        c: exploration scale > 0 (default 1).
    """
    params = _check_params({"c": c})

    def select_fn(key, state, t, ctx):
        num_arms = ctx.sigma.shape[-1]
        dtype = ctx.sigma.dtype
        coin, pick = rng.uniform(key, t, 2, dtype)
        epsilon = jnp.minimum(1.0, ctx.params["c"] * num_arms / t.astype(dtype))
        random_arm = jnp.minimum((pick * num_arms).astype(jnp.int32), num_arms - 1)
        best = jnp.argmax(estimator.mean(state.stats)).astype(jnp.int32)
        arm = jnp.where(coin <= epsilon, random_arm, best)
        return play(jnp.where(t <= num_arms, initial_side_arm(ctx, t), arm))

    return estimator_policy("eps_greedy", params, select_fn, check_params=_check_params)
