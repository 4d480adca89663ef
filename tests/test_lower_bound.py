"""Tests of the lower-bound LP (jaxbandit.bound_lp) and of the host API
(jaxbandit.bound) against scipy's HiGHS.

The sweep solves thousands of instances from several families with one compiled,
vmapped solve per dtype: every K is zero-padded to the largest, 50 (extra zero-cost
variables and ``0 >= 0`` rows leave the canonical optimum unchanged).
Instances are float32-representable, so both precisions solve the same LP and share
one HiGHS reference: its dual simplex with tight (1e-10) tolerances, whose answer must
be feasible to 1e-7 (with default tolerances HiGHS stops at a suboptimal vertex on a
few badly scaled ones); the interior-point method is the fallback.

Relative error: ``|ours - ref| / max(ref, scale)`` with ``scale`` = 1e-9 times the
cheapest way to cover the largest requirement (``max b * min positive cost / max W``),
a natural size for a value that is (close to) 0.

Nearly all of this module's time is XLA compiling the solver, so its tests share
compiled programs: one padded size and chunk size for every sweep (and the solved
sweeps themselves, through module fixtures), one batch size for the vmapped
lower-bound solves, and K = 3 for the host API's single instances.  The emulated GPU
division clears JAX's in-memory caches, so its two tests come last; they lower the
float32 sweep solve traced once (and the test session's compile cache keeps the
program the first compiles for the second).  The programs the tests jit themselves
compile with the host's compiler options (:class:`jaxbandit.compile_options.Program`,
as :func:`jaxbandit.lower_bound` does), which give the same bits as XLA's defaults
(:func:`test_the_host_programs_compiler_options_keep_the_bits`) in less
compile time.
"""

import decimal
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special
from scipy.optimize import linprog

import jaxbandit as jb
from jaxbandit import bound_lp, exact_lp, instances, lp
from jaxbandit.bound import LowerBound, _batched_solve, _lanes, _largest_lanes, _on_lanes, _solve_batch, bernoulli_kl, lower_bound
from jaxbandit.compile_options import Program
from jaxbandit.lp import numerics
from tests.approximate_division import approximate_division

Status = bound_lp.LowerBoundStatus
WELL_SCALED = ("bandit", "full_information", "graph", "general", "revealing_arm", "noise_free")
BADLY_SCALED = ("tiny_gaps", "wide_sigma")
FAMILIES = WELL_SCALED + BADLY_SCALED


# -- instance families (float32-representable mu and W) ------------------------------


def _family(name, rng, count, num_arms):
    """``(mu, W)`` of shapes ``(count, K)`` and ``(count, K, K)``, float64 arrays."""
    k = num_arms
    mu = rng.uniform(0, 1, (count, k))
    sigma = np.full((count, k, k), np.inf)
    diagonal = np.arange(k)
    if name == "bandit":
        sigma[:, diagonal, diagonal] = rng.uniform(0.5, 2, (count, k))
    elif name == "full_information":
        sigma = np.broadcast_to(rng.uniform(0.5, 2, (count, 1, 1)), (count, k, k)).copy()
    elif name == "graph":
        edges = rng.uniform(size=(count, k, k)) < 0.3
        edges[:, diagonal, diagonal] = True
        sigma = np.where(edges, 1.0, np.inf)
    elif name == "general":
        sigma = instances.random(rng, k, num_instances=count).sigma.copy()
    elif name == "revealing_arm":
        sigma[:, diagonal, diagonal] = 1.0
        sigma[:, -1, :] = rng.uniform(0.5, 2, (count, 1))
        mu[:, -1] = 0.0
    elif name == "noise_free":
        sigma = instances.random(rng, k, num_instances=count).sigma.copy()
        sigma[rng.uniform(size=sigma.shape) < 0.1] = 0.0
    elif name == "tiny_gaps":
        sigma = instances.random(rng, k, num_instances=count).sigma.copy()
        mu = 0.5 + rng.uniform(0, 1e-3, (count, k))
    elif name == "wide_sigma":
        sigma = instances.random(rng, k, num_instances=count, log10_sigma_range=(-3, 3)).sigma.copy()
    mu = mu.astype(np.float32).astype(np.float64)
    with np.errstate(divide="ignore"):
        precision = (1 / np.square(sigma)).astype(np.float32).astype(np.float64)
    return mu, precision


def numpy_problem(mu, precision):
    """Independent numpy build of the LP (noise-free rows dropped, as documented)."""
    best = int(np.argmax(mu))
    gaps = mu[best] - mu
    min_gap = gaps[gaps > 0].min()
    rhs = 2 / np.square(np.where(gaps > 0, gaps, min_gap))
    matrix = precision.T.copy()
    exact = np.isinf(matrix).any(axis=1)
    matrix[exact] = 0.0
    rhs[exact] = 0.0
    return gaps, matrix, rhs


# HiGHS's default feasibility tolerances (1e-7, absolute) let it stop at a suboptimal
# vertex when W spans many decades, so the reference is its dual simplex with 1e-10
# tolerances; the interior-point method and the default settings are the fallbacks.
TIGHT = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
HIGHS_RUNS = (("highs-ds", TIGHT), ("highs-ipm", TIGHT), ("highs-ipm", {}), ("highs-ds", {}))


def reference(cost, matrix, rhs):
    """HiGHS's answer: the first of :data:`HIGHS_RUNS` that ends at an optimum feasible
    to 1e-7 (relative); "infeasible" if a run proves it so; None if none solves it."""
    for method, options in HIGHS_RUNS:
        result = linprog(cost, A_ub=-matrix, b_ub=-rhs, bounds=(0, None), method=method, options=options)
        if result.status == 2:
            return "infeasible"
        if result.status != 0:
            continue
        violation = np.min((matrix @ result.x - rhs) / np.maximum(rhs, 1e-300), initial=0, where=rhs > 0)
        if violation >= -1e-7:
            return result
    return None


def pad(cost, matrix, rhs, size):
    k = cost.shape[-1]
    extra = size - k
    cost = np.pad(cost, ((0, 0), (0, extra)))
    matrix = np.pad(matrix, ((0, 0), (0, extra), (0, extra)))
    rhs = np.pad(rhs, ((0, 0), (0, extra)))
    return cost, matrix, rhs


def natural_scale(cost, matrix, rhs):
    positive = cost[cost > 0]
    scale = 1e-9 * rhs.max() * (positive.min() if positive.size else 1.0) / max(matrix.max(), 1e-300)
    return max(scale, 1e-300)


# Buckets: (padded size, arm counts, instances per (K, family)).  One padded size for
# all: the solve of a small K padded to 50 costs far less than compiling another size.
PADDED = 50
DEFAULT_BUCKETS = ((PADDED, (2, 5, 10), 50), (PADDED, (20, 50), 12))
SLOW_BUCKETS = ((PADDED, (2, 3, 4, 6, 8, 10), 30), (PADDED, (15, 20), 20), (PADDED, (30, 40, 50), 12))


def build_sweep(buckets, seed):
    rng = np.random.default_rng(seed)
    sweep = []
    for size, arm_counts, count in buckets:
        rows = []
        for k in arm_counts:
            for family in FAMILIES:
                mu, precision = _family(family, rng, count, k)
                for i in range(count):
                    cost, matrix, rhs = numpy_problem(mu[i], precision[i])
                    rows.append((family, k, cost, matrix, rhs))
        cost, matrix, rhs = (np.stack([pad(r[2][None], r[3][None], r[4][None], size)[j][0] for r in rows]) for j in range(3))
        refs = [reference(r[2], r[3], r[4]) for r in rows]
        sweep.append(dict(size=size, family=[r[0] for r in rows], k=np.array([r[1] for r in rows]),
                          cost=cost, matrix=matrix, rhs=rhs, refs=refs,
                          scale=np.array([natural_scale(r[2], r[3], r[4]) for r in rows])))
    return sweep


