"""Monitors: per-round checks of a policy's state that the engine runs for any policy.

A :class:`Monitor` is three pure functions of one run, like a policy: ``init_fn(ctx)``
builds its state, ``update_fn(monitor_state, policy_state, t, ctx)`` runs at the start
of every round ``t`` (before ``select_fn``, so it sees the estimates the round's
decision uses), and ``report_fn(monitor_state)`` gives per-run scalars that the engine
records at every recording time, as it records regret.  A monitor costs nothing
unless it is passed to :func:`jaxbandit.simulate` (or a sweep's ``[monitor]`` table).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxbandit import estimator
from jaxbandit._numbers import ArgumentError, check_keywords, check_positive, float_array, function, integer
from jaxbandit._types import Array
from jaxbandit.base import Context

__all__ = ["Monitor", "EstimatorDeviationState", "estimator_deviation", "deviation_bound", "REGISTRY", "make"]


class Monitor(NamedTuple):
    """A per-round check of one run (see the module docstring).

    Attributes:
        init_fn: ``(ctx) -> state``.
        update_fn: ``(state, policy_state, t, ctx) -> state``; ``t`` the ``()`` int32
            round about to be played, counted from 1.
        report_fn: ``(state) -> {name: ()}`` recorded at every recording time.
        name: a label for results.
    """

    init_fn: Callable
    update_fn: Callable
    report_fn: Callable
    name: str = "monitor"


class EstimatorDeviationState(NamedTuple):
    """Per-run counts of :func:`estimator_deviation`, one entry per ``alpha``."""

    outside_rounds: Array  # (A,) int32 rounds in which some arm left its interval
    first_outside: Array  # (A,) int32 the first such round (0: none yet)


def _stats(policy_state) -> estimator.EstimatorState:
    """The weighted estimator of a policy's state: the state itself, or its ``stats``
    field (as the built-in policies keep it)."""
    if isinstance(policy_state, estimator.EstimatorState):
        return policy_state
    stats = getattr(policy_state, "stats", None)
    if not isinstance(stats, estimator.EstimatorState):
        raise ValueError(
            f"the estimator_deviation monitor cannot find the policy's estimator: its state is a "
            f"{type(policy_state).__name__}, neither an EstimatorState nor one with an EstimatorState 'stats' "
            "field; pass estimator_deviation(estimator_fn=lambda state: <the EstimatorState in state>)."
        )
    return stats


def estimator_deviation(alphas=(1.0, 4.5), estimator_fn: Callable = _stats) -> Monitor:
    """How often the weighted estimate of some arm leaves the interval of Lemma 4.2.

    At the start of round ``t >= 2``, arm ``i`` is *outside* when
    ``|mu_hat_i(t) - mu_i| > sqrt(2 alpha log t / zeta_i(t))``; the paper's Lemma 4.2
    (its anytime concentration lemma) bounds the probability of that, for an arm with
    at least one sample's worth of its best observer's precision
    (``zeta_i >= max_j W[j, i]``), by ``2 ceil(log2(t - 1)) t**(-alpha / 2)`` whatever
    the adaptive sampling (:func:`deviation_bound`, which counts at least one term at
    ``t = 2``).  Arms below that amount, and arms
    observed without noise, are not counted.  A round counts when some arm is outside
    (the event ``U_t^c`` of the paper's §5).

    Args:
        alphas: the ``alpha`` of each interval (each > 0).
        estimator_fn: ``(policy_state) -> EstimatorState``, where the policy keeps its
            weighted estimator (default: its ``stats`` field, as the built-in policies do).

    Returns:
        A :class:`Monitor` reporting ``outside_rounds_alpha{a}`` (rounds with some arm
        outside, so far) and ``first_outside_alpha{a}`` (the first such round, 0 if none)
        for each ``a`` of ``alphas``.
    """
    alphas = _check_alphas(alphas)
    function("estimator_fn", estimator_fn, "(policy_state) -> EstimatorState")

    def init_fn(ctx: Context) -> EstimatorDeviationState:
        zeros = jnp.zeros(len(alphas), jnp.int32)
        return EstimatorDeviationState(zeros, zeros)

    def update_fn(state: EstimatorDeviationState, policy_state, t, ctx: Context) -> EstimatorDeviationState:
        stats = estimator_fn(policy_state)
        zeta = estimator.weighted_counts(stats)
        dtype = zeta.dtype
        best_precision = jnp.max(ctx.precision, axis=0)  # one sample of arm i's best observer
        counted = jnp.isfinite(best_precision) & (zeta >= best_precision) & (zeta > 0) & (t >= 2)
        error = jnp.abs(estimator.mean(stats) - ctx.true_mean)
        # error^2 zeta > 2 alpha log t: the interval's test without a square root
        scaled = jnp.where(counted, jnp.square(error) * zeta, jnp.zeros_like(zeta))
        limits = 2 * jnp.asarray(alphas, dtype) * jnp.log(jnp.asarray(t, dtype))
        outside = jnp.any(scaled[None, :] > limits[:, None], axis=1)  # (A,)
        first = outside & (state.first_outside == 0)
        return EstimatorDeviationState(
            outside_rounds=state.outside_rounds + outside.astype(jnp.int32),
            first_outside=jnp.where(first, t, state.first_outside),
        )

    def report_fn(state: EstimatorDeviationState) -> dict:
        out = {}
        for k, a in enumerate(alphas):
            out[f"outside_rounds_alpha{_label(a)}"] = state.outside_rounds[k]
            out[f"first_outside_alpha{_label(a)}"] = state.first_outside[k]
        return out

    return Monitor(init_fn, update_fn, report_fn, name="estimator_deviation")


def _label(alpha: float) -> str:
    return f"{alpha:g}"


def _check_alphas(alphas) -> tuple:
    """``alphas`` as a tuple of floats: a non-empty sequence of finite numbers > 0 whose
    report names (``{alpha:g}``) differ, so that no alpha's counts replace another's."""
    expected = "a non-empty list of finite numbers > 0"
    values = float_array("alphas", alphas, expected)
    if values.ndim != 1 or not values.size or not np.all(np.isfinite(values) & (values > 0)):
        raise ArgumentError(f"alphas must be {expected}, got {alphas!r}.", argument="alphas")
    values = tuple(float(a) for a in values)
    labels = [_label(a) for a in values]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        same = [a for a in values if _label(a) == repeated[0]]
        raise ArgumentError(
            f"alphas {same} would all be reported as alpha{repeated[0]}; give each alpha once, differing in its "
            "first 6 significant digits.",
            argument="alphas",
        )
    return values


def deviation_bound(t, alpha: float, num_arms: int = 1):
    """Lemma 4.2's bound on the probability that one arm is outside at round ``t``,
    ``2 ceil(log2(t - 1)) t**(-alpha / 2)`` (times ``num_arms`` for some arm), capped at 1.

    The factor ``ceil(log2(t - 1))`` counts the intervals of the lemma's proof, which
    splits the range of ``zeta_i`` into exponentially growing intervals: at ``t = 2``
    that range is one point, one interval, where the printed formula's 0 would bound a
    probability that is not 0.  So the count here is at least 1.

    Args:
        t: rounds ``>= 2`` (array-like).
        alpha: the interval's ``alpha``, finite and > 0.
        num_arms: the number of arms counted, an integer >= 1.
    """
    t = float_array("t", t, "rounds >= 2")
    if not np.all(np.isfinite(t) & (t >= 2)):  # NaN included
        raise ArgumentError(f"t must be finite rounds >= 2, got {t.tolist()!r}.", argument="t")
    check_positive("alpha", alpha)
    integer("num_arms", num_arms, 1)
    per_arm = 2 * np.maximum(np.ceil(np.log2(t - 1)), 1) * t ** (-alpha / 2)
    return np.minimum(1.0, num_arms * per_arm)


REGISTRY = {"estimator_deviation": estimator_deviation}


def make(name: str, **params) -> Monitor:
    """A registered monitor by name (for sweep configurations)."""
    if name not in REGISTRY:
        raise ArgumentError(f"unknown monitor {name!r}; known monitors: {', '.join(sorted(REGISTRY))}.", argument="name")
    check_keywords(f"monitor {name!r}", REGISTRY[name], params)
    return REGISTRY[name](**params)
