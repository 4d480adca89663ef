"""Pieces shared by several policies (one run, no batch axes)."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from jaxbandit import estimator
from jaxbandit._types import Array
from jaxbandit.base import Context, Decision

__all__ = [
    "EstimatorPolicyState",
    "initial_side_arm",
    "own_arm_precision",
    "check_positive",
    "check_unit_interval",
    "no_solve",
    "log_round",
    "stats_counts",
]


class EstimatorPolicyState(NamedTuple):
    """State of policies that only need the weighted estimator."""

    stats: estimator.EstimatorState
    initial_rounds: Array  # int32 counter, rounds spent in the initial phase


def stats_counts(state) -> Array:
    """``(K,)`` plays of each arm, for policies whose state holds the estimator as ``stats``."""
    return state.stats.counts


def initial_side_arm(ctx: Context, t: Array) -> Array:
    """The paper's initial rounds: at round ``t <= K`` play ``argmin_i sigma[i, t-1]``.

    ``argmin`` returns the smallest index on ties.  For ``t > K`` the value is unused.
    """
    num_arms = ctx.sigma.shape[-1]
    column = jnp.clip(t - 1, 0, num_arms - 1)
    return jnp.argmin(ctx.sigma[:, column]).astype(jnp.int32)


def own_arm_precision(ctx: Context) -> Array:
    """``(K, K)`` precision keeping only own-arm samples (``diag(W)``): bandit feedback."""
    num_arms = ctx.precision.shape[-1]
    return jnp.where(jnp.eye(num_arms, dtype=bool), ctx.precision, jnp.zeros_like(ctx.precision))


def log_round(t: Array, dtype) -> Array:
    """``log t`` with ``t`` counted from 1."""
    return jnp.log(jnp.asarray(t, dtype))


def no_solve(arm: Array) -> Decision:
    return Decision(arm=jnp.asarray(arm, jnp.int32), needs_solve=jnp.asarray(False))


def check_positive(name: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a number > 0, got {value!r}.") from err
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")
    return value


def check_unit_interval(name: str, value, *, closed: bool = False) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}.") from err
    ok = (0 < value <= 1) if closed else (0 < value < 1)
    if not ok:
        interval = "(0, 1]" if closed else "(0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {value!r}.")
    return value


def estimator_update(state: EstimatorPolicyState, arm, values, precision, t_is_initial):
    """Shared update: fold the round's samples into the estimator, count initial rounds."""
    stats = estimator.update(state.stats, arm, values, precision[arm])
    return EstimatorPolicyState(
        stats=stats, initial_rounds=state.initial_rounds + t_is_initial.astype(jnp.int32)
    )
