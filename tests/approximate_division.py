"""Float32 division as a GPU does it by default, on the CPU: within about 2 ulp.

XLA's GPU compiler emits float32 ``x / y`` as ``div.full.f32``, an approximation with
an error of up to 2 units in the last place (CPUs divide correctly rounded, 0.5 ulp).
Inside :func:`approximate_division`, jitted float32 divisions are lowered as
``x * (1 / y)`` (two roundings, up to 1.5 ulp) and then moved by one more ulp, up or
down depending on the product's last two bits: up to 2.5 ulp, as often too small as
too large.  Other dtypes are untouched.

The emulation is not the GPU's arithmetic, only an error of the same size: it tests
that the solver's verdicts survive such an error.  The solver refines float32 division
off the CPU (``jaxbandit.lp.numerics.divide``); ``tests/test_lp.py`` checks that
refinement against this emulation.

This replaces the CPU lowering rule of ``lax.div_p`` through JAX's internal MLIR
registry (``mlir._platform_specific_lowerings``), so it depends on JAX internals; the
caches are cleared on entry and exit so that nothing compiled inside is used outside.
"""

import contextlib

import jax
import numpy as np
from jax import lax


@contextlib.contextmanager
def approximate_division():
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    registry = mlir._platform_specific_lowerings["cpu"]
    saved = registry.get(lax.div_p)
    exact = saved or mlir._lowerings[lax.div_p]
    exact_rule = getattr(exact, "rule", exact)

    def rule(ctx, x, y):
        out = ctx.avals_out[0]
        if out.dtype != np.float32:
            return exact_rule(ctx, x, y)
        x, y = mlir.multi_broadcast_in_dim(ctx, (x, y), ctx.avals_in, out.shape, out.sharding)
        quotient = hlo.multiply(x, hlo.divide(mlir.full_like_aval(ctx, 1.0, out), y))
        bits_type = ir.RankedTensorType.get(out.shape, ir.IntegerType.get_signless(32))
        bits = hlo.bitcast_convert(bits_type, quotient)
        one = mlir.full_like_aval(ctx, 1, out.update(dtype=np.dtype(np.int32)))
        # one ulp away from zero if the last bit is set, else towards zero if the next is
        away, towards = hlo.and_(bits, one), hlo.and_(hlo.shift_right_logical(bits, one), one)
        nudged = hlo.bitcast_convert(quotient.type, hlo.subtract(hlo.add(bits, away), towards))
        return [hlo.select(hlo.is_finite(quotient), nudged, quotient)]

    mlir.register_lowering(lax.div_p, rule, platform="cpu")
    jax.clear_caches()
    try:
        yield
    finally:
        if saved is None:
            del registry[lax.div_p]
        else:
            registry[lax.div_p] = saved
        jax.clear_caches()
