"""Tests of the exact rational LP solve (jaxbandit.exact_lp), the host's last resort.

The batched float64 solve compiles with the host's compiler options, as the host's
lower bound does (:class:`jaxbandit.compile_options.Program`).
"""

import jax
import numpy as np
import pytest

from jaxbandit import bound, bound_lp, exact_lp, lp
from jaxbandit._numbers import ArgumentError
from jaxbandit.compile_options import Program
from tests.test_lower_bound import build_sweep, numpy_problem

Status = lp.LPStatus

_solve64 = Program(jax.vmap(lp.solve))


@pytest.fixture(scope="module")
def small_sweep():
    """Every family at K = 2, 5 and 8, 12 instances each (288 LPs), zero-padded to 8."""
    (bucket,) = build_sweep(((8, (2, 5, 8), 12),), seed=11)
    return bucket


def test_exact_matches_highs_and_the_float64_canonical_optimum(small_sweep):
    """Objective within 1e-9 (relative, natural scale at 0) of HiGHS, which solves to
    1e-10 tolerances; infeasible instances reported as such; and wherever the float64
    solver certifies its answer, the same canonical point (the lexicographic minimiser
    of cost, sum(x), x[0], ...) to 1e-9 of the largest component."""
    bucket = small_sweep
    with jax.enable_x64(True):
        floating = jax.tree.map(np.asarray, _solve64(bucket["cost"], bucket["matrix"], bucket["rhs"]))
    compared = 0
    for i, ref in enumerate(bucket["refs"]):
        exact = exact_lp.solve_exact(bucket["cost"][i], bucket["matrix"][i], bucket["rhs"][i])
        if ref == "infeasible":
            assert exact.status == Status.INFEASIBLE, i
            continue
        assert ref is not None
        assert exact.status == Status.OPTIMAL, (i, exact.status)
        assert abs(exact.objective - ref.fun) <= 1e-9 * max(ref.fun, bucket["scale"][i]), (i, bucket["family"][i])
        assert np.all(exact.x >= 0)
        if floating.status[i] == Status.OPTIMAL:
            scale = max(np.abs(exact.x).max(), 1e-300)
            np.testing.assert_allclose(floating.x[i], exact.x, rtol=0, atol=1e-9 * scale, err_msg=str(i))
            compared += 1
    assert compared > 250


def test_exact_closed_forms_and_start_bases():
    """The standard bandit gives ``sum 2 sigma_ii^2 / Delta_i``; a best arm that sees
    every arm gives 0 with the smallest ``sum(c)``; any start basis, dual feasible or
    not, singular or not, ends on the same answer."""
    mu = np.array([0.9, 0.5, 0.7, 0.1])
    sigma = np.array([1.0, 0.5, 2.0, 1.5])
    gaps = mu.max() - mu
    cost, matrix, rhs = numpy_problem(mu, np.diag(1 / sigma**2))
    answer = exact_lp.solve_exact(cost, matrix, rhs)
    expected = np.sum(2 * sigma[1:] ** 2 / gaps[1:])
    assert answer.status == Status.OPTIMAL
    assert answer.objective == pytest.approx(expected, rel=1e-15)
    starts = [None, answer.basis, np.arange(4, 8), np.array([0, 1, 2, 3]), np.array([0, 0, 1, 2])]
    for start in starts:
        again = exact_lp.solve_exact(cost, matrix, rhs, basis=start)
        np.testing.assert_array_equal(again.x, answer.x)
        np.testing.assert_array_equal(again.basis, answer.basis)
    assert exact_lp.solve_exact(cost, matrix, rhs, basis=answer.basis).num_iterations == 0

    full = np.ones((4, 4))
    cost, matrix, rhs = numpy_problem(mu, full)
    answer = exact_lp.solve_exact(cost, matrix, rhs)
    assert answer.status == Status.OPTIMAL and answer.objective == 0
    # Only the best arm is free: it alone covers the largest requirement.
    np.testing.assert_allclose(answer.x, [rhs.max(), 0, 0, 0], rtol=1e-15)
    # a start that is feasible but not optimal (a costly arm basic) is pivoted on too
    for start in (np.array([1, 5, 6, 7]), np.array([2, 4, 5, 6])):
        again = exact_lp.solve_exact(cost, matrix, rhs, basis=start)
        np.testing.assert_array_equal(again.x, answer.x)
        assert again.objective == 0
    started = exact_lp.solve_exact([1.0, 2.0], [[1.0, 1.0]], [1.0], basis=[1])  # x = (0, 1) costs 2
    assert started.status == Status.OPTIMAL and started.objective == 1 and list(started.x) == [1.0, 0.0]


