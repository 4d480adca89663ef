"""Tests of the generic small-LP solver (jaxbandit.lp) against scipy's HiGHS.

The bandit-LP sweep over instance families lives in test_lower_bound.py; here: the
standard form on hand-made and random dense LPs (mixed signs, infeasible ones), the
status codes, the canonical-solution rule, vmap against single solves and the basis check.

Nearly all of this module's time is XLA compiling the solver, so the batched cold
solves share programs: every one has ``LANES`` lanes (:func:`solve_lps`), and the LPs
are 4 x 6 wherever the shape is not what is tested.  They compile with the host's
compiler options (:class:`jaxbandit.compile_options.Program`, as ``jb.lower_bound``
does), to the same bits as XLA's defaults in less time
(``test_lower_bound.py::test_the_host_programs_compiler_options_keep_the_bits``); the
engine's chunk step, which runs the solver under either (by the simulation's length,
``test_engine.py``), is checked by the policies' reference-loop tests.
"""

import functools
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog

from jaxbandit import bound_lp, lp
from jaxbandit.compile_options import Program
from jaxbandit import instances as jb_instances
from jaxbandit.lp import numerics, pivoting, warm_start
from jaxbandit.lp import tableau as lp_tableau
from tests.approximate_division import approximate_division

Status = lp.LPStatus


def highs(cost, matrix, rhs, method="highs-ds"):
    """scipy reference for ``min cost @ x  s.t.  A x >= b, x >= 0``."""
    return linprog(cost, A_ub=-matrix, b_ub=-rhs, bounds=(0, None), method=method)


def lexicographic_reference(cost, matrix, rhs):
    """The canonical optimum by a chain of linprog stages: cost, sum(x), x[0], x[1], ..."""
    n = len(cost)
    objectives = [cost, np.ones(n)] + list(np.eye(n))
    a_ub, b_ub = [-matrix], [-rhs]
    x = None
    for objective in objectives:
        result = linprog(objective, A_ub=np.vstack(a_ub), b_ub=np.concatenate(b_ub), method="highs-ds")
        assert result.status == 0
        x = result.x
        # Keep this objective at its optimum (a relative slack absorbs HiGHS' tolerance).
        a_ub.append(objective[None, :])
        b_ub.append([result.fun + 1e-9 * max(1.0, abs(result.fun))])
    return x


_vmapped_solve = Program(jax.vmap(lp.solve))
LANES = 200


def solve_lps(cost, matrix, rhs):
    """``vmap(lp.solve)`` as numpy, on at most ``LANES`` LPs padded to ``LANES`` with
    copies of the first (each lane's answer does not depend on the others), so that
    each (m, n, dtype) compiles once for the whole module."""
    count = len(cost)
    take = np.concatenate([np.arange(count), np.zeros(LANES - count, int)])
    out = _vmapped_solve(*(np.asarray(a)[take] for a in (cost, matrix, rhs)))
    return jax.tree.map(lambda a: np.asarray(a)[:count], out)


def test_hand_made_lp_and_shapes():
    with jax.enable_x64(True):
        cost = np.array([1.0, 2.0])
        matrix = np.array([[1.0, 1.0], [1.0, 3.0]])
        rhs = np.array([2.0, 3.0])
        solution = lp.solve(cost, matrix, rhs)
        np.testing.assert_allclose(solution.x, [1.5, 0.5], rtol=1e-12)
        assert float(solution.objective) == pytest.approx(2.5, rel=1e-12)
        assert int(solution.status) == Status.OPTIMAL
        assert solution.x.dtype == jnp.float64
        assert solution.status.dtype == jnp.int32 and solution.num_iterations.dtype == jnp.int32
        assert solution.basis.shape == (2,)
    solution32 = lp.solve(cost.astype(np.float32), matrix.astype(np.float32), rhs.astype(np.float32))
    assert solution32.x.dtype == jnp.float32
    np.testing.assert_allclose(solution32.x, [1.5, 0.5], rtol=1e-6)


def test_status_codes_never_nan():
    with jax.enable_x64(True):
        infeasible = lp.solve(np.ones(2), np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([1.0, 1.0]))
        assert int(infeasible.status) == Status.INFEASIBLE
        assert np.isinf(infeasible.objective) and np.all(np.isfinite(infeasible.x))
        # Farkas with mixed signs: x0 - x1 >= 1 and x1 - x0 >= 1.
        farkas = lp.solve(np.ones(2), np.array([[1.0, -1.0], [-1.0, 1.0]]), np.ones(2))
        assert int(farkas.status) == Status.INFEASIBLE
        for bad in (
            dict(cost=np.array([1.0, np.nan])),
            dict(cost=np.array([1.0, -1.0])),
            dict(matrix=np.array([[1.0, np.inf], [0.0, 1.0]])),
        ):
            args = dict(cost=np.ones(2), matrix=np.eye(2), rhs=np.ones(2)) | bad
            out = lp.solve(args["cost"], args["matrix"], args["rhs"])
            assert int(out.status) == Status.INVALID_INPUT
            assert np.all(np.isfinite(out.x)) and not np.isnan(out.objective)
        # 2 x 2 as above: a given budget makes a program of its own, the smaller the better
        capped = lp.solve(np.ones(2), np.ones((2, 2)) + np.eye(2), np.ones(2), max_iterations=0)
        assert int(capped.status) == Status.MAX_ITERATIONS
        assert np.all(np.isfinite(capped.x))


