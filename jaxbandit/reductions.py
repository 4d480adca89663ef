"""Reductions over the arms, in the forms that XLA's CPU backend runs fastest.

Under ``vmap`` over thousands of runs, a reduction over each run's K arms is one of
the largest costs of a round.  XLA fuses a reduction with the elementwise work that
produces its operand, and a ``bool`` or variadic reduction (``jnp.all``,
``jnp.argmax``) then runs as one scalar loop per run.  An integer minimum runs instead
as a vectorised elementwise pass and a library reduction: ``int32`` in
:func:`first_true`, ``int8`` in :func:`all_true` (XLA keeps an ``int32`` minimum of
flags in the fused loop).  Both give exactly the answers of the ``jnp`` functions they
replace; ``benchmarks/README.md`` has the timings.  :func:`ordered_sum` serves results
that must not depend on the batch's shape.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxbandit._types import Array

__all__ = ["all_true", "first_true", "ordered_sum"]


def all_true(flags: Array) -> Array:
    """``jnp.all(flags, axis=-1)``: ``(..., K)`` bool, ``K >= 1`` -> ``(...)`` bool."""
    return jnp.min(flags.astype(jnp.int8), axis=-1) > 0


def first_true(flags: Array) -> Array:
    """``jnp.argmax(flags, axis=-1)`` for bool ``flags``: the first ``True`` (0 if none).

    ``(..., K)`` bool, ``K >= 1`` -> ``(...)`` int32."""
    num = flags.shape[-1]
    first = jnp.min(jnp.where(flags, jnp.arange(num, dtype=jnp.int32), num), axis=-1)
    return jnp.where(first == num, 0, first).astype(jnp.int32)


def ordered_sum(values: Array) -> Array:
    """``values.sum(axis=-1)`` added in index order, so that each sum has the same bits
    whatever the other axes hold: a dot or a library reduction may round otherwise as
    the runs' dimension changes (XLA's CPU dot does).  ``(..., K)`` -> ``(...)``."""
    return jax.lax.fori_loop(1, values.shape[-1], lambda k, total: total + values[..., k], values[..., 0])