def test_exact_reports_bad_data_and_shapes():
    matrix = np.eye(2)
    assert exact_lp.solve_exact([1.0, -1.0], matrix, [1.0, 1.0]).status == Status.INVALID_INPUT
    assert exact_lp.solve_exact([1.0, np.nan], matrix, [1.0, 1.0]).status == Status.INVALID_INPUT
    assert exact_lp.solve_exact([1.0, 1.0], [[1.0, 0.0], [0.0, 0.0]], [1.0, 1.0]).status == Status.INFEASIBLE
    with pytest.raises(ValueError, match="must match A"):
        exact_lp.solve_exact([1.0], matrix, [1.0, 1.0])
    with pytest.raises(ValueError, match=r"basis must hold 2 indices in \[0, 4\), got \[0, 4\]"):
        exact_lp.solve_exact([1.0, 1.0], matrix, [1.0, 1.0], basis=[0, 4])


def test_lower_bound_certifies_every_badly_scaled_float64_lane():
    """1,000 instances with sigma spanning 1e-6..1e6, K = 6, float64: the plain solve
    leaves a few uncertified (at least one is required, else this tests nothing).
    ``lower_bound`` of the whole batch (whose plain solve is that same compiled
    program) retries them (the float32 basis verified in float64, more
    re-factorisations, looser tolerances, then the exact solve): every one must end
    optimal, within 1e-6 of HiGHS."""
    from jaxbandit import instances
    from tests.test_lower_bound import natural_scale, reference

    rng = np.random.default_rng(1)
    mu = rng.uniform(0, 1, (1000, 6)).astype(np.float32).astype(np.float64)
    sigma = instances.random(rng, 6, num_instances=1000, log10_sigma_range=(-6, 6)).sigma
    with np.errstate(divide="ignore"):
        precision = (1 / np.square(sigma)).astype(np.float32).astype(np.float64)
        batch = instances.Instance(mu, 1 / np.sqrt(precision))
    plain = bound._solve_batch(mu, batch.precision, np.float64)
    failed = np.flatnonzero(plain.status != bound_lp.LowerBoundStatus.OPTIMAL)
    assert failed.size > 0  # else this tests nothing
    result = bound.lower_bound(batch)  # throws unless every lane is optimal
    for lane in failed:
        cost, matrix, rhs = numpy_problem(mu[lane], precision[lane])
        ref = reference(cost, matrix, rhs)
        assert abs(result.value[lane] - ref.fun) <= 1e-6 * max(ref.fun, natural_scale(cost, matrix, rhs)), lane


def test_float32_certifies_random_feedback_graphs():
    """4,096 random feedback graphs, K = 10 (each edge with probability 0.2, self-loops,
    means uniform on (0, 1)), solved in float32 by the host's plain batch program (the
    one ``lower_bound`` runs before any rescue): every lane certified, with the float64
    solve's allocation (to 1e-4 of each lane's largest c) and value (to 1e-4).  Where a
    basic surplus is measured only against |B^-1| |b| (a huge free arm's magnitude),
    four of these solves end on a basis their verdict refuses (a surplus far below zero
    that the point check sees)."""
    rng = np.random.default_rng(5)
    mu = rng.uniform(0, 1, (4096, 10)).astype(np.float32).astype(np.float64)  # one LP in both
    adjacency = (rng.random((4096, 10, 10)) < 0.2) | np.eye(10, dtype=bool)
    precision = adjacency.astype(np.float64)
    single = bound._solve_batch(mu, precision, np.float32)
    double = bound._solve_batch(mu, precision, np.float64)
    assert np.all(single.status == Status.OPTIMAL), np.flatnonzero(single.status != Status.OPTIMAL)
    assert np.all(double.status == Status.OPTIMAL)
    largest = np.max(double.c, axis=1, keepdims=True)
    assert np.all(np.abs(single.c - double.c) <= 1e-4 * largest)
    np.testing.assert_allclose(single.value, double.value, rtol=1e-4)


