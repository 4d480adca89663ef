"""Counter-based random numbers: the noise of run r at round t is a pure function of
``(seed, cell, r, t)``.

Every random number in a simulation comes from the Threefry-2x32 block cipher
(20 rounds, Salmon et al., SC 2011 "Parallel random numbers: as easy as 1, 2, 3";
the generator behind ``jax.random``) applied to a counter:

* a *run key* (two uint32 words) is ``threefry(stream_key(seed, stream), (cell, run))``;
* the standard normal ``z[r, t, j]`` comes from ``threefry(run_key, (t, j))``, and so
  do the uniform and the Student's t draw of entry ``j`` (one of them per noise family).

So results cannot depend on batch size, chunk size, device count or on which policy is
run (two policies with the same seed see the same noise: common random numbers).
Every counter is its own 32-bit word, so nothing wraps before ``t`` or ``run`` reach
``2**32``.

Normals use Box–Muller (one cosine branch per 64-bit block): ``u1`` takes 40 bits, so
``|z|`` reaches about 7.5 before the grid of ``u1`` truncates the tail (P(|z| > 7.5) is
6e-14), and the cosine is a polynomial on a quarter turn, cheaper on a CPU than
``jnp.cos`` (``benchmarks/throughput.py`` compares this path with ``jax.random.normal``).
Student's t draws use the same two numbers with another radius (:func:`student_t`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit._numbers import ArgumentError, integer
from jaxbandit._types import Array

__all__ = [
    "threefry2x32",
    "seed_words",
    "stream_key",
    "run_keys",
    "standard_normal",
    "student_t",
    "uniform",
    "fold_in",
    "NOISE_STREAM",
    "POLICY_STREAM",
]

NOISE_STREAM = 0  # observation noise
POLICY_STREAM = 1  # a policy's own randomness (Thompson sampling, epsilon-greedy)

_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_PARITY = 0x1BD11BDA


def threefry2x32(key: tuple[Array, Array], counter: tuple[Array, Array], rounds: int = 20):
    """Threefry-2x32 block cipher on uint32 words (broadcasting over all inputs).

    Args:
        key: two uint32 arrays ``(k0, k1)``.
        counter: two uint32 arrays ``(c0, c1)``.
        rounds: number of rounds (20, as in Random123 and ``jax.random``).

    Returns:
        Two uint32 arrays, the encrypted counter.
    """
    k0, k1 = (jnp.asarray(k, jnp.uint32) for k in key)
    k2 = k0 ^ k1 ^ jnp.uint32(_PARITY)
    schedule = (k0, k1, k2)
    x0 = jnp.asarray(counter[0], jnp.uint32) + k0
    x1 = jnp.asarray(counter[1], jnp.uint32) + k1
    for i in range(rounds):
        rotation = _ROTATIONS[i % 8]
        x0 = x0 + x1
        x1 = (x1 << jnp.uint32(rotation)) | (x1 >> jnp.uint32(32 - rotation))
        x1 = x1 ^ x0
        if i % 4 == 3:  # key injection every four rounds
            s = (i + 1) // 4
            x0 = x0 + schedule[s % 3]
            x1 = x1 + schedule[(s + 1) % 3] + jnp.uint32(s)
    return x0, x1


def seed_words(seed: int) -> tuple[int, int]:
    """Split a non-negative integer seed (< 2**64) into two uint32 words."""
    seed = integer("seed", seed, 0, 2**64 - 1)
    return seed & 0xFFFFFFFF, seed >> 32


# The two key derivations below are jitted: they run on the host's concrete arrays, where
# each of the cipher's operations would otherwise compile a program of its own for every
# new shape.  Integer arithmetic: jitted or not, the keys are the same.


def stream_key(seed: int, stream: int) -> tuple[Array, Array]:
    """Key of one independent stream (noise, policy) derived from the seed."""
    words = seed_words(seed)
    return _stream_key(np.uint32(words[0]), np.uint32(words[1]), np.uint32(stream))


@jax.jit
def _stream_key(word0, word1, stream):
    return threefry2x32((word0, word1), (stream, jnp.uint32(0)))


def run_keys(key: tuple[Array, Array], cell: Array, run: Array) -> Array:
    """Per-run keys ``(..., 2)`` uint32 from a stream key, a cell index and run indices."""
    return _run_keys(key, jnp.asarray(cell, jnp.uint32), jnp.asarray(run, jnp.uint32))


@jax.jit
def _run_keys(key, cell, run):
    cell, run = jnp.broadcast_arrays(cell, run)
    k0, k1 = threefry2x32(key, (cell, run))
    return jnp.stack([k0, k1], axis=-1)


def _unit_interval(words: Array, extra: Array, dtype) -> Array:
    """``(0, 1]`` uniforms from 32 bits plus 8 more low bits (so ``u`` >= 2**-41)."""
    high = words.astype(dtype) * dtype(2.0**-32)
    low = ((extra & jnp.uint32(0xFF)).astype(dtype) + dtype(0.5)) * dtype(2.0**-40)
    return jnp.minimum(high + low, dtype(1.0))


def _cos_turns(turns: Array, dtype) -> Array:
    """``cos(2 pi turns)`` for ``turns`` in [0, 1), by quarter-turn reduction.

    Float32: a degree-8 Taylor polynomial on [-pi/4, pi/4] (max error 4e-7, below the
    float32 rounding of the result).  Float64 uses ``jnp.cos`` (validation mode).
    """
    if dtype == jnp.float64:
        return jnp.cos(turns * dtype(2 * np.pi))
    quarter = jnp.round(turns * dtype(4.0))
    r = (turns - quarter * dtype(0.25)) * dtype(2 * np.pi)  # in [-pi/4, pi/4]
    quadrant = quarter.astype(jnp.int32) & 3
    r2 = r * r
    cos_r = 1 + r2 * (-1 / 2 + r2 * (1 / 24 + r2 * (-1 / 720 + r2 * (1 / 40320))))
    sin_r = r * (1 + r2 * (-1 / 6 + r2 * (1 / 120 + r2 * (-1 / 5040 + r2 * (1 / 362880)))))
    return jnp.where(
        quadrant == 0, cos_r, jnp.where(quadrant == 1, -sin_r, jnp.where(quadrant == 2, -cos_r, sin_r))
    )


def _polar(run_key: Array, t: Array, num: int, dtype) -> tuple[Array, Array]:
    """Entry ``j``'s block at counter ``(t, j)`` as ``(u, turns)``: ``u`` in ``(0, 1]``
    (40 bits, :func:`_unit_interval`) and ``turns`` in ``[0, 1)`` (the other 24 bits)."""
    index = jnp.arange(num, dtype=jnp.uint32)
    a, b = threefry2x32((run_key[0], run_key[1]), (jnp.asarray(t, jnp.uint32), index))
    return _unit_interval(a, b, dtype), (b >> jnp.uint32(8)).astype(dtype) * dtype(2.0**-24)


def standard_normal(run_key: Array, t: Array, num: int, dtype=jnp.float32) -> Array:
    """``num`` standard normals for one run at counter ``t``.

    Entry ``j`` comes from the block that gives :func:`uniform`'s entry ``j`` at the
    same ``(run_key, t)``: the two are dependent.  A round that needs both draws one of
    them from another key, :func:`fold_in`.

    Args:
        run_key: ``(2,)`` uint32 run key (see :func:`run_keys`).
        t: scalar uint32 counter, e.g. the round (a policy's ``t`` counts from 1).
        num: number of normals (static), e.g. the number of arms.
        dtype: float32 or float64.

    Returns:
        ``(num,)`` array of N(0, 1) draws; entry ``j`` depends only on (key, t, j).
    """
    dtype = jnp.dtype(dtype).type
    u, turns = _polar(run_key, t, num, dtype)
    radius = jnp.sqrt(dtype(-2.0) * jnp.log(u))
    return radius * _cos_turns(turns, dtype)


def student_t(run_key: Array, t: Array, num: int, df: float, dtype=jnp.float32) -> Array:
    """``num`` draws of Student's t with ``df`` degrees of freedom (static, > 0) for one
    run at counter ``t``, from the same blocks as :func:`standard_normal`.

    Bailey's polar method (Math. Comp. 62, 1994), without its rejection step: for
    ``(U, V)`` uniform on the unit disc and ``W = U**2 + V**2``,
    ``U sqrt(df (W**(-2/df) - 1) / W)`` is t-distributed; writing the point as
    ``W = u``, angle ``2 pi turns`` gives ``sqrt(df (u**(-2/df) - 1)) cos(2 pi turns)``,
    Box-Muller with another radius (``-2 log u`` is its ``df -> inf`` limit).  The
    radius grows as ``u`` shrinks, so the 40-bit grid of ``u`` cuts the tails with
    probability ``P(u < 2**-41)``, as for the normals.

    Returns:
        ``(num,)`` t draws (variance ``df / (df - 2)`` for ``df > 2``, less the cut
        tails: :func:`jaxbandit.noise.cut_variance_share`); entry ``j``
        depends only on (key, t, j).
    """
    dtype = jnp.dtype(dtype).type
    u, turns = _polar(run_key, t, num, dtype)
    log_u = jnp.log(u)
    # A df beyond the dtype is drawn as its largest number: the same df -> inf limit to
    # the dtype's precision.
    df = min(float(df), float(jnp.finfo(dtype).max))
    # expm1: u**(-2/df) - 1 loses its digits to cancellation for u near 1.  Where the
    # exponent is below the smallest normal number (a huge df: flushed to zero), the
    # radius is its df -> inf limit, Box-Muller's.
    exponent = dtype(-2.0 / df) * log_u
    limit = dtype(-2.0) * log_u
    squared = jnp.where(jnp.abs(exponent) < jnp.finfo(dtype).tiny, limit, dtype(df) * jnp.expm1(exponent))
    return jnp.sqrt(squared) * _cos_turns(turns, dtype)


def uniform(run_key: Array, t: Array, num: int, dtype=jnp.float32) -> Array:
    """``num`` uniforms in ``(0, 1]`` for one run at counter ``t`` (see
    :func:`standard_normal`, whose draws at the same counter depend on these)."""
    dtype = jnp.dtype(dtype).type
    return _polar(run_key, t, num, dtype)[0]


def fold_in(run_key: Array, data) -> Array:
    """A ``(2,)`` uint32 key for draws independent of those of ``run_key`` (and of any
    other ``data``, an integer in ``[0, 2**32)``, or a traced integer scalar):
    ``threefry(run_key, (data, 2**32 - 1))``, a counter no draw of ``run_key`` uses
    (its second word is an entry index below ``num``)."""
    if not isinstance(data, jax.core.Tracer):
        data = integer("data", data, 0, 2**32 - 1)
    elif data.shape != () or not jnp.issubdtype(data.dtype, jnp.integer):
        raise ArgumentError(f"data must be an integer scalar, got {data.dtype}{list(data.shape)}.", argument="data")
    k0, k1 = threefry2x32((run_key[0], run_key[1]), (jnp.asarray(data, jnp.uint32), jnp.uint32(0xFFFFFFFF)))
    return jnp.stack([k0, k1])
