"""Policies written the way users write them, for the tests of the contract.

They are importable (``tests.user_policies:fixed_arm``) so that sweep configurations
can name them by import path.
"""

from __future__ import annotations

import types

import jax.numpy as jnp

import jaxbandit as jb
from jaxbandit import estimator


ARM = 0  # a module-level setting, as users keep one in a helper module


def _estimator_policy(select_fn, name: str, params=None) -> jb.Policy:
    def init_fn(ctx):
        return estimator.init(ctx.sigma.shape[-1], ctx.sigma.dtype)

    def update_fn(stats, arm, values, ctx):
        return estimator.update(stats, arm, values, ctx.precision[arm])

    return jb.Policy(init_fn, select_fn, update_fn, consolidate_fn=estimator.consolidate, name=name, params=params or {})


def fixed_arm(arm: int = 0) -> jb.Policy:
    """Always plays ``arm``, captured in a closure (the habit of optax users)."""

    def select_fn(key, stats, t, ctx):
        return jb.play(arm)

    return _estimator_policy(select_fn, "fixed_arm")


def threshold(eps: float = 0.1) -> jb.Policy:
    """Plays arm 1 when the captured ``eps`` exceeds 0.5, else arm 0."""

    def select_fn(key, stats, t, ctx):
        return jb.play(jnp.where(eps > 0.5, 1, 0))

    return _estimator_policy(select_fn, "threshold")


def traced_threshold(eps: float = 0.1) -> jb.Policy:
    """As :func:`threshold`, with ``eps`` traced through ``params``: a grid compiles once."""

    def select_fn(key, stats, t, ctx):
        return jb.play(jnp.where(ctx.params["eps"] > 0.5, 1, 0))

    return _estimator_policy(select_fn, "traced_threshold", {"eps": eps})


def captured_and_traced(eps: float = 0.1) -> jb.Policy:
    """As :func:`threshold` (the captured ``eps`` decides), with ``eps`` in ``params``
    too: values of a grid compute differently though traced alike."""

    def select_fn(key, stats, t, ctx):
        return jb.play(jnp.where(eps > 0.5, 1, 0))

    return _estimator_policy(select_fn, "captured_and_traced", {"eps": eps})


def named_as_the_views(counts: float = 0.0, arm: float = 0.0) -> jb.Policy:
    """:func:`traced_threshold` with hyper-parameters named as the result views name
    their own data (``counts``, ``arm``)."""

    def select_fn(key, stats, t, ctx):
        return jb.play(jnp.where(ctx.params["counts"] + ctx.params["arm"] > 0.5, 1, 0))

    return _estimator_policy(select_fn, "named_as_the_views", {"counts": counts, "arm": arm})


def keyword_threshold(**params) -> jb.Policy:
    """:func:`traced_threshold` with its hyper-parameters taken as keywords (``**params``)."""
    unknown = sorted(set(params) - {"eps"})
    if unknown:
        raise jb.ArgumentError(f"keyword_threshold got unknown parameter(s) {unknown}; it accepts ['eps'].", argument=unknown[0])
    return traced_threshold(**params)


def arm_out_of_range(bad_round: int = 7) -> jb.Policy:
    """Plays arm 0, except arm ``K`` (one past the last arm) at round ``bad_round``."""

    def select_fn(key, stats, t, ctx):
        num_arms = ctx.sigma.shape[-1]
        return jb.play(jnp.where(t == bad_round, num_arms, 0))

    return _estimator_policy(select_fn, "arm_out_of_range")


def not_a_factory() -> int:
    return 3


def crashing_factory(eps: float = 0.1) -> jb.Policy:
    """A factory with a bug of its own."""
    raise RuntimeError("the factory's own bug")


def uncallable_check_params(eps: float = 0.1) -> jb.Policy:
    """A policy whose ``check_params`` is not a function (``eps`` in its params)."""
    return traced_threshold(eps)._replace(check_params=1)


def bounded_eps(eps: float = 0.1) -> jb.Policy:
    """A factory that refuses some values with a plain ValueError (naming no argument)."""
    if eps > 0.5:
        raise ValueError("eps too big")
    return traced_threshold(eps)


def buggy_check_params(eps: float = 0.1) -> jb.Policy:
    """A policy whose ``check_params`` has a bug of its own (a key its params lack)."""
    return traced_threshold(eps)._replace(check_params=lambda params: params["alpha"] > 0)


def ucb_n_worst_arm() -> jb.Policy:
    """``ucb_n`` with its select_fn replaced (always the last arm); the name stays "ucb_n"."""

    def select_fn(key, state, t, ctx):
        return jb.play(ctx.sigma.shape[-1] - 1)

    return jb.policies.make("ucb_n")._replace(select_fn=select_fn)


def float_arm() -> jb.Policy:
    """Plays arm ``t / 2`` as a float: the arm is computed from a traced round, not an integer."""

    def select_fn(key, stats, t, ctx):
        return jb.play(t / 2)

    return _estimator_policy(select_fn, "float_arm")


SHARED = types.SimpleNamespace(arm=0)


def shared_setting(arm: int = 0) -> jb.Policy:
    """Plays ``arm``, kept in a module global that each call overwrites: building a
    second policy changes what the first computes."""
    SHARED.arm = arm
    return jb.policies.make("greedy")._replace(
        select_fn=lambda key, state, t, ctx: jb.play(jnp.int32(SHARED.arm)), name="shared_setting", params={}
    )


def per_arm_weight() -> jb.Policy:
    """A per-arm vector in ``params``, where a simulation would read one value per cell."""
    return fixed_arm(0)._replace(params={"w": jnp.asarray([1.0, 1.0, 2.0])})