def test_input_validation_is_host_side():
    with pytest.raises(ValueError, match="cost must have shape"):
        lp.solve(np.ones(3, np.float32), np.eye(2, dtype=np.float32), np.ones(2, np.float32))
    with pytest.raises(ValueError, match="A must have shape"):
        lp.solve(np.ones(2, np.float32), np.ones(2, np.float32), np.ones(2, np.float32))
    with pytest.raises(ValueError, match="initial_basis"):
        lp.solve(np.ones(2, np.float32), np.eye(2, dtype=np.float32), np.ones(2, np.float32), initial_basis=[0])


def _random_lps(seed, count, m, n):
    """Dense LPs with mixed-sign A and b: some infeasible, some with x = 0 optimal."""
    rng = np.random.default_rng(seed)
    cost = rng.uniform(0, 1, (count, n)) * (rng.uniform(size=(count, n)) < 0.9)
    matrix = rng.normal(size=(count, m, n))
    rhs = rng.normal(size=(count, m))
    return cost, matrix, rhs


@pytest.mark.parametrize("m,n", [(4, 6), (8, 5)])
def test_random_dense_lps_against_highs(m, n):
    cost, matrix, rhs = _random_lps(m * 100 + n, 150, m, n)
    with jax.enable_x64(True):
        out = solve_lps(cost, matrix, rhs)
    seen = set()
    for k in range(len(cost)):
        reference = highs(cost[k], matrix[k], rhs[k])
        if reference.status == 2:
            assert out.status[k] == Status.INFEASIBLE, k
            seen.add("infeasible")
        elif reference.status == 0:
            assert out.status[k] == Status.OPTIMAL, k
            scale = max(abs(reference.fun), 1e-12)
            assert abs(out.objective[k] - reference.fun) <= 1e-7 * scale, k
            residual = matrix[k] @ out.x[k] - rhs[k]
            assert np.all(residual >= -1e-9 * (np.abs(matrix[k]) @ out.x[k] + np.abs(rhs[k]))), k
            assert np.all(out.x[k] >= 0)
            seen.add("optimal")
    assert seen == {"infeasible", "optimal"}


def test_canonical_solution_is_lexicographic_minimum():
    """Duplicated and zero-cost columns make the optimum non-unique (4 x 5 LPs, with a
    sixth column of zeros, also free: the 4 x 6 shape of the module's other solves)."""
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(12):
        base = rng.uniform(0.1, 1, (4, 3))
        free = rng.uniform(0.1, 1, (4, 1))
        matrix = np.concatenate([base, base[:, :1], free, np.zeros((4, 1))], axis=1)  # col 3 == col 0
        cost = np.array([1.0, 1.3, 0.0, 1.0, 0.0, 0.0])
        cost[4] = 0.0  # two free columns, and the zero one
        cases.append((cost, matrix, rng.uniform(0.5, 2, 4)))
    cost, matrix, rhs = map(np.stack, zip(*cases))
    with jax.enable_x64(True):
        out = solve_lps(cost, matrix, rhs)
    for k in range(len(cases)):
        expected = lexicographic_reference(cost[k], matrix[k], rhs[k])
        assert out.status[k] == Status.OPTIMAL
        np.testing.assert_allclose(out.x[k], expected, rtol=1e-6, atol=1e-8)


_single_solve = Program(lp.solve)


def test_vmap_equals_a_loop_of_single_solves():
    """The vmapped solve against ``lp.solve`` called on each LP alone (itself jitted:
    an op-by-op run of the pivot loops would compile each operation), compiled with
    the vmapped program's options: only the batching differs."""
    cost, matrix, rhs = _random_lps(7, 4, 4, 6)
    cost, matrix, rhs = (a.astype(np.float32) for a in (cost, matrix, rhs))
    batched = solve_lps(cost, matrix, rhs)
    for k in range(4):
        single = _single_solve(cost[k], matrix[k], rhs[k])
        for name in ("status", "num_iterations", "basis"):
            np.testing.assert_array_equal(getattr(batched, name)[k], getattr(single, name))
        np.testing.assert_allclose(batched.x[k], single.x, rtol=1e-6, atol=0)