_solve_chunk = Program(jax.vmap(lp.solve))
# Every sweep is solved in chunks of one size, so each dtype compiles once for all the
# tests here (compiling the vmapped solve is most of their time).
_CHUNK = 192


def _solve(cost, matrix, rhs, solve_chunk=_solve_chunk):
    """``vmap(lp.solve)`` over a batch, as numpy arrays; the batch is cut into chunks of
    ``_CHUNK`` LPs (the last one padded with copies of the first LP)."""
    count = len(cost)
    padded = -(-count // _CHUNK) * _CHUNK
    take = np.concatenate([np.arange(count), np.zeros(padded - count, int)])
    chunks = [
        solve_chunk(*(np.asarray(a)[take[start : start + _CHUNK]] for a in (cost, matrix, rhs)))
        for start in range(0, padded, _CHUNK)
    ]
    return jax.tree.map(lambda *parts: np.concatenate([np.asarray(p) for p in parts])[:count], *chunks)


def solve_sweep(sweep, dtype, solve_chunk=_solve_chunk):
    """Every bucket solved in ``dtype``: one numpy ``LPSolution`` per bucket."""
    solutions = []
    for bucket in sweep:
        args = [np.asarray(bucket[name], dtype) for name in ("cost", "matrix", "rhs")]
        if dtype == np.float64:
            with jax.enable_x64(True):
                solutions.append(_solve(*args, solve_chunk))
        else:
            solutions.append(_solve(*args, solve_chunk))
    return solutions


def solved(sweep, dtype):
    """:func:`solve_sweep`, kept in the buckets: the tests of a sweep solve it once per
    dtype (each lane's answer does not depend on the others in its chunk)."""
    name = np.dtype(dtype).name
    if name not in sweep[0].setdefault("solutions", {}):
        for bucket, solution in zip(sweep, solve_sweep(sweep, dtype)):
            bucket.setdefault("solutions", {})[name] = solution
    return [bucket["solutions"][name] for bucket in sweep]


def sweep_records(sweep, solutions):
    """Per instance: (family, K, status, relative error, feasibility, x, reference)."""
    records = []
    for bucket, out in zip(sweep, solutions):
        for i, ref in enumerate(bucket["refs"]):
            if ref is None or ref == "infeasible":
                continue
            x = out.x[i].astype(np.float64)
            matrix, rhs = bucket["matrix"][i], bucket["rhs"][i]
            error = abs(float(out.objective[i]) - ref.fun) / max(ref.fun, bucket["scale"][i])
            active = rhs > 0
            feasibility = np.min((matrix @ x - rhs)[active] / rhs[active]) if active.any() else 0.0
            records.append((bucket["family"][i], int(bucket["k"][i]), int(out.status[i]), error, feasibility, x, ref))
    return records


@pytest.fixture(scope="module")
def sweep():
    return build_sweep(DEFAULT_BUCKETS, seed=2024)


@pytest.fixture(scope="module")
def big_sweep():
    """2,048 LPs (256 per family): K = 2, 3, 4, 6, 8, 10 (30 each), 15, 20 (20 each) and
    30, 40, 50 (12 each)."""
    return build_sweep(SLOW_BUCKETS, seed=7)


def _check_records(records, dtype):
    """Never a confident wrong answer; well-scaled families always solved.

    Badly scaled families may end in a non-optimal status (NUMERICAL_ERROR or
    MAX_ITERATIONS) on at most 10% of their instances in float64 and 50% in float32
    (W spanning 12 orders of magnitude is beyond what float32 can certify; the host
    API re-solves those in float64).
    """
    tolerance = 1e-6 if dtype == np.float64 else 1e-4
    assert len(records) > 1300
    failures = []
    for family, k, status, error, feasibility, x, _ in records:
        optimal = status == Status.OPTIMAL
        if optimal and (error > tolerance or feasibility < -tolerance or np.any(x < 0)):
            failures.append(("wrong", family, k, error, feasibility))  # a confident wrong answer
        elif not optimal and family in WELL_SCALED:
            failures.append(("not optimal", family, k, status))
    assert not failures, failures[:10]
    for family in BADLY_SCALED:
        statuses = np.array([r[2] for r in records if r[0] == family])
        limit = 0.10 if dtype == np.float64 else 0.50
        assert np.mean(statuses != Status.OPTIMAL) <= limit, (family, np.bincount(statuses))


def test_sweep_float64_matches_highs(sweep):
    _check_records(sweep_records(sweep, solved(sweep, np.float64)), np.float64)


def test_sweep_float32_matches_highs_or_reports(sweep):
    _check_records(sweep_records(sweep, solved(sweep, np.float32)), np.float32)


def test_cold_solves_take_few_pivots_beyond_the_optimal_basis(sweep):
    """From the surplus basis every structural column of the optimal basis enters at
    least once; the dual steepest-edge row choice adds few pivots to that.  On the
    default sweep's K = 20 and 50 bucket (192 LPs, every family), float64: at most 1.2
    pivots per structural basic column over the optimal solves, and at most 1.3 in
    each well-scaled family (choosing the most infeasible row relative to |B^-1| |b|
    takes 1.33 overall and about 2 on the general and graph families)."""
    bucket, out = sweep[1], solved(sweep, np.float64)[1]
    num_variables = bucket["matrix"].shape[2]
    optimal = out.status == Status.OPTIMAL
    structural = np.sum(out.basis < num_variables, axis=1)
    family = np.asarray(bucket["family"])
    assert out.num_iterations[optimal].sum() <= 1.2 * structural[optimal].sum()
    for name in WELL_SCALED:
        lanes = optimal & (family == name)
        assert lanes.any(), name
        assert out.num_iterations[lanes].sum() <= 1.3 * structural[lanes].sum(), name


_factor = Program(jax.vmap(lp.factor_basis))
_quick_check = Program(jax.vmap(lp.quick_check))


def test_quick_check_of_the_previous_basis_across_families(sweep):
    """The factored warm-start check at perturbed data (cost and b moved by ~1e-3, A kept),
    on the default sweep's K <= 10 bucket (every family, 1200 LPs).  Where it accepts,
    its answer must be the float64 cold solve's: the same basis and x to 1e-12 (float64),
    the objective to 1e-4 (float32).  It must accept most well-scaled instances."""
    bucket = sweep[0]
    before, before32 = solved(sweep, np.float64)[0], solved(sweep, np.float32)[0]  # at (cost0, rhs0)
    rng = np.random.default_rng(11)
    cost0, matrix, rhs0 = bucket["cost"], bucket["matrix"], bucket["rhs"]
    cost = cost0 * (1 + 1e-3 * rng.uniform(-1, 1, cost0.shape))
    rhs = rhs0 * (1 + 1e-3 * rng.uniform(-1, 1, rhs0.shape))
    with jax.enable_x64(True):
        cold = _solve(cost, matrix, rhs)
        quick64 = jax.tree.map(np.asarray, _quick_check(cost, matrix, rhs, _factor(matrix, before.basis)))
    moved32 = [np.asarray(a, np.float32) for a in (cost, matrix, rhs)]
    quick32 = jax.tree.map(np.asarray, _quick_check(*moved32, _factor(moved32[1], before32.basis)))
    well = np.isin(bucket["family"], WELL_SCALED)
    optimal = cold.status == Status.OPTIMAL
    # Where the cold solve gives up (a few wide-sigma LPs), HiGHS is the reference.
    expected = cold.objective.copy()
    for i in np.flatnonzero((quick64.ok | quick32.ok) & ~optimal):
        expected[i] = reference(cost[i], matrix[i], rhs[i]).fun
    for quick, tolerance in ((quick64, 1e-12), (quick32, 1e-4)):
        ok = quick.ok
        assert ok[well].mean() > 0.8, ok[well].mean()
        assert np.all(quick.solution.status[ok] == Status.OPTIMAL)
        assert np.all(quick.solution.status[~ok] == Status.NUMERICAL_ERROR)
        checked = ok & (np.abs(expected) > 0)
        loose = np.where(optimal, tolerance, 1e-7)[checked]  # HiGHS' own tolerance
        error = np.abs(quick.solution.objective[checked] - expected[checked]) / np.abs(expected[checked])
        assert np.all(error <= loose), error.max()
    ok = quick64.ok & optimal
    size = np.maximum(np.abs(cold.x).max(axis=1, keepdims=True), 1e-300)  # c* = 0: revealing arm
    np.testing.assert_array_equal(quick64.solution.basis[ok], cold.basis[ok])
    np.testing.assert_allclose(quick64.solution.x[ok] / size[ok], cold.x[ok] / size[ok], rtol=0, atol=1e-12)


_factor_one = Program(lp.factor_basis)  # one program per shape, not one per operation


def test_quick_check_refuses_singular_bases_and_bad_data():
    matrix = np.array([[1.0, 1.0, 0.5], [2.0, 2.0, 1.0], [0.0, 0.0, 1.0]], np.float32)
    cost = np.array([1.0, 2.0, 3.0], np.float32)  # a unique optimum
    rhs = np.array([1.0, 1.0, 1.0], np.float32)
    singular = _factor_one(matrix, np.array([0, 1, 2]))  # columns 0 and 1 are equal
    assert not np.isfinite(float(singular.condition))
    assert not bool(lp.quick_check(cost, matrix, rhs, singular).ok)
    # The optimal basis, from the exact rational solve (the canonical basis lp.solve
    # ends on too), which needs no compile.
    optimal = exact_lp.solve_exact(cost, matrix, rhs).basis
    good = _factor_one(matrix, optimal)
    assert bool(lp.quick_check(cost, matrix, rhs, good).ok)
    # column 1 in place of column 0: the same point, feasible, at twice column 0's cost
    assert 0 in optimal and 1 not in optimal
    costly = _factor_one(matrix, np.where(optimal == 0, 1, optimal))
    assert not bool(lp.quick_check(cost, matrix, rhs, costly).ok)
    with pytest.raises(ValueError, match="factor must be a BasisFactor"):
        lp.quick_check(cost[:2], matrix[:, :2], rhs, good._replace(inverse=good.inverse[:2]))
    bad_matrix = matrix.copy()
    bad_matrix[2, 0] = np.nan  # the factor keeps the clean B: only the check's validation sees it
    for bad_cost, bad_matrix, bad_rhs in ((cost, matrix, rhs * np.nan), (-cost, matrix, rhs), (cost, bad_matrix, rhs)):
        check = lp.quick_check(bad_cost, bad_matrix, bad_rhs, good)
        assert not bool(check.ok) and int(check.solution.status) == Status.NUMERICAL_ERROR
        assert np.all(np.isfinite(np.asarray(check.solution.x)))
        assert np.all(np.isfinite(np.asarray(check.sensitivity.values)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_factor_keeps_exact_halves_of_the_basis_matrix(dtype):
    """``B = matrix_high + matrix_low`` exactly, each half short enough that the
    residuals' products are exact, ``abs_inverse`` is ``|B^-1|`` with only the rounding
    residues (at most m eps of their column's largest) zeroed, and the tie-break
    objective's reduced costs ``1 - y A`` and ``y`` (``y = 1_B B^-1``) are those of a
    float64 NumPy solve, to their own stated rounding size."""
    rng = np.random.default_rng(5)
    m, n = 6, 6
    matrix = (rng.lognormal(0, 3, (m, n)) * (rng.uniform(size=(m, n)) < 0.7)).astype(dtype)
    basis = np.array([0, 1, 2, 3, 4, 5 + n])  # five columns of A and one surplus
    with jax.enable_x64(dtype == np.float64):
        factor = jax.tree.map(np.asarray, _factor_one(matrix, basis))
    expected = np.concatenate([matrix, -np.eye(m, dtype=dtype)], axis=1)[:, np.sort(basis)]
    assert factor.matrix_high.dtype == dtype
    np.testing.assert_array_equal(factor.matrix_high + factor.matrix_low, expected)
    np.testing.assert_array_equal(factor.matrix, expected)
    half = (np.finfo(dtype).nmant + 1) // 2  # significant bits each half may keep
    for part in (factor.matrix_high, factor.matrix_low):
        nonzero = part[part != 0]
        mantissa, _ = np.frexp(nonzero)  # in [0.5, 1): exact in 'half' bits iff this is
        np.testing.assert_array_equal(np.ldexp(np.round(np.ldexp(mantissa, half)), -half), mantissa)
    size = np.abs(factor.inverse)
    residue = size <= m * np.finfo(dtype).eps * size.max(axis=0, keepdims=True)
    np.testing.assert_array_equal(factor.abs_inverse, np.where(residue, 0, size))
    duals = np.linalg.solve(expected.astype(np.float64).T, (np.sort(basis) < n).astype(np.float64))
    reduced = (1 - duals @ matrix.astype(np.float64), duals)
    eps = np.finfo(dtype).eps
    for computed, exact, size in zip(factor.tie_reduced, reduced, factor.tie_size):
        assert computed.shape == exact.shape and computed.dtype == dtype
        error = np.abs(computed - exact)
        assert np.all(error <= 64 * eps * size), (error, size)


def test_canonical_is_min_sum_among_optima(sweep):
    """Second linprog stage: min sum(c) over the optimal face, on a sample of instances."""
    bucket = sweep[0]
    out = solved(sweep, np.float64)[0]
    checked = 0
    for i in range(0, len(bucket["refs"]), 9):
        ref = bucket["refs"][i]
        if ref is None or ref == "infeasible" or out.status[i] != 0:
            continue
        cost, matrix, rhs = bucket["cost"][i], bucket["matrix"][i], bucket["rhs"][i]
        a_ub = np.vstack([-matrix, cost[None, :]])
        b_ub = np.append(-rhs, out.objective[i] * (1 + 1e-9) + bucket["scale"][i])
        second = linprog(np.ones_like(cost), A_ub=a_ub, b_ub=b_ub, method="highs-ds")
        if second.status != 0:  # HiGHS gives up on a few badly scaled ones
            assert bucket["family"][i] in BADLY_SCALED
            continue
        # Badly scaled LPs: the optimal face is only known to HiGHS' tolerance (1e-7).
        slack = 1e-6 if bucket["family"][i] in WELL_SCALED else 1e-4
        assert out.x[i].sum() <= second.fun * (1 + slack) + 1e-9, (i, bucket["family"][i])
        checked += 1
    assert checked > 100


def test_same_canonical_solution_in_both_precisions(sweep):
    bucket = sweep[0]
    well = np.array([f in WELL_SCALED for f in bucket["family"]])
    out64, out32 = (jax.tree.map(lambda a: a[well], solved(sweep, dtype)[0]) for dtype in (np.float64, np.float32))
    both = (out64.status == 0) & (out32.status == 0)
    assert both.mean() > 0.99
    scale = np.maximum(np.abs(out64.x[both]).max(axis=1, keepdims=True), 1e-30)
    np.testing.assert_allclose(out32.x[both] / scale, out64.x[both] / scale, atol=1e-4)


# -- the problem builder, closed forms, statuses -------------------------------------
# Every vmapped lower-bound solve here is the host API's program (``bound._batched_solve``,
# what ``lower_bound`` runs): single instances and small batches have K = 3 (8 lanes)
# and the large batches ``_LANES`` instances with K = 10, so that few shapes compile.

_LANES = 512  # one of the host API's batch sizes
assert _lanes(_LANES) == _LANES


def _solve_one(mu, precision):
    """``bound_lp.solve_lower_bound`` of one float64 instance, as numpy, through the host
    API's vmapped solve (the program ``lower_bound`` compiles for a single instance)."""
    out = _solve_batch(np.asarray(mu)[None], np.asarray(precision)[None], np.float64)
    return jax.tree.map(lambda a: a[0], out)


def test_problem_builder_matches_numpy():
    rng = np.random.default_rng(0)
    mu, precision = _family("noise_free", rng, 20, 6)
    with jax.enable_x64(True):
        problems = Program(jax.vmap(bound_lp.lower_bound_problem))(mu, precision)
    for i in range(20):
        cost, matrix, rhs = numpy_problem(mu[i], precision[i])
        np.testing.assert_allclose(problems.cost[i], cost, rtol=1e-15)
        np.testing.assert_array_equal(problems.A[i], matrix)
        np.testing.assert_allclose(problems.b[i], rhs, rtol=1e-14)
        assert int(problems.best_arm[i]) == np.argmax(mu[i])
        assert int(problems.status[i]) == Status.OPTIMAL
        np.testing.assert_array_equal(problems.observed_exactly[i], np.isinf(precision[i]).any(axis=0))


def test_closed_forms():
    rng = np.random.default_rng(1)
    mu = rng.uniform(0, 1, 3)
    sigma = rng.uniform(0.3, 3, 3)
    bound = lower_bound(instances.bandit(mu, sigma))
    gaps = mu.max() - mu
    expected = np.sum(np.where(gaps > 0, 2 * sigma**2 / np.where(gaps > 0, gaps, 1), 0))
    assert bound.value == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(bound.c[gaps > 0], 2 * sigma[gaps > 0] ** 2 / gaps[gaps > 0] ** 2, rtol=1e-12)
    # The best arm observing everything: the bound is 0 and c* is carried by it alone.
    adjacency = np.zeros((3, 3), bool)
    adjacency[np.argmax(mu)] = True
    hub = lower_bound(instances.graph(mu, adjacency))
    assert hub.value == 0.0
    assert np.count_nonzero(hub.c) == 1 and hub.c[np.argmax(mu)] > 0
    # float32, on a batch of _LANES bandits with K = 10 and float32-representable data
    mu32, sigma32 = (rng.uniform(*r, (_LANES, 10)).astype(np.float32).astype(np.float64) for r in ((0, 1), (0.3, 3)))
    bandits = instances.stack([instances.bandit(m, s) for m, s in zip(mu32, sigma32)])
    bound32 = lower_bound(bandits, dtype=np.float32)
    gaps32 = mu32.max(axis=1, keepdims=True) - mu32
    expected32 = np.sum(np.where(gaps32 > 0, 2 * sigma32**2 / np.where(gaps32 > 0, gaps32, 1), 0), axis=1)
    assert bound32.c.dtype == np.float32
    np.testing.assert_allclose(bound32.value, expected32, rtol=1e-5)


def test_one_far_more_precise_observation_is_certified_by_the_plain_solve():
    """The best arm observing itself far more precisely than anything else is observed
    (sigma_00 = s, the others 1 or inf): its column's large entry meets only the best
    arm's own row, whose constraint is slack at the optimum.  Skeel's
    ``max_i (|B^-1| |B| 1)_i`` of that basis grows as 1 / s^2, and the plain solves (no
    rescue: what an LP policy's rounds run) left these LPs uncertified from s = 3e-3 in
    float32 and s = 1e-7 in float64; measured at the solution it stays small, and every
    one is certified at the closed form (value 0.8 * 2 / 0.8^2, and the least-sum
    optimum), which HiGHS confirms where it solves the LP (from s = 1e-8 it calls it
    infeasible)."""
    mu = np.array([1.0, 0.5, 0.2])
    smalls = {np.float32: [3e-3, 1e-3, 1e-4], np.float64: [1e-7, 1e-10]}
    for dtype, values in smalls.items():
        sigma = np.array([[[s, 1, np.inf], [np.inf, 1, np.inf], [1, 1, 1]] for s in values])
        precision = np.where(np.isinf(sigma), 0.0, 1 / np.square(sigma)).astype(dtype).astype(np.float64)
        # float64: the program of _solve_one; float32 compiles one of its own (K = 3)
        lanes = _LANES if dtype == np.float32 else 1
        rtol = 1e-6 if dtype == np.float32 else 1e-14
        for start in range(0, len(values), lanes):
            part = slice(start, start + lanes)
            count = len(values[part])
            padded = [np.resize(a, (lanes, *a.shape[1:])) for a in (np.tile(mu, (count, 1)), precision[part])]
            out = _solve_batch(*padded, dtype)
            for lane in range(count):
                assert out.status[lane] == Status.OPTIMAL, (dtype, values[start + lane])
                assert out.value[lane] == pytest.approx(2.5, rel=rtol)
                np.testing.assert_allclose(out.c[lane], [8 - 3.125, 0, 3.125], rtol=rtol)
                if values[start + lane] >= 1e-6:
                    assert reference(*numpy_problem(mu, padded[1][lane])).fun == pytest.approx(2.5, rel=1e-9)


def test_noise_free_observation_is_the_limit():
    """sigma[0, 1] -> 0: the bound converges to the one with constraint 1 dropped."""
    mu = np.array([0.9, 1.0, 0.2])
    sigma = np.array([[1.0, 1e-4, np.inf], [np.inf, 1.0, np.inf], [np.inf, np.inf, 1.0]])
    near = lower_bound(instances.Instance(mu, sigma)).value
    sigma[0, 1] = 0.0
    exact = lower_bound(instances.Instance(mu, sigma))
    assert np.isfinite(exact.value) and exact.status == 0
    assert exact.value == pytest.approx(near, rel=1e-6)


def test_host_api_argument_errors():
    """Before any solve, errors that name the argument: an unknown dtype (not numpy's
    TypeError) and curve times that are NaN (not a NaN bound) or not numbers."""
    with pytest.raises(ValueError, match="dtype must be float32 or float64, got 'bogus'"):
        lower_bound(instances.bandit([1.0, 0.5]), dtype="bogus")
    with pytest.raises(ValueError, match="dtype must be float32 or float64, got None"):
        lower_bound(instances.bandit([1.0, 0.5]), dtype=None)
    with pytest.raises(ValueError, match="throw must be True or False, got string 'no'"):
        lower_bound(instances.bandit([1.0, 0.5]), throw="no")
    # float32 holds 1 / 1e25**2 as 0: the row would look unobserved and the LP infeasible
    with pytest.raises(ValueError, match=r"^instance sigma\[0, 0\] = 1e\+25 is finite but its precision 1 / sigma\*\*2 is 0 in float32"):
        lower_bound(instances.bandit([1.0, 0.5], sigma=1e25), dtype=np.float32)
    solved = LowerBound(np.array([0.0, 8.0]), np.array(4.0), np.array(0), np.array(0), np.array([0.0, 0.5]))
    np.testing.assert_allclose(solved.curve([1, np.e]), [0.0, 4.0])
    # no finite bound (a tie): inf throughout, not NaN at t = 1 (inf * log 1)
    unsolved = LowerBound(np.array([np.nan, np.nan]), np.array([4.0, np.inf]), np.array([0, 5]), np.array([0, 0]), np.zeros((2, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(unsolved.curve([1, np.e]), [[0.0, 4.0], [np.inf, np.inf]])
    for times in ([np.nan, 10], [0.5, 10], [[1, 2], [3, 4]]):
        with pytest.raises(jb.ArgumentError, match=r"times must be one number or a list of numbers >= 1, got \["):
            solved.curve(times)
    with pytest.raises(jb.ArgumentError, match=r"times must be numbers >= 1, got \['x'\]"):
        solved.curve(["x"])


def test_ties_and_unobservable_arms():
    tied = _solve_one(np.array([1.0, 1.0, 0.5]), np.eye(3))
    assert int(tied.status) == Status.TIED_BEST_ARM and np.isinf(tied.value)
    assert np.all(np.isfinite(tied.c))
    # Raw arrays (Instance rejects this): arm 2 is observed by no row.
    precision = np.eye(3)
    precision[2, 2] = 0.0
    unobserved = _solve_one(np.array([1.0, 0.5, 0.2]), precision)
    assert int(unobserved.status) == Status.INFEASIBLE
    with pytest.raises(jb.ArgumentError, match="tie for the best mean") as caught:
        lower_bound(instances.bandit([1.0, 1.0, 0.5]))
    assert caught.value.argument == "instance"
    report = lower_bound(instances.bandit([1.0, 1.0, 0.5]), throw=False)
    assert report.status == Status.TIED_BEST_ARM
    assert np.isinf(report.value) and np.all(np.isnan(report.c))  # no allocation to read
    both = lower_bound(instances.stack([instances.bandit([1.0, 1.0, 0.5]), instances.bandit([1.0, 0.5, 0.25])]), throw=False)
    assert np.all(np.isnan(both.c[0])) and np.all(np.isfinite(both.c[1])), both.c


def test_batch_instance_and_curve():
    batch = instances.random(3, 3, num_instances=4)
    bound = lower_bound(batch)
    assert bound.c.shape == (4, 3) and bound.value.shape == (4,)
    compiled = _batched_solve.cache_size()
    single = lower_bound(batch[2])  # the batch's program: 1 and 4 instances run on 8 lanes
    assert _batched_solve.cache_size() == compiled
    np.testing.assert_array_equal(single.c, bound.c[2])
    assert single.value == bound.value[2]
    curve = bound.curve([1, 10, 100])
    assert curve.shape == (4, 3)
    np.testing.assert_allclose(curve[:, 2], bound.value * np.log(100))
    # A lane's answer does not depend on its piece: 12 instances on 16 lanes at once, or
    # in two pieces of the 8-lane program (as a large K splits every batch).
    many = instances.random(4, 3, num_instances=12)
    with jax.enable_x64(True):
        arrays = (np.asarray(many.mu, np.float64), np.asarray(many.precision, np.float64))
        whole, pieces = _on_lanes(_batched_solve, *arrays), _on_lanes(_batched_solve, *arrays, largest=8)
    for a, b in zip(whole, pieces):
        np.testing.assert_array_equal(a, b)


def test_host_batches_run_on_few_compiled_sizes():
    """Any number of instances runs on a power-of-two batch of 8 lanes up to the largest
    of its LP's size (larger batches in pieces of that), padded with copies of the
    first: in order, nothing lost or repeated.  The largest is 1,024 lanes at small K
    and, on a CPU, shrinks as the tableaux grow (their pieces stay within a cache-sized
    budget)."""
    assert [_lanes(n) for n in (1, 8, 9, 400, 1024, 1025, 5000)] == [8, 8, 16, 512, 1024, 1024, 1024]
    assert [_lanes(n, 32) for n in (1, 9, 32, 33, 1000)] == [8, 16, 32, 32, 32]
    sizes = {(k, d): _largest_lanes(k, d) for k in (3, 10, 20, 50, 100) for d in (np.float32, np.float64)}
    assert sizes[3, np.float64] == 1024  # the programs this file compiles
    on_cpu = jax.default_backend() == "cpu"
    assert sizes[10, np.float64] == (256 if on_cpu else 1024)
    expected = (16, 8, 8) if on_cpu else (1024, 1024, 1024)
    assert (sizes[50, np.float32], sizes[50, np.float64], sizes[100, np.float64]) == expected
    double = jax.jit(jax.vmap(lambda x, y: (2 * x, y)))
    values = np.arange(2500.0)
    twice, same = _on_lanes(double, values, values[:, None])
    np.testing.assert_array_equal(twice, 2 * values)
    np.testing.assert_array_equal(same, values[:, None])
    assert double._cache_size() == 1


def test_pieces_on_threads_keep_the_callers_precision(monkeypatch):
    """On a CPU the pieces after the first run on threads: each keeps the caller's x64
    setting (a thread's own, from ``jax.enable_x64``), so float64 data stays float64,
    and every piece lands in its place.  Three threads whatever the machine's cores."""
    monkeypatch.setattr("jaxbandit.bound.cpu_threads", lambda: 3)
    double = jax.jit(jax.vmap(lambda x: 2 * x))
    values = 1 + np.arange(100) * 2.0**-40  # float32 would round every one to 1
    with jax.enable_x64(True):
        twice = _on_lanes(double, values, largest=8)  # 13 pieces
    assert twice.dtype == np.float64
    np.testing.assert_array_equal(twice, 2 * values)


# -- noise families: the Bernoulli bound, the Gaussian reference ----------------------
# K = 3 and at most 8 instances: the host API's program compiled above serves them all.


def _exact_kl(p: float, q: float) -> float:
    """The Bernoulli relative entropy in 60-digit decimal arithmetic from the exact
    binary values of ``p`` and ``q`` (both in (0, 1))."""
    with decimal.localcontext() as context:
        context.prec = 60
        p, q = decimal.Decimal(p), decimal.Decimal(q)
        one = decimal.Decimal(1)
        return float(p * (p / q).ln() + (one - p) * ((one - p) / (one - q)).ln())


def test_bernoulli_kl_against_exact_arithmetic():
    """200 random pairs and 200 pairs 1e-3 to 1e-12 apart (relative), within 1e-12 of
    the exact value (the direct formula keeps only about eps / (p - q) of it there),
    and the edges: 0 log 0 = 0, inf where q is 0 or 1 and p is not."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 400)
    q = np.concatenate([rng.uniform(0, 1, 200), p[200:] * (1 + 10.0 ** rng.uniform(-12, -3, 200))])
    exact = np.array([_exact_kl(a, b) for a, b in zip(p, q)])
    np.testing.assert_allclose(bernoulli_kl(p, q), exact, rtol=1e-12)
    edges = bernoulli_kl([0.0, 1.0, 0.3], [0.4, 0.4, 0.3])
    np.testing.assert_allclose(edges, [-np.log(0.6), -np.log(0.4), 0.0], rtol=1e-15)
    np.testing.assert_array_equal(bernoulli_kl([0.5, 0.5, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0]), [np.inf, np.inf, 0.0, 0.0])
    # p far below q (p / q under 2**-53, where (p - q) / q rounds to -1): still exact
    tiny = np.array([1e-17, 1e-300, 3e-10])
    np.testing.assert_allclose(bernoulli_kl(tiny, 0.5), [_exact_kl(a, 0.5) for a in tiny], rtol=1e-12)


def test_bernoulli_bound_closed_forms():
    """Standard bandit: ``c_k = 1 / kl(mu_k, mu*)`` and ``sum_k Delta_k / kl(mu_k, mu*)``
    (Lai-Robbins); full information: 0.  A best mean of 1 makes every worse arm's
    divergence infinite (no alternative lifts it above 1): those constraints need no
    samples; a worst mean of 0 is finite, ``kl(0, mu*) = -log(1 - mu*)``."""
    rng = np.random.default_rng(3)
    mu = rng.uniform(0, 1, 3)
    bound = lower_bound(instances.bandit(mu, 0.5, noise="bernoulli"))
    gaps = mu.max() - mu
    worse = gaps > 0
    kl = bernoulli_kl(mu[worse], mu.max())
    assert (bound.kind, bound.family, int(bound.status)) == ("bound", "bernoulli", Status.OPTIMAL)
    assert bound.value == pytest.approx(np.sum(gaps[worse] / kl), rel=1e-12)
    np.testing.assert_allclose(bound.c[worse], 1 / kl, rtol=1e-12)
    # Pinsker (kl >= 2 Delta**2): at most the Gaussian LP at sigma = 1/2
    gaussian = lower_bound(instances.bandit(mu, 0.5, noise="bernoulli"), reference="gaussian")
    assert bound.value <= gaussian.value and gaussian.kind == "gaussian reference"
    assert lower_bound(instances.full_information(mu, 0.5, noise="bernoulli")).value == 0.0
    certain = lower_bound(instances.bandit([1.0, 0.5, 0.2], 0.5, noise="bernoulli"))
    assert certain.value == 0.0 and int(certain.status) == Status.OPTIMAL
    edge = lower_bound(instances.bandit([0.7, 0.5, 0.0], 0.5, noise="bernoulli"))
    assert edge.value == pytest.approx(0.2 / bernoulli_kl(0.5, 0.7) - 0.7 / np.log(0.3), rel=1e-12)
    with pytest.raises(ValueError, match="tie for the best mean"):
        lower_bound(instances.bandit([0.5, 0.5, 0.2], 0.5, noise="bernoulli"))
    # float32 holds W' = 2 kl / Delta**2 ~ 2e40 (means 1e-40 apart near 0) as inf
    with pytest.raises(ValueError, match="Bernoulli equivalent precision = 2.*e\\+40 overflows float32; use dtype=np.float64"):
        lower_bound(instances.bandit([1e-40, 0.0], 0.5, noise="bernoulli"), dtype=np.float32)
    # a gap of 1e-20: float32 overflows 2 / gap**2, float64 solves it, and c* = 2e40 is
    # no float32 either: refused, not returned as inf beside an OPTIMAL status
    small_gap = instances.stack([instances.bandit([0.5, 0.0]), instances.bandit([1e-20, 0.0])])
    with pytest.raises(jb.ArgumentError, match=r"allocation c\[1, 0\] = 2e\+40 overflows float32; use dtype=np.float64\.") as caught:
        lower_bound(small_gap, dtype=np.float32)
    assert caught.value.argument == "dtype"
    assert lower_bound(small_gap).c[1, 0] == pytest.approx(2e40)


def _bernoulli_highs(mu, observed):
    """The Bernoulli LP as the module's docstring derives it, for HiGHS: minimise
    ``Delta @ c`` s.t. ``sum_j [j observes k] c_j kl_k >= 1`` for each arm ``k``, with
    ``kl_k = kl(mu_k, mu*)`` (``kl(mu*, mu_(2))`` for ``i*``) from scipy's ``rel_entr``;
    constraints with an infinite divergence are left out.  Returns the optimal value."""
    best = int(np.argmax(mu))
    second = np.max(np.delete(mu, best))
    kl = lambda p, q: special.rel_entr(p, q) + special.rel_entr(1 - p, 1 - q)  # noqa: E731
    divergence = np.where(np.arange(len(mu)) == best, kl(mu[best], second), kl(mu, mu[best]))
    keep = np.isfinite(divergence)
    matrix = observed.T[keep] * divergence[keep, None]
    result = linprog(mu.max() - mu, A_ub=-matrix, b_ub=-np.ones(keep.sum()), bounds=(0, None), method="highs")
    assert result.status == 0
    return result.fun, matrix


def test_bernoulli_bound_matches_highs_on_random_graphs():
    """8 random graphs, K = 3 (edges with probability 1/2, self-loops; sigma values
    from 1/2 to 2, which the bound ignores), means uniform in [0, 1] and, in two of
    them, a best mean of 1 and a worst of 0, in two a mean of 1e-17: the value within
    1e-9 (relative) of HiGHS's, and c* feasible for the divergence constraints."""
    rng = np.random.default_rng(11)
    mu = rng.uniform(0, 1, (8, 3))
    mu[0] = [1.0, 0.4, 0.0]
    mu[1] = [0.3, 0.0, 0.8]
    mu[2] = [0.5, 1e-17, 0.3]  # a mean far below the others' (its divergence and the best arm's)
    mu[3] = [1e-17, 0.5, 0.0]
    edges = (rng.uniform(size=(8, 3, 3)) < 0.5) | np.eye(3, dtype=bool)
    sigma = np.where(edges, rng.uniform(0.5, 2, (8, 3, 3)), np.inf)
    bound = lower_bound(jb.Instance(mu, sigma, noise="bernoulli"))
    assert np.all(bound.status == Status.OPTIMAL)
    for i in range(8):
        value, matrix = _bernoulli_highs(mu[i], edges[i].astype(float))
        assert bound.value[i] == pytest.approx(value, rel=1e-9, abs=1e-12), i
        assert np.all(matrix @ bound.c[i] >= 1 - 1e-9) and np.all(bound.c[i] >= 0)


def test_families_without_a_bound_get_a_labelled_gaussian_reference():
    mu, sigma = np.array([0.9, 0.5, 0.2]), np.array([0.5, 1.0, 2.0])
    gaussian = lower_bound(instances.bandit(mu, sigma))
    assert (gaussian.kind, gaussian.family) == ("bound", "gaussian")
    assert lower_bound(instances.bandit(mu, sigma), reference="gaussian").kind == "bound"
    for noise in ("uniform", "rademacher", jb.noise.student_t(df=3)):
        inst = instances.bandit(mu, sigma, noise=noise)
        label = inst.noise.label
        refusal = rf"no lower bound is known for noise '{re.escape(label)}'.*reference='gaussian'"
        with pytest.raises(ValueError, match=refusal) as caught:
            lower_bound(inst)
        assert caught.value.argument == "noise"
        reference = lower_bound(inst, reference="gaussian")
        assert (reference.kind, reference.family) == ("gaussian reference", label)
        np.testing.assert_array_equal(reference.c, gaussian.c)
        assert reference.value == gaussian.value
    with pytest.raises(ValueError, match="reference must be None or 'gaussian', got 'bernoulli'"):
        lower_bound(instances.bandit(mu, sigma), reference="bernoulli")
    with pytest.raises(ValueError, match=r"instance must be a jaxbandit.Instance \(for a batch, jaxbandit.instances.stack them into one\), got list \[1, 0.5\]") as caught:
        lower_bound([1, 0.5])
    assert caught.value.argument == "instance"


# -- warm start ------------------------------------------------------------------------


def _cold(mu, precision):
    """``vmap(solve_lower_bound)`` (the host API's program) as numpy, on at most
    ``_LANES`` instances, padded to ``_LANES`` with copies of the first."""
    count = len(mu)
    take = np.concatenate([np.arange(count), np.zeros(_LANES - count, int)])
    out = _batched_solve(np.asarray(mu)[take], np.asarray(precision)[take])
    return jax.tree.map(lambda a: np.asarray(a)[:count], out)


def test_the_host_programs_compiler_options_keep_the_bits():
    """The host API compiles its LP programs with its own CPU compiler options
    (``compile_options.CPU_OPTIONS``): on ``_LANES`` random K = 10 instances, float32, its
    batched solve gives XLA's default program's answers bit for bit."""
    inst = instances.random(2, 10, num_instances=_LANES)
    mu, precision = np.asarray(inst.mu, np.float32), np.asarray(inst.precision, np.float32)
    host = _cold(mu, precision)
    default = jax.tree.map(np.asarray, jax.jit(jax.vmap(bound_lp.solve_lower_bound))(mu, precision))
    assert np.mean(host.status == Status.OPTIMAL) > 0.9
    for field, a, b in zip(host._fields, host, default):
        np.testing.assert_array_equal(a, b, err_msg=field)


@Program
@jax.vmap
def _anchored(mu, precision, basis):
    """A warm start of ``basis`` (the cold solve's), anchored where its check passes,
    and the check's cost radius (0 where it fails)."""
    warm = bound_lp.warm_start(precision, basis)
    ok, _, sensitivity = bound_lp.check_warm_start(mu, precision, warm)
    anchored = bound_lp.anchor_warm_start(warm, mu, precision, sensitivity.values, sensitivity.cost_room)
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), anchored, warm), sensitivity.cost_radius


_reuse = Program(jax.vmap(bound_lp.reuse_warm_start))


def assert_same_vertex(first, second, lanes, mu, precision, rtol):
    """On ``lanes``, the two solutions' bases are equal or describe the same degenerate
    vertex: every variable basic in one and not the other is zero, to ``rtol``, at
    ``second.c`` (a structural ``c_j``, or a surplus ``(A c - b)_r``).  Which of a
    degenerate vertex's bases a solve ends on is a rounding-level tie (a GPU's
    approximate division can tip it); ``c*`` is what is canonical."""
    for i in np.flatnonzero(lanes & np.any(first.basis != second.basis, axis=1)):
        _, matrix, rhs = numpy_problem(mu[i], precision[i])
        c = np.asarray(second.c[i], np.float64)
        values = np.concatenate([c, matrix @ c - rhs])
        sizes = np.concatenate([np.full(c.shape, np.abs(c).max()), np.maximum(np.abs(matrix) @ np.abs(c), rhs)])
        differing = np.setxor1d(first.basis[i], second.basis[i])
        assert np.all(np.abs(values[differing]) <= rtol * sizes[differing]), (i, first.basis[i], second.basis[i])


def test_reuse_inside_the_certified_region_is_the_cold_solution_across_families():
    """Re-use without a check (bound_lp.reuse_warm_start), 50 instances per family at K = 10,
    means moved in a random direction by up to 0.05, 0.25 and 0.45 times the check's
    cost radius, so that each gap moves by up to 0.1, 0.5 and 0.9 radii, and by up to 1
    radius (each gap by up to 2 radii).  Wherever it answers, the answer must be the
    cold solve's at the moved means: the same basis (or another basis of the same
    degenerate vertex) and each c_i to lp.default_tolerance (1e-9) relative in float64;
    in float32 c to 1e-4 of max c (the cold float32 solve's own accuracy), or HiGHS's
    value to 1e-4 where that solve gives up.  It must answer
    most well-scaled lanes at 0.1 radius (full information, whose bases are degenerate,
    included), and beyond the radius answer some lanes: the test of each reduced cost's
    room is finer than the radius, which bounds every gap's move by the largest."""
    rng = np.random.default_rng(21)
    count, k = 50, 10
    pairs = [_family(family, rng, count, k) for family in FAMILIES]
    mu0 = np.concatenate([p[0] for p in pairs])
    precision = np.concatenate([p[1] for p in pairs])
    family = np.repeat(FAMILIES, count)
    direction = rng.uniform(-1, 1, mu0.shape)
    for dtype, rtol in ((np.float64, lp.default_tolerance(np.float64)), (np.float32, None)):
        with jax.enable_x64(dtype == np.float64):
            args = (jnp.asarray(mu0, dtype), jnp.asarray(precision, dtype))
            warm, radius = _anchored(*args, _cold(*args).basis)
            radius = np.asarray(radius, np.float64)
            assert np.mean(radius[np.isin(family, WELL_SCALED)] > 0) > 0.8
            for scale in (0.1, 0.5, 0.9, 2.0):
                mu1 = jnp.asarray(mu0 + scale / 2 * radius[:, None] * direction, dtype)
                ok, reused = jax.tree.map(np.asarray, _reuse(mu1, args[1], warm))
                if scale > 1:
                    # the radius bounds the gaps' moves (i* kept), not the means'
                    gaps0 = mu0.max(axis=1, keepdims=True) - mu0
                    mu1_64 = np.asarray(mu1, np.float64)
                    gaps1 = np.take_along_axis(mu1_64, mu0.argmax(axis=1)[:, None], axis=1) - mu1_64
                    moved = np.abs(gaps1 - gaps0).max(axis=1)
                    assert np.mean(moved >= radius) > 0.5, scale
                    assert np.mean(ok & (moved >= radius)) > 0.1, scale
                cold = _cold(mu1, args[1])
                if scale == 0.1:
                    assert ok[np.isin(family, WELL_SCALED)].mean() > 0.6, (dtype, ok.mean())
                    # degenerate bases (a basic surplus exactly 0) are re-used too
                    assert ok[family == "full_information"].mean() > 0.5, dtype
                assert np.all(reused.status[ok] == Status.OPTIMAL) and np.all(reused.status[~ok] != Status.OPTIMAL)
                both = ok & (cold.status == Status.OPTIMAL)
                assert_same_vertex(reused, cold, both, np.asarray(mu1, np.float64), precision, rtol or 1e-4)
                size = np.abs(cold.c[both]).max(axis=1, keepdims=True)
                if rtol is not None:
                    np.testing.assert_allclose(reused.c[both], cold.c[both], rtol=rtol, atol=1e-13 * size.max())
                else:
                    assert np.all(np.abs(reused.c[both] - cold.c[both]) <= 1e-4 * size), family[both]
                    # The contract itself: each c_i within 1e-5 relative of B^-1 b' on
                    # the same data, exactly (the float64 solve of the float32 data).
                    with jax.enable_x64(True):
                        exact = _cold(np.asarray(mu1, np.float64), np.asarray(args[1], np.float64))
                    same = ok & (exact.status == Status.OPTIMAL) & np.all(exact.basis == reused.basis, axis=1)
                    assert same.sum() > 0.5 * ok.sum(), (same.sum(), ok.sum())
                    error = np.abs(reused.c[same] - exact.c[same])
                    assert np.all(error <= 1e-5 * np.abs(exact.c[same]) + 1e-12 * np.abs(exact.c[same]).max()), (
                        scale, (error / np.maximum(np.abs(exact.c[same]), 1e-300)).max()
                    )
                for i in np.flatnonzero(ok & (cold.status != Status.OPTIMAL)):  # a few wide-sigma lanes
                    ref = reference(*numpy_problem(np.asarray(mu1[i], np.float64), precision[i]))
                    assert abs(reused.value[i] - ref.fun) <= 1e-4 * ref.fun, (family[i], reused.value[i], ref.fun)


def test_warm_start_matches_cold_solve_along_a_mean_path():
    rng = np.random.default_rng(5)
    inst = instances.random(rng, 10)
    precision = inst.precision
    means = inst.mu + np.cumsum(rng.normal(0, 2e-3, (40, 10)), axis=0)

    def step(warm, mu):
        solution, new_warm, used_full = bound_lp.solve_lower_bound_warm(mu, precision, warm)
        return new_warm, (solution, used_full)

    with jax.enable_x64(True):
        # (the warm starts jitted: one compile each instead of one per operation)
        initial = Program(bound_lp.initial_warm_start)(precision)
        _, (warm_solutions, used_full) = Program(lambda warm, path: jax.lax.scan(step, warm, path))(initial, means)
        cold = _cold(means, np.broadcast_to(precision, (len(means),) + precision.shape))
        ok, checked, _ = Program(jax.vmap(bound_lp.check_warm_start, in_axes=(0, None, None)))(
            means, precision, Program(bound_lp.warm_start)(precision, cold.basis[0])
        )
    assert np.all(np.asarray(cold.status) == 0)
    # Same basis; c and the value equal up to rounding (the check uses a kept inverse).
    np.testing.assert_array_equal(np.asarray(warm_solutions.basis), np.asarray(cold.basis))
    scale = np.abs(np.asarray(cold.c)).max(axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(warm_solutions.c), np.asarray(cold.c), rtol=1e-13, atol=1e-13 * scale.max())
    np.testing.assert_allclose(np.asarray(warm_solutions.value), np.asarray(cold.value), rtol=1e-13)
    used_full = np.asarray(used_full)
    assert used_full[0] and used_full.mean() < 0.5  # the check mostly succeeds
    ok = np.asarray(ok)
    assert ok[0]
    np.testing.assert_array_equal(np.asarray(checked.basis)[ok], np.asarray(cold.basis)[ok])
    np.testing.assert_allclose(np.asarray(checked.c)[ok], np.asarray(cold.c)[ok], rtol=1e-13, atol=1e-13 * scale.max())


def test_solve_from_a_previous_basis_is_never_worse_than_cold():
    """``solve(initial_basis=...)`` and ``solve(initial_factor=...)`` at means moved by
    N(0, 0.05^2): 512 random general K = 10 instances, float32, started from each one's
    previous optimal basis (primal or dual infeasible there, or both), a start from
    which some solves end without a final verdict (the solve then restarts cold).
    Required, for both starts: no lane that is optimal cold and not warm; where both
    are optimal, the same basis and ``c`` bit for bit; and fewer pivots on average
    (the start was used)."""
    inst = instances.random(0, 10, num_instances=_LANES)
    mu = np.asarray(inst.mu, np.float32)
    precision = np.asarray(inst.precision, np.float32)
    moved = mu + np.float32(0.05) * np.random.default_rng(1).standard_normal(mu.shape).astype(np.float32)
    before = _cold(mu, precision)
    cold = _cold(moved, precision)
    factors = Program(jax.vmap(lambda w, b: bound_lp.warm_start(w, b).factor))(precision, before.basis)
    starts = {
        "initial_basis": Program(jax.vmap(lambda m, w, b: bound_lp.solve_lower_bound(m, w, initial_basis=b)))(
            moved, precision, before.basis
        ),
        "initial_factor": Program(jax.vmap(lambda m, w, f: bound_lp.solve_lower_bound(m, w, initial_factor=f)))(
            moved, precision, factors
        ),
    }
    for name, solved in starts.items():
        warm = jax.tree.map(np.asarray, solved)
        cold_ok, warm_ok = cold.status == Status.OPTIMAL, warm.status == Status.OPTIMAL
        assert not np.any(cold_ok & ~warm_ok), (name, np.flatnonzero(cold_ok & ~warm_ok))
        both = cold_ok & warm_ok
        np.testing.assert_array_equal(warm.basis[both], cold.basis[both], err_msg=name)
        np.testing.assert_array_equal(warm.c[both], cold.c[both], err_msg=name)
        assert warm.num_iterations.mean() < 0.75 * cold.num_iterations.mean(), name


def test_solve_takes_one_start_only():
    factor = _factor_one(np.eye(2, dtype=np.float32), lp.surplus_basis(2, 2))
    with pytest.raises(ValueError, match="initial_basis or initial_factor"):
        lp.solve(
            np.ones(2, np.float32), np.eye(2, dtype=np.float32), np.ones(2, np.float32),
            initial_basis=[2, 3], initial_factor=factor,
        )  # fmt: skip


@pytest.mark.slow
def test_bigger_sweep_both_precisions(big_sweep):
    """The bar of ``_check_records`` on the bigger sweep (2,048 LPs per precision, see
    ``big_sweep``); with the emulated GPU division in float32 in the last test."""
    for dtype in (np.float64, np.float32):
        _check_records(sweep_records(big_sweep, solve_sweep(big_sweep, dtype)), dtype)


# -- a GPU's approximate float32 division, emulated: the last tests of the module ----

ON_A_GPU = "emulates a GPU's division on the CPU; on a GPU the sweep tests above use the real one"
_TRACED = {}


def _float32_chunk_traced():
    """The float32 chunk solve, traced once for the module (the emulation clears JAX's
    caches, and tracing the vmapped solve is a large part of its cost): each test
    lowers and compiles it inside the emulation, where division lowers to its rule.
    Traced with a GPU's residuals (the error-free form a CPU does not use), its caches
    cleared before and after so that no other program takes that form."""
    if not _TRACED:
        shapes = [(_CHUNK, PADDED), (_CHUNK, PADDED, PADDED), (_CHUNK, PADDED)]
        on_a_cpu = numerics._platform_form
        numerics._platform_form = lambda cpu, default, *args: default(*args)
        jax.clear_caches()
        try:
            abstract = (jax.ShapeDtypeStruct(s, np.float32) for s in shapes)
            _TRACED["float32"] = jax.jit(jax.vmap(lp.solve)).trace(*abstract)
        finally:
            numerics._platform_form = on_a_cpu
            jax.clear_caches()
    return _TRACED["float32"]


def test_float32_sweep_with_a_gpus_approximate_division(sweep):
    """The float32 bar of the sweep with every float32 division off by up to 2.5 ulp
    (tests/approximate_division.py), as on a GPU, whose default ``div.full.f32`` is
    within 2 ulp, and a GPU's residuals: well-scaled LPs all certified, none
    confidently wrong."""
    if jax.default_backend() != "cpu":
        pytest.skip(ON_A_GPU)
    numerator, denominator = np.float32(np.arange(1, 1001)), np.float32(np.arange(1001, 1, -1) / 7)
    traced = _float32_chunk_traced()
    assert "f64" not in str(traced.jaxpr)  # the error-free residuals, not a CPU's float64 ones
    with approximate_division():
        approximate = np.asarray(jax.jit(jnp.divide)(numerator, denominator))
        solutions = solve_sweep(sweep, np.float32, traced.lower().compile())
    ulps = np.abs(approximate - numerator.astype(np.float64) / denominator) / np.spacing(approximate)
    assert 1.0 < ulps.max() <= 2.5  # the emulation is in effect
    _check_records(sweep_records(sweep, solutions), np.float32)


@pytest.mark.slow
def test_bigger_float32_sweep_with_a_gpus_approximate_division(big_sweep):
    """The float32 bar of the bigger sweep with the emulated division (see above)."""
    if jax.default_backend() != "cpu":
        pytest.skip(ON_A_GPU)
    traced = _float32_chunk_traced()
    with approximate_division():
        solutions = solve_sweep(big_sweep, np.float32, traced.lower().compile())
    _check_records(sweep_records(big_sweep, solutions), np.float32)
