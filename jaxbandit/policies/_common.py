"""Pieces shared by the built-in policies (one run, no batch axes)."""

from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxbandit import estimator
from jaxbandit._numbers import ArgumentError, check_nonnegative, check_positive, check_unit_interval
from jaxbandit._types import Array
from jaxbandit.base import OWN_ARM, Context, Policy

__all__ = [
    "EstimatorPolicyState",
    "check_exploration",
    "check_nonnegative",
    "check_positive",
    "check_unit_interval",
    "consolidate_stats",
    "estimator_policy",
    "initial_side_arm",
    "log_round",
    "own_arm_precision",
    "params_check",
    "update_stats",
]


class EstimatorPolicyState(NamedTuple):
    """State of the policies that need only the weighted estimator."""

    stats: estimator.EstimatorState
    initial_rounds: Array  # () int32, rounds spent in the initial phase


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


# The largest exploration scale the index policies take: it multiplies log t (at most
# 21) by a few units, which float32 holds up to 3.4e38.  1e30 as float32 rounds it, so
# that a simulation's check of the value float32 holds takes 1e30 too.
MAX_EXPLORATION = float(np.float32(1e30))


def check_exploration(name: str, value) -> float:
    """An exploration scale (UCB's ``alpha``): a number in ``(0, MAX_EXPLORATION]``."""
    value = check_positive(name, value)
    if value > MAX_EXPLORATION:
        raise ArgumentError(
            f"{name} must be at most {MAX_EXPLORATION:g}, got {value!r}: it scales log t in every index, "
            "which float32 would hold as inf, every arm's alike.",
            argument=name,
        )
    return value


def params_check(**rules: Callable) -> Callable[[Mapping], dict]:
    """A :attr:`~jaxbandit.base.Policy.check_params` from one rule per hyper-parameter
    (``name=check_positive`` and the like): the function it returns checks one cell's
    values and gives them back as floats, so a factory checks its own arguments with it."""

    def check_params(params: Mapping) -> dict:
        return {name: rule(name, params[name]) for name, rule in rules.items()}

    return check_params


def update_stats(state: NamedTuple, arm: Array, values: Array, ctx: Context) -> NamedTuple:
    """``state`` with the round's observations added to its weighted estimator, kept in
    its ``stats`` field (every other field as given)."""
    return state._replace(stats=estimator.update(state.stats, arm, values, ctx.precision[arm]))


def consolidate_stats(state: NamedTuple) -> NamedTuple:
    """``consolidate_fn`` of a policy whose state keeps its weighted estimator in ``stats``."""
    return state._replace(stats=estimator.consolidate(state.stats))


def _diagnostics(state: EstimatorPolicyState) -> dict:
    return {"initial_rounds": state.initial_rounds}


def estimator_policy(
    name: str, params: dict, select_fn: Callable, *, own_arm_only: bool = False, check_params: Callable | None = None
) -> Policy:
    """A policy whose state is the weighted estimator and an initial-round counter.

    Args:
        name: the policy's name.
        params: its numeric hyper-parameters.
        select_fn: ``(key, state, t, ctx) -> Decision`` with an :class:`EstimatorPolicyState`.
        own_arm_only: keep only the samples of the arm played (bandit feedback).
        check_params: the policy's :attr:`~jaxbandit.base.Policy.check_params`.
    """

    def init_fn(ctx: Context) -> EstimatorPolicyState:
        num_arms = ctx.sigma.shape[-1]
        return EstimatorPolicyState(estimator.init(num_arms, ctx.sigma.dtype), jnp.zeros((), jnp.int32))

    def update_fn(state: EstimatorPolicyState, arm, values, ctx: Context) -> EstimatorPolicyState:
        num_arms = ctx.sigma.shape[-1]
        precision = own_arm_precision(ctx) if own_arm_only else ctx.precision
        initial = state.initial_rounds < num_arms
        return EstimatorPolicyState(
            stats=estimator.update(state.stats, arm, values, precision[arm]),
            initial_rounds=state.initial_rounds + initial.astype(jnp.int32),
        )

    return Policy(
        init_fn, select_fn, update_fn, _diagnostics, consolidate_fn=consolidate_stats, name=name, params=params,
        options={"feedback": OWN_ARM} if own_arm_only else {}, check_params=check_params,
    )  # fmt: skip