def test_check_basis_accepts_the_optimal_basis_only():
    cost, matrix, rhs = _random_lps(11, 30, 4, 6)
    matrix = np.abs(matrix)
    rhs = np.abs(rhs) + 0.1
    with jax.enable_x64(True):
        check = Program(jax.vmap(lp.check_basis))
        warm_solve = Program(jax.vmap(lambda c, a, b, s: lp.solve(c, a, b, initial_basis=s)))
        cold = solve_lps(cost, matrix, rhs)
        again = check(cost, matrix, rhs, cold.basis)
        surplus = jnp.broadcast_to(lp.surplus_basis(4, 6), (30, 4))
        not_ok = check(cost, matrix, rhs, surplus)
        warm = warm_solve(cost, matrix, rhs, cold.basis)
    unique = np.asarray(again.ok)
    assert unique.mean() > 0.8  # random data: the optimum is unique almost surely
    np.testing.assert_array_equal(np.asarray(again.solution.x)[unique], np.asarray(cold.x)[unique])
    assert not np.any(np.asarray(not_ok.ok))  # x = 0 is infeasible here
    np.testing.assert_array_equal(np.asarray(warm.x), np.asarray(cold.x))
    assert np.all(np.asarray(warm.num_iterations)[unique] == 0)
    # columns 0 and 3 the same at one cost, no free column: where they are used the optimum
    # is not unique, and the canonical one puts the weight on column 3 (x[0] = 0 first).
    # The optimal basis with column 0 instead is no answer: the check refuses it, and a
    # solve started from it ends at the canonical optimum.
    tied = _tied_lps(21, 30)
    with jax.enable_x64(True):
        cold = solve_lps(*tied)
        swapped = np.where(cold.basis == 3, 0, cold.basis)
        check_swapped = check(*tied, swapped)
        warm = warm_solve(*tied, swapped)  # the same shapes: the program compiled above
    used = np.flatnonzero(np.any(cold.basis == 3, axis=1) & (cold.x[:, 3] > 1e-9))
    assert len(used) >= 5 and np.all(cold.status == Status.OPTIMAL)
    for k in used:
        np.testing.assert_allclose(cold.x[k], lexicographic_reference(*(a[k] for a in tied)), rtol=1e-6, atol=1e-6)
    assert not np.any(np.asarray(check_swapped.ok)[used])
    for name in ("x", "basis"):
        np.testing.assert_array_equal(np.asarray(getattr(warm, name))[used], getattr(cold, name)[used])


def _tied_lps(seed, count):
    """``count`` 4 x 6 LPs whose columns 0 and 3 are one column at one cost, and whose
    every column costs something."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.1, 1, (count, 4, 3))
    matrix = np.concatenate([base, base[:, :, :1], rng.uniform(0.1, 1, (count, 4, 2))], axis=2)
    cost = rng.uniform(0.5, 2, (count, 6))
    cost[:, 3] = cost[:, 0]
    return cost, matrix, rng.uniform(0.5, 2, (count, 4))


def _single_loop_pivots(cost, matrix, rhs, basis):
    """The pivot loop as one loop of ``next_step`` (dual and primal steps together) from
    the tableau of ``basis``: the reference for ``pivoting.pivot_loop``'s dual-first split."""
    scaled = lp_tableau.scale(cost, matrix, rhs)
    tolerance = jnp.asarray(lp.default_tolerance(matrix.dtype), matrix.dtype)
    budget = 3 * sum(matrix.shape)

    def body(carry):
        tableau, count, _ = carry
        step = pivoting.next_step(tableau, scaled, tolerance, False)
        pivoted = lp_tableau.pivot(tableau, step.leave, step.enter)
        tableau = jax.tree.map(lambda a, b: jnp.where(step.can_pivot, a, b), pivoted, tableau)
        return tableau, count + step.can_pivot.astype(jnp.int32), step.can_pivot

    carry = (lp_tableau.factorised_tableau(scaled, basis), jnp.int32(0), jnp.bool_(True))
    tableau, count, _ = jax.lax.while_loop(lambda c: c[2] & (c[1] < budget), body, carry)
    return tableau.basis, count