def test_float32_lower_bound_takes_the_gaps_from_the_float64_means():
    """Two means 1e-6 apart: rounded to float32 first, their gap lost about 1% of the
    bound (Lai-Robbins, 2 sigma^2 / Delta summed); taken from the float64 means, the
    float32 solve is within float32's tolerance.  (K = 10, 512 copies: the float32 and
    float64 programs of the test above.)  A gap whose 2 / gap**2 overflows or underflows
    float64, or that float32 cannot hold, is an error naming mu."""
    from jaxbandit import instances

    mu = np.array([0.7, 0.7 + 1e-6, 0.2, 0.1, 0.0, -0.1, -0.2, -0.3, -0.4, -0.5])
    closed_form = np.sum(2 / np.delete(mu.max() - mu, 1))
    # 512 copies of the instance: the host runs them on the test above's float32 piece
    # (a single instance would compile the 8-lane program), and every copy is checked
    copies = bound._largest_lanes(10, np.float32)
    value = bound.lower_bound(instances.stack([instances.bandit(mu)] * copies), dtype=np.float32).value
    assert value.shape == (copies,)
    assert np.all(np.abs(value - closed_form) <= 1e-5 * closed_form), (value, closed_form)
    with pytest.raises(ArgumentError, match=r"the gap 2e-160 of arm 1 is so small that 2 / gap\*\*2 overflows float64") as caught:
        bound.lower_bound(instances.bandit([3e-160, 1e-160]))
    assert caught.value.argument == "instance"
    # 2 / (1e160)**2 is 0 in float64: the arm would need no samples and the bound be 0
    with pytest.raises(ValueError, match=r"the gap 1e\+160 of arm 1 is so large that 2 / gap\*\*2 underflows float64"):
        bound.lower_bound(instances.bandit([0.0, -1e160]))
    with pytest.raises(ValueError, match=r"the gap 1e\+39 of arm 2 does not fit in float32; rescale mu"):
        bound.lower_bound(instances.bandit([0.0, -1.0, -1e39]), dtype=np.float32)
    # ... or whose 2 / gap**2 is 0 in float32 (the arm's row would vanish: a bound of 0,
    # certified); a nonzero sigma whose precision float32 holds as inf (a noise-free row)
    with pytest.raises(ValueError, match=r"the gap 1e\+20 of arm 1 is so large that 2 / gap\*\*2 underflows float32; rescale mu or use dtype=np.float64"):
        bound.lower_bound(instances.bandit([1e20, 0.0], 1e10), dtype=np.float32)
    assert bound.lower_bound(instances.bandit([1e20, 0.0], 1e10)).value == pytest.approx(2.0)
    # a gap whose 2 sigma^2 / gap**2 overflows float32 but not float64: that LP is solved
    # in float64, to the closed form (the copies again: the float32 and float64 pieces above)
    tiny = np.array([1e-20, 0.0, -0.5, -0.6, -0.7, -0.8, -0.9, -1.0, -1.1, -1.2])
    rescued = bound.lower_bound(instances.stack([instances.bandit(tiny, 1e-3)] * copies), dtype=np.float32)
    assert rescued.value.shape == (copies,)
    np.testing.assert_allclose(rescued.value, np.sum(2e-6 / (tiny.max() - tiny)[1:]), rtol=1e-6)
    with pytest.raises(ValueError, match=r"^instance sigma\[0, 0\] = 1e-20 is nonzero but its precision 1 / sigma\*\*2 overflows float32 \(the sample would count as noise-free\)"):
        bound.lower_bound(instances.bandit([1e-15, 0.0], 1e-20), dtype=np.float32)
    # one rule, whichever way sigma enters: a square that underflows to 0 or to a subnormal
    for tiny in (1e-200, 1e-156):
        with pytest.raises(ValueError, match=rf"sigma\[0, 0\] = {tiny!r} is nonzero but its precision 1 / sigma\*\*2 overflows float64"):
            instances.bandit([1.0, 0.0], tiny)
