"""UCB-MaxN (Caron, Kveton, Lelarge, Bhagat, UAI 2012, "Leveraging Side Observations in
Stochastic Bandits", Algorithm 2), with the weighted estimator of the paper.

The original rule, on a feedback graph: pick the arm ``j`` with the largest UCB-N index;
then, instead of playing ``j`` itself, play the arm with the largest empirical mean
among the *in-neighbours* of ``j`` (the arms whose play reveals ``j``, ``j`` included).
Playing that arm still observes ``j`` — which is what the index asked for — while
paying less regret when a better neighbour exists.

Generalisation to a side-information matrix ``sigma`` (graph -> weighted feedback):

* the index is the UCB-N index of :func:`jaxbandit.policies.ucb.ucb_n_index`,
  ``mu_hat_j + sqrt(2 alpha log t / zeta_j)`` with the weighted estimator (paper eq. (1)),
  where Caron et al. use plain sample means and observation counts;
* "``i`` observes ``j``" means ``sigma[i, j] < inf`` (precision ``W[i, j] > 0``), whatever
  its noise level: on graph feedback (``sigma`` in {s, inf}) this is exactly the
  in-neighbourhood.  The noise of the substitute's sample of ``j`` is not used to
  restrict the choice (a noisier look at ``j`` is still a look).

On a standard bandit the only observer of ``j`` is ``j``, so UCB-MaxN plays exactly what
``ucb_n`` plays (same initial rounds, same index, same ties).

Initial rounds: as ``ucb_n``, rounds ``t <= K`` play the paper's initial rounds (for arm
``j = t - 1`` play ``argmin_i sigma[i, j]``), so every arm has a finite index afterwards.

Tie rules: both argmaxes (the index over all arms, the mean over the observers of
``j``) go to the smallest arm index.  ``t`` counts rounds from 1.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxbandit import estimator
from jaxbandit.base import Context, Policy, play
from jaxbandit.policies._common import (
    EstimatorPolicyState,
    check_exploration,
    estimator_policy,
    initial_side_arm,
    params_check,
)
from jaxbandit.policies.ucb import ucb_n_index

__all__ = ["ucb_maxn", "maxn_arm"]

_check_params = params_check(alpha=check_exploration)


def maxn_arm(stats: estimator.EstimatorState, precision, t, alpha):
    """The UCB-MaxN choice after the initial rounds (one run).

    Args:
        stats: the weighted estimator.
        precision: ``(K, K)`` ``W = 1 / sigma**2`` (row = arm played).
        t: round number counted from 1.
        alpha: exploration constant.

    Returns:
        ``(arm, target)``: int32 scalars, the arm to play and the arm ``j`` with the
        largest UCB-N index that it observes.
    """
    index = ucb_n_index(stats, t, alpha)
    target = jnp.argmax(index).astype(jnp.int32)
    observers = precision[:, target] > 0  # arms whose play reveals the target
    means = estimator.mean(stats)
    masked = jnp.where(observers, means, jnp.asarray(-jnp.inf, means.dtype))
    return jnp.argmax(masked).astype(jnp.int32), target


def ucb_maxn(alpha: float = 1.0) -> Policy:
    """UCB-MaxN with side observations and the weighted estimator.

    Args:
        alpha: exploration constant in (0, 1e30] of the UCB-N index (default 1, the
            ``sqrt(2 log t / zeta)`` width of Caron et al.).

    Raises:
        ValueError: ``alpha`` is not a finite number > 0.
    """
    params = _check_params({"alpha": alpha})

    def select_fn(key, state: EstimatorPolicyState, t, ctx: Context):
        del key  # deterministic
        num_arms = ctx.sigma.shape[-1]
        arm, _ = maxn_arm(state.stats, ctx.precision, t, ctx.params["alpha"])
        return play(jnp.where(t <= num_arms, initial_side_arm(ctx, t), arm))

    return estimator_policy("ucb_maxn", params, select_fn, check_params=_check_params)