def _split_loop_pivots(cost, matrix, rhs, basis):
    scaled = lp_tableau.scale(cost, matrix, rhs)
    tolerance = jnp.asarray(lp.default_tolerance(matrix.dtype), matrix.dtype)
    tableau = lp_tableau.factorised_tableau(scaled, basis)
    return pivoting.pivot_loop(tableau, scaled, jnp.int32(0), 3 * sum(matrix.shape), tolerance, jnp.bool_(False))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dual_first_pivot_loop_takes_the_single_loops_pivots(dtype):
    """The pivot loop runs dual steps in a loop of their own first: while the basis is
    primal infeasible the single loop's step is the dual one, so both take the same
    pivots (same final basis, same count).  From the surplus basis (dual steps only, on
    mixed-sign and covering LPs), and from the optimal basis of other costs (primal
    feasible, not dual feasible: primal steps, which the second loop takes where
    ``pivoting._may_take_primal_step`` lets it run)."""
    cost, matrix, rhs = _random_lps(21, 200, 4, 6)
    covering = (cost, np.abs(matrix), np.abs(rhs) + 0.1)
    other_cost = np.random.default_rng(22).uniform(0, 1, cost.shape)
    with jax.enable_x64(dtype == np.float64):
        surplus = jnp.broadcast_to(lp.surplus_basis(4, 6), (200, 4))
        other_optimum = solve_lps(*(np.asarray(a, dtype) for a in (other_cost,) + covering[1:])).basis
        cases = (((cost, matrix, rhs), surplus), (covering, surplus), (covering, other_optimum))
        data = [jnp.asarray(np.concatenate([c[0][i] for c in cases]), dtype) for i in range(3)]
        basis = jnp.concatenate([c[1] for c in cases])
        single = Program(jax.vmap(_single_loop_pivots))(*data, basis)
        split = Program(jax.vmap(_split_loop_pivots))(*data, basis)
    np.testing.assert_array_equal(np.asarray(split[0]), np.asarray(single[0]))
    np.testing.assert_array_equal(np.asarray(split[1]), np.asarray(single[1]))
    # Several pivots in every case, primal ones from the other costs' optimum.
    assert all(np.asarray(single[1])[200 * k : 200 * (k + 1)].max() >= 3 for k in range(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_factors_are_exact_powers_of_two_and_halves_split_exactly(dtype):
    """The scaling must add no rounding (XLA's float32 ``exp2`` is approximate, so the
    powers of two are built from their bits), and ``split``'s halves must add up to ``v`` exactly, each
    short enough (12 / 26 significant bits) that products of halves are exact; ties
    round away from zero.  200,000 values spanning 1e-26..1e26, both signs."""
    rng = np.random.default_rng(3)
    x = np.exp(rng.uniform(-60, 60, 200_000)).astype(dtype)
    x[:3] = [2.0**13, 1.5 * 2.0**-20, np.sqrt(2.0) * 2.0**7]  # exact, and at rounding edges
    with jax.enable_x64(dtype == np.float64):
        scale = np.asarray(jax.jit(numerics.power_of_two_reciprocal)(x))
        ones = np.asarray(numerics.power_of_two_reciprocal(np.array([0.0, -3.0], dtype)))
        signed = x * rng.choice(np.array([-1, 1], dtype), x.shape)
        high, low = (np.asarray(a) for a in jax.jit(numerics.split)(signed))
        ties = np.array([1 + 2.0**-12, -(1 + 2.0**-12)], dtype)  # halfway between 12-bit neighbours
        tie = np.asarray(numerics.split(ties)[0]) if dtype == np.float32 else None
    fraction, exponent = np.frexp(scale)
    assert np.all(fraction == 0.5), scale[fraction != 0.5][:5]  # exact powers of two
    distance = np.abs(np.log2(x.astype(np.float64)) + (exponent - 1))  # |log2 x - round(log2 x)|
    assert np.all(distance <= 0.5 + 1e-6)  # either side of a sqrt(2) edge will do
    assert scale[0] == 2.0**-13 and np.array_equal(ones, [1.0, 1.0])
    np.testing.assert_array_equal(high + low, signed)
    half = (np.finfo(dtype).nmant + 1) // 2
    for part in (high, low):
        mantissa, _ = np.frexp(part[part != 0])
        np.testing.assert_array_equal(np.ldexp(np.round(np.ldexp(mantissa, half)), -half), mantissa)
    if tie is not None:
        np.testing.assert_array_equal(tie, [1 + 2.0**-11, -(1 + 2.0**-11)])


def _looped_and_unrolled(fn, monkeypatch):
    """``fn()`` with every loop over an axis written out, then with every one a
    ``fori_loop`` (the two programs traced afresh)."""
    monkeypatch.setattr(numerics, "UNROLL_LIMIT", 10**6)
    jax.clear_caches()
    unrolled = [np.asarray(a) for a in jax.tree.leaves(fn())]
    monkeypatch.setattr(numerics, "UNROLL_LIMIT", 0)
    jax.clear_caches()
    looped = [np.asarray(a) for a in jax.tree.leaves(fn())]
    jax.clear_caches()
    return unrolled, looped


def test_loops_beyond_the_unroll_limit_give_the_same_bits(monkeypatch):
    """Beyond ``UNROLL_LIMIT`` the extra-precise residuals and the leading-axis
    reductions are loops over the same steps in the same order: the residuals, the
    solves, the factors and the checks of a batch of lower-bound LPs at moved means
    are the same to the last bit either way."""
    rng = np.random.default_rng(11)
    matrix = rng.standard_normal((12, 12)).astype(np.float32)
    x, rhs = (rng.standard_normal(12).astype(np.float32) for _ in range(2))
    instance = jb_instances.random(5, 12)
    precision = jnp.asarray(1 / np.square(instance.sigma), jnp.float32)
    means = jnp.asarray(instance.mu[None] + 0.05 * rng.standard_normal((32, 12)), jnp.float32)

    def compute():
        # float32 residuals on a CPU are one float64 product: the error-free steps (the
        # other platforms' form) are called as such
        two_sum = lambda column: numerics._two_sum_residual(column, matrix, x, rhs)
        residuals = Program(lambda: (two_sum(lambda a, j: a[:, j]), two_sum(lambda a, j: a[j])))()
        solved = Program(jax.vmap(lambda mu: bound_lp.solve_lower_bound(mu, precision)))(means)
        warm = Program(jax.vmap(lambda basis: bound_lp.warm_start(precision, basis)))(solved.basis)
        check = Program(jax.vmap(lambda mu, w: bound_lp.check_warm_start(mu + 1e-4, precision, w)))(means, warm)
        return residuals, solved, warm, check

    unrolled, looped = _looped_and_unrolled(compute, monkeypatch)
    assert len(unrolled) == len(looped)
    for a, b in zip(unrolled, looped):
        np.testing.assert_array_equal(a, b)


# Elementwise functions that XLA's GPU compiler evaluates by fast approximations (a
# polynomial for ``pow`` and ``exp2``, ``ex2.approx``, ``lg2.approx``): the solver may
# not depend on them, or its results and verdicts would differ between CPU and GPU.
APPROXIMATED_PRIMITIVES = {
    "exp", "exp2", "log", "log1p", "expm1", "pow", "sqrt", "rsqrt", "cbrt", "tanh",
    "logistic", "sin", "cos", "tan", "atan2", "erf", "erf_inv", "lgamma", "digamma",
}


def primitive_names(jaxpr) -> set:
    """Names of all primitives in ``jaxpr`` and the jaxprs nested in its equations."""
    names = set()
    for equation in jaxpr.eqns:
        names.add(equation.primitive.name)
        for value in equation.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(item, "jaxpr", item)  # a ClosedJaxpr holds a Jaxpr
                if hasattr(inner, "eqns"):
                    names |= primitive_names(inner)
    return names


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solver_uses_no_function_a_gpu_approximates(dtype):
    """``lp.solve`` (cold and warm), the basis checks and the lower bound's warm-start
    path, traced: no transcendental primitive anywhere (``jnp.ldexp``, for one, lowers
    to ``pow``)."""
    rng = np.random.default_rng(0)
    cost, matrix, rhs = rng.uniform(0, 1, 4).astype(dtype), rng.uniform(0, 1, (3, 4)).astype(dtype), np.ones(3, dtype)
    mu, precision = np.linspace(1, 0, 4).astype(dtype), np.eye(4, dtype=dtype)
    basis = lp.surplus_basis(3, 4)
    with jax.enable_x64(dtype == np.float64):
        warm = jax.eval_shape(bound_lp.initial_warm_start, precision)  # traced only, like the rest
        traced = {
            "solve": jax.make_jaxpr(lp.solve)(cost, matrix, rhs),
            "solve_warm": jax.make_jaxpr(lambda *a: lp.solve(*a[:3], initial_basis=a[3]))(cost, matrix, rhs, basis),
            "check_basis": jax.make_jaxpr(lp.check_basis)(cost, matrix, rhs, basis),
            "quick_check": jax.make_jaxpr(lambda *a: lp.quick_check(*a[:3], lp.factor_basis(a[1], a[3])))(
                cost, matrix, rhs, basis
            ),
            "solve_lower_bound_warm": jax.make_jaxpr(bound_lp.solve_lower_bound_warm)(mu, precision, warm),
            "reuse_warm_start": jax.make_jaxpr(bound_lp.reuse_warm_start)(mu, precision, warm),
        }
    for name, closed in traced.items():
        found = primitive_names(closed.jaxpr) & APPROXIMATED_PRIMITIVES
        assert not found, f"{name} uses {sorted(found)}"


def test_float32_division_is_refined_where_a_backend_approximates_it():
    """A GPU divides float32 within 2 ulp (``div.full.f32``), enough to change the
    solver's verdicts, so the solver's divisions take one Newton step there.  Checked on the CPU: with the GPU's error emulated, the refined quotient
    is correctly rounded to near-ties (10^5 quotients in 1e-18..1e18), special values pass
    through, and lowered for a GPU every division of ``solve`` is refined (twice the
    divisions of the CPU lowering, where the plain quotient is kept)."""
    rng = np.random.default_rng(3)
    numerator, denominator = (
        np.float32(rng.uniform(-1, 1, 10**5) * 10.0 ** rng.uniform(-9, 9, 10**5)) for _ in "xy"
    )
    exact = numerator.astype(np.float64) / denominator

    def max_ulps(quotient):
        return np.max(np.abs(quotient - exact) / np.spacing(np.abs(quotient)))

    with approximate_division():
        plain = np.asarray(jax.jit(jnp.divide)(numerator, denominator))
        refined = np.asarray(jax.jit(numerics._refined_divide)(numerator, denominator))
        special = np.asarray(
            jax.jit(numerics._refined_divide)(np.float32([1, 0, 1, np.inf, -2]), np.float32([0, 0, np.inf, 1, 0]))
        )
    assert max_ulps(plain) > 2.0  # the emulation is in effect
    assert max_ulps(refined) <= 0.5005
    np.testing.assert_array_equal(special, [np.inf, np.nan, 0, np.inf, -np.inf])

    cost = rng.uniform(0, 1, 6).astype(np.float32)
    matrix, rhs = rng.uniform(0, 1, (5, 6)).astype(np.float32), np.ones(5, np.float32)
    lowered = {
        platform: jax.jit(lp.solve).trace(cost, matrix, rhs).lower(lowering_platforms=(platform,)).as_text()
        for platform in ("cpu", "cuda")
    }
    divisions = {platform: text.count("stablehlo.divide") for platform, text in lowered.items()}
    assert divisions["cpu"] > 0 and divisions["cuda"] == 2 * divisions["cpu"], divisions


def test_shifted_values_bound_their_error():
    """``lp.shifted_values`` moves the basic values of a factored basis to a new ``b``
    with an error bound from what the factor keeps (no residual): on the optimal bases
    of 8 random float32 lower-bound LPs (K = 6), each shifted by 7 relative steps from
    1e-6 to 2 of ``b`` (the last, ``b' - b`` rounded in float32), the bound holds every
    component against ``B^-1 b'`` solved in float64, and is no looser than 1e-3 of the
    largest value (else it tests little).
    ``lp.value_error`` bounds the error of the values it starts from (``B^-1 b`` rounded
    to float32) within 4 eps of each, as a refined solution's rounding is."""
    rng = np.random.default_rng(5)
    batch = jb_instances.random(3, 6, num_instances=8)

    @Program
    def factor_and_start(mu, precision):
        solved = bound_lp.solve_lower_bound(mu, precision)
        return solved, bound_lp.warm_start(precision, solved.basis).factor, bound_lp.lower_bound_problem(mu, precision).b

    shift, value_error = Program(lp.shifted_values), Program(lp.value_error)
    for k in range(8):
        precision = np.asarray(batch.precision[k], np.float32)
        solved, factor, rhs = factor_and_start(np.asarray(batch.mu[k], np.float32), precision)
        assert int(solved.status) == lp.LPStatus.OPTIMAL
        matrix = np.asarray(factor.matrix_high, np.float64) + np.asarray(factor.matrix_low, np.float64)
        rhs = np.asarray(rhs)
        values = np.linalg.solve(matrix, rhs.astype(np.float64)).astype(np.float32)
        error = value_error(factor, values, rhs)
        exact = np.linalg.solve(matrix, rhs.astype(np.float64))
        slack = np.asarray(error, np.float64) - np.abs(values - exact)
        assert np.all(slack >= 0) and np.all(error <= 4 * np.finfo(np.float32).eps * np.abs(exact)), (k, slack)
        for relative in (1e-6, 1e-4, 1e-2, 0.1, 0.3, 0.5, 2.0):
            new_rhs = (rhs * (1 + relative * rng.uniform(-1, 1, rhs.shape))).astype(np.float32)
            moved, bound, _ = shift(factor, values, error, rhs, new_rhs)
            exact = np.linalg.solve(matrix, new_rhs.astype(np.float64))
            moved, bound = np.asarray(moved, np.float64), np.asarray(bound, np.float64)
            assert np.all(np.abs(moved - exact) <= bound), (k, relative, np.abs(moved - exact) - bound)
            assert np.max(bound) <= 1e-3 * np.max(np.abs(exact)), (k, relative, bound)


def test_reduced_cost_moves_bound_the_exact_moves_by_sign():
    """``lp.reduced_cost_moves`` bounds how far each reduced cost falls and rises: on the
    optimal bases of 8 random float32 lower-bound LPs (K = 6), for 6 random cost changes
    each, from 1e-6 to 1 relative to the costs, the exact moves ``delta_j - (delta_B
    B^-1) M_j`` of the nonbasic columns (float64) lie within ``[-fall, rise]`` (up to
    float32's rounding of the largest move); a fall (rise) is at most ``|delta_j| +
    |delta_B| |B^-1| |M_j|`` and exceeds the exact one by at most half of it, so a move
    in a reduced cost's favour spends at most half the room an unsigned bound would."""
    rng = np.random.default_rng(11)
    batch = jb_instances.random(4, 6, num_instances=8)

    @Program
    def factor_of(mu, precision):
        solved = bound_lp.solve_lower_bound(mu, precision)
        problem = bound_lp.lower_bound_problem(mu, precision)
        return solved, bound_lp.warm_start(precision, solved.basis).factor, problem.A, problem.cost

    moves = Program(lp.reduced_cost_moves)
    for k in range(8):
        solved, factor, matrix, cost = factor_of(np.asarray(batch.mu[k], np.float32), np.asarray(batch.precision[k], np.float32))
        assert int(solved.status) == lp.LPStatus.OPTIMAL
        m, n = matrix.shape
        basis = np.asarray(factor.basis)
        columns = np.concatenate([np.asarray(matrix, np.float64), -np.eye(m)], axis=1)  # M = [A, -I]
        inverse = np.linalg.inv(columns[:, basis])
        for relative in (1e-6, 1e-4, 1e-2, 0.1, 0.5, 1.0):
            change = (relative * np.asarray(cost) * rng.uniform(-1, 1, n)).astype(np.float32)
            fall, rise = moves(factor, change, matrix)
            full_change = np.concatenate([change.astype(np.float64), np.zeros(m)])
            exact = full_change - (full_change[basis] @ inverse) @ columns
            size = np.abs(full_change) + (np.abs(full_change[basis]) @ np.abs(inverse)) @ np.abs(columns)
            nonbasic = ~np.isin(np.arange(n + m), basis)  # a basic column's reduced cost stays 0
            fall, rise = (np.concatenate([np.asarray(part, np.float64) for part in pair])[nonbasic] for pair in (fall, rise))
            exact, size = exact[nonbasic], size[nonbasic]
            # The factor drops B^-1's rounding residues as the structural zeros they stand
            # for: a move through one is below float32's rounding of the largest move.
            rounding = np.finfo(np.float32).eps * np.max(size)
            assert np.all(-fall - rounding <= exact) and np.all(exact <= rise + rounding), (k, relative)
            cap = size * (1 + 1e-5)
            assert np.all(fall <= cap) and np.all(rise <= cap), (k, relative)
            assert np.all(fall - np.maximum(-exact, 0) <= cap / 2), (k, relative)
            assert np.all(rise - np.maximum(exact, 0) <= cap / 2), (k, relative)


def test_cost_rooms_to_fall_and_to_rise():
    """The check's rooms (``warm_start._cost_room``), by hand: a strictly positive
    reduced cost may fall by half what it exceeds ``noise + slack`` by and rise without
    limit; a tied one (within ``noise - slack`` of zero) may move half its tie band
    either way; a NaN one has no room; a basic column, or one no cost change can move
    (zero gain), is never limited."""
    f32 = lambda *values: jnp.asarray(values, jnp.float32)
    reduced = (f32(1.0, 0.0, np.nan, 1.0), f32(0.5, 0.2))
    noise, slack = (f32(0.01, 0.01, 0.01, 0.01), f32(0.01, 0.01)), (f32(1e-3, 1e-3, 1e-3, 1e-3), f32(1e-3, 1e-3))
    nonbasic = (jnp.asarray([True, True, True, True]), jnp.asarray([True, False]))
    moving_cost = jnp.asarray([True, True, True, False])
    moving_basic = jnp.asarray([True, False])
    abs_matrix = jnp.asarray([[1, 1, 1, 0], [1, 1, 1, 0]], jnp.float32)  # the last column: zero gain
    radius, (fall, rise) = jax.jit(warm_start._cost_room)(
        reduced, noise, slack, nonbasic, moving_cost, moving_basic, jnp.eye(2, dtype=jnp.float32), abs_matrix
    )
    inf = np.inf
    np.testing.assert_allclose(fall[0], [0.5 * 0.989, 0.5 * 0.009, 0, inf], rtol=1e-6)
    np.testing.assert_allclose(rise[0], [inf, 0.5 * 0.009, 0, inf], rtol=1e-6)
    np.testing.assert_allclose(fall[1], [0.5 * 0.489, inf], rtol=1e-6)
    np.testing.assert_allclose(rise[1], [inf, inf], rtol=1e-6)
    assert float(radius) == 0  # a NaN reduced cost that can move: no radius


def test_basis_gauss_jordan_solves_with_the_basis_matrix():
    """``basis_gauss_jordan`` against ``numpy.linalg.solve`` with ``B = [A, -I][:, basis]``
    on 20 random float64 bases of a 6 x 5 ``A`` (from all-structural to all-surplus,
    surplus columns also scaled by powers of two), sorted and shuffled, to 1e-12
    relative; a basis whose structural block is singular gives non-finite rows."""
    rng = np.random.default_rng(3)
    m, n = 6, 5
    solve = Program(numerics.basis_gauss_jordan, static_argnums=3)
    with jax.enable_x64(True):
        for trial in range(20):
            matrix = np.concatenate([rng.normal(size=(m, n)), -np.eye(m)], axis=1)
            if trial % 2:
                matrix[:, n:] *= 2.0 ** rng.integers(-3, 4, size=m)
            basis = np.sort(rng.choice(n + m, size=m, replace=False)).astype(np.int32)
            augmented = np.concatenate([matrix, rng.normal(size=(m, 2))], axis=1)
            solved = np.asarray(solve(augmented, basis, basis, n))
            expected = np.linalg.solve(matrix[:, basis], augmented)
            np.testing.assert_allclose(solved, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
            shuffled = basis[rng.permutation(m)]  # rows follow the basis order
            solved = np.asarray(solve(augmented, shuffled, shuffled, n))
            expected = np.linalg.solve(matrix[:, shuffled], augmented)
            np.testing.assert_allclose(solved, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
        matrix = np.concatenate([np.ones((m, n)), -np.eye(m)], axis=1)  # rank-one structural part
        basis = np.array([0, 1, 7, 8, 9, 10], np.int32)
        assert not np.all(np.isfinite(np.asarray(solve(matrix, basis, basis, n))))


_TWO_SUM_RESIDUAL = functools.partial(numerics._two_sum_residual, lambda a, j: a[:, j])


@pytest.mark.parametrize(
    "dtype, form",
    [(np.float32, numerics.residual), (np.float32, _TWO_SUM_RESIDUAL), (np.float64, numerics.residual)],
    ids=["float32", "float32-two-sum", "float64"],
)
def test_the_residual_stays_within_its_rounding_bound(dtype, form):
    """The extra-precise residual ``rhs - M x`` against the exact one (rational
    arithmetic) on 32 random systems each of m = 6, 16 (written out) and 24 (a loop),
    entries spanning four decades and ``rhs`` the float-rounded ``M x``, so that the
    residual cancels: every error within ``u |r| + residual_rounding(m) |M| |x|``.  A
    bound of Dot2's ``gamma_{2m+2}^2`` instead fails here: the half-length cross terms
    are summed plainly.  Float32 in both forms: summed in float64 (a CPU's) and by
    error-free steps (other platforms')."""
    rng = np.random.default_rng(12)
    unit = np.finfo(dtype).eps / 2
    with jax.enable_x64(dtype == np.float64):
        computed = Program(jax.vmap(form))
        for m in (6, 16, 24):
            matrix = (rng.standard_normal((32, m, m)) * 10.0 ** rng.integers(-2, 3, (32, m, m))).astype(dtype)
            x = rng.standard_normal((32, m)).astype(dtype)
            rhs = np.einsum("bij,bj->bi", matrix.astype(np.longdouble), x.astype(np.longdouble)).astype(dtype)
            got = np.asarray(computed(matrix, x, rhs))
            rho = float(numerics.residual_rounding(m, dtype))
            for k in range(32):
                exact = [
                    Fraction(float(rhs[k, i])) - sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(matrix[k, i], x[k]))
                    for i in range(m)
                ]  # fmt: skip
                error = np.array([abs(Fraction(float(g)) - e) for g, e in zip(got[k], exact)], dtype=np.float64)
                size = np.abs(matrix[k]).astype(np.float64) @ np.abs(x[k]).astype(np.float64)
                assert np.all(error <= unit * np.abs(got[k].astype(np.float64)) + rho * size), (m, k)


def test_a_cpus_float32_residual_is_the_float64_one_rounded():
    """The CPU's float32 form against rational arithmetic on a 5 x 7 ``M`` (every form:
    ``M x``, ``x M``, from ``M`` or its split halves): the exact residual rounded to
    float32, but for the float64 subtraction's own rounding before it (its ``2^-53``,
    which decides a tie); and on a tie built by hand, the error of both forms just
    beyond ``u |r| + rho |M||x|``, within the ``u |r|`` more that the bounds built on a
    residual add."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((5, 7)).astype(np.float32)
    halves = tuple(np.asarray(h) for h in numerics.split(matrix))

    def exact_f(a, v, r):
        dot_f = lambda row: sum(Fraction(float(p)) * Fraction(float(q)) for p, q in zip(row, v))
        return [Fraction(float(ri)) - dot_f(row) for row, ri in zip(a, r)]

    x, rhs = rng.standard_normal(7).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    y, rhs_t = rng.standard_normal(5).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    expected = np.float32([float(e) for e in exact_f(matrix, x, rhs)])
    expected_t = np.float32([float(e) for e in exact_f(matrix.T, y, rhs_t)])
    for given in (matrix, halves):
        np.testing.assert_array_equal(np.asarray(numerics.residual(given, x, rhs)), expected)
        np.testing.assert_array_equal(np.asarray(numerics.transposed_residual(given, y, rhs_t)), expected_t)
    # r = 1 + 2^-24 + 2^-55: float64 rounds it to 1 + 2^-24, a tie that float32 rounds to 1
    tie = (np.float32([[2.0**-24, -(2.0**-55)]]), np.float32([1.0, 1.0]), np.float32([1.0 + 2.0**-23]))
    unit, rho = 2.0**-24, float(numerics.residual_rounding(2, np.float32))
    size = 2.0**-24 + 2.0**-55
    for form in (numerics.residual, _TWO_SUM_RESIDUAL):
        got = float(np.asarray(form(*tie))[0])
        error = abs(Fraction(got) - exact_f(*tie)[0])
        assert unit * abs(got) + rho * size < error <= 2 * unit * abs(got) + rho * size


def test_a_cpus_float32_residuals_are_one_float64_product():
    """Every float32 residual form (``M x``, ``x M``, a basis's beyond the unroll limit)
    lowers for a CPU to a float64 product and no loop, and for a GPU to the error-free
    steps in float32 (the basis's a loop)."""
    m = numerics.UNROLL_LIMIT + 4
    matrix, x = np.ones((m, m), np.float32), np.ones(m, np.float32)
    forms = {
        "residual": lambda a, v: numerics.residual(a, v, v),
        "transposed": lambda a, v: numerics.transposed_residual(a, v, v),
        "basis": lambda a, v: numerics.basis_residual(a, v, v, jnp.arange(m, dtype=jnp.int32), m),
    }
    for name, form in forms.items():
        lowered = {
            platform: jax.export.export(jax.jit(form), platforms=(platform,))(matrix, x).mlir_module()
            for platform in ("cpu", "cuda")
        }
        assert "xf64>" in lowered["cpu"] and "dot_general" in lowered["cpu"] and "while" not in lowered["cpu"], name
        assert "f64" not in lowered["cuda"], name
    assert "while" in lowered["cuda"]  # the basis form's loop over its structural columns


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_basis_residual_is_the_residual_bit_for_bit(dtype):
    """``basis_residual`` (the loop over structural columns only) against ``residual``
    (every column) for 12 random sorted bases of a 20 x 20 ``A`` (beyond the unroll
    limit), values spanning six decades: the same bits; for the same bases unsorted, the
    same values to a few units of the working precision.  In float32 the error-free
    steps are called as such (a CPU sums float32 in float64, one product either way)."""
    rng = np.random.default_rng(5)
    m = n = 20
    assert m > numerics.UNROLL_LIMIT
    if dtype == np.float32:
        loop, every = numerics._basis_two_sum_residual, _TWO_SUM_RESIDUAL
    else:
        loop, every = numerics.basis_residual, numerics.residual
    both = Program(lambda b, x, r, basis: (loop(b, x, r, basis, n), every(b, x, r)))
    with jax.enable_x64(dtype == np.float64):
        for trial in range(12):
            matrix = np.concatenate([rng.normal(size=(m, n)), -np.eye(m)], axis=1).astype(dtype)
            basis = np.sort(rng.choice(n + m, size=m, replace=False)).astype(np.int32)
            x = (rng.normal(size=m) * 10.0 ** rng.uniform(-3, 3, size=m)).astype(dtype)
            rhs = matrix[:, basis] @ x + rng.normal(size=m).astype(dtype) * 1e-3
            fast, full = (np.asarray(a) for a in both(matrix[:, basis], x, rhs, basis))
            np.testing.assert_array_equal(fast, full)
            shuffled = rng.permutation(m)
            fast, _ = (np.asarray(a) for a in both(matrix[:, basis[shuffled]], x[shuffled], rhs, basis[shuffled]))
            scale = np.abs(matrix[:, basis]) @ np.abs(x) + np.abs(rhs)
            assert np.all(np.abs(fast - full) <= 4 * np.finfo(dtype).eps * scale), trial
