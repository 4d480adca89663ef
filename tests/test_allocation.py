"""The re-use's choice test: where a policy says its Case C choice is certain for a box
of allocations, every allocation in the box gives that choice, and the box the re-use
hands it holds the exact optimum.

The first property on 4,096 random cases per rule (K = 6, float32): allocations with zeros,
equal components (arms sharing a binding constraint), counts set near their targets and
ratios set within and around the rules' tie tolerance; boxes of relative half-width 0 to
1e-3; 32 allocations drawn in each box, with its two corners.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbandit import bound_lp, instances, lp
from jaxbandit.compile_options import Program
from jaxbandit.policies import lp_explore as lp_explore_module
from jaxbandit.policies import ossb as ossb_module

CASES, ARMS, DRAWS = 4096, 6, 32


def _solution(c):
    basis = lp.surplus_basis(c.shape[0], c.shape[0])
    return bound_lp.LowerBoundSolution(c, jnp.zeros((), c.dtype), jnp.int32(lp.LPStatus.OPTIMAL), jnp.int32(0), basis)


def _lp_explore_request(scale):
    zeros = jnp.zeros(ARMS, jnp.float32)
    return lp_explore_module.LPRequest(zeros, jnp.float32(1), jnp.int32(0), jnp.int32(3), jnp.int32(1), zeros, scale)


def _ossb_request(scale):
    del scale
    zeros = jnp.zeros(ARMS, jnp.float32)
    return ossb_module.OSSBRequest(zeros, jnp.float32(1), jnp.int32(0), jnp.int32(3), jnp.int32(1), zeros)


RULES = {
    "lp_explore/largest_deficit": (
        _lp_explore_request,
        lambda s, r, n: lp_explore_module._case_c_arm(s, r, n, "largest_deficit"),
        lambda lo, hi, r, n: lp_explore_module._case_c_arm_is_certain(lo, hi, r, n, "largest_deficit"),
    ),
    "lp_explore/smallest_index": (
        _lp_explore_request,
        lambda s, r, n: lp_explore_module._case_c_arm(s, r, n, "smallest_index"),
        lambda lo, hi, r, n: lp_explore_module._case_c_arm_is_certain(lo, hi, r, n, "smallest_index"),
    ),
    "ossb": (_ossb_request, ossb_module._exploration_arm, ossb_module._exploration_arm_is_certain),
}


def _cases(rng):
    """Allocations, their boxes, counts and scales, as float32 arrays."""
    c = np.exp(rng.normal(3, 2, (CASES, ARMS)))
    c[rng.random((CASES, ARMS)) < 0.3] = 0
    shared = rng.random(CASES) < 0.3  # arms 0 and 1 share a constraint: c equal
    c[shared, 1] = c[shared, 0]
    c = c.astype(np.float32)
    width = rng.choice([0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3], CASES)[:, None]
    low, high = ((c * (1 + sign * width)).astype(np.float32) for sign in (-1, 1))
    scale = rng.uniform(10, 200, CASES).astype(np.float32)
    # counts about s c or c (lp_explore's targets, ossb's), in each case for either rule;
    # some ratios made equal to arm 0's up to a relative spread around the tie tolerance
    target = np.where(rng.random(CASES)[:, None] < 0.5, scale[:, None] * c, c)
    counts = np.floor(target * rng.uniform(0.3, 1.3, (CASES, ARMS)))
    tied = rng.random(CASES) < 0.5
    spread = rng.choice([0, 3e-6, 1e-5, 2e-5, 1e-4], CASES)
    ratio0 = counts[:, 0] / np.maximum(target[:, 0], 1e-30)
    near = np.round(ratio0[:, None] * target * (1 + spread[:, None] * rng.uniform(-1, 1, (CASES, ARMS))))
    counts = np.where(tied[:, None] & (target > 0), near, counts)
    # and some counts just below their targets, where a box can straddle the target
    counts = np.where(rng.random((CASES, ARMS)) < 0.2, np.floor(target), counts)
    return c, low, high, np.maximum(counts, 0).astype(np.int32), scale


@pytest.mark.parametrize("rule", RULES)
def test_a_certain_choice_is_the_choice_of_every_allocation_in_the_box(rule):
    make_request, choose, is_certain = RULES[rule]
    rng = np.random.default_rng(7)
    c, low, high, counts, scale = _cases(rng)
    mix = rng.random((DRAWS, CASES, ARMS)).astype(np.float32)
    mix[0], mix[1] = 0, 1  # the corners
    draws = np.clip(low + (high - low) * mix, low, high).astype(np.float32)

    @Program
    def evaluate(low, high, counts, scale, draws):
        def one(low, high, counts, scale, draws):
            request = make_request(scale)
            certain = is_certain(low, high, request, counts)
            arms, no_arms = jax.vmap(lambda c: choose(_solution(c), request, counts))(draws)
            return certain, arms, no_arms

        return jax.vmap(one, in_axes=(0, 0, 0, 0, 1))(low, high, counts, scale, draws)

    certain, arms, no_arms = (np.asarray(a) for a in evaluate(low, high, counts, scale, draws))
    same = np.all(arms == arms[:, :1], axis=1) & np.all(no_arms == no_arms[:, :1], axis=1)
    assert not np.any(certain & ~same), np.flatnonzero(certain & ~same)[:5]
    # not vacuous: most cases are certain, and some whose draws differ are found
    assert certain.mean() > 0.5, certain.mean()
    assert np.any(~same), rule


_LANES = 64


@Program
@jax.vmap
def _box_of_the_reuse(mu, precision, basis, moved):
    """The box the re-use hands a policy at ``moved`` means, from a warm start anchored at
    ``mu`` (the basis ``basis``), and whether the basis stays certified optimal there."""
    warm = bound_lp.warm_start(precision, basis)
    anchored, _, sensitivity = bound_lp.check_warm_start(mu, precision, warm)
    warm = bound_lp.anchor_warm_start(warm, mu, precision, sensitivity.values, sensitivity.cost_room)
    problem = bound_lp.lower_bound_problem(moved, precision)
    box = []
    decided = lambda low, high: box.append((low, high)) or jnp.asarray(True)
    ok, c = bound_lp.reuse_warm_start_at(problem.cost, problem.b, problem.best_arm, precision, warm, decided)
    return ok & anchored, c, box[0]  # a warm start is anchored where its check passes


_problem = Program(jax.vmap(bound_lp.lower_bound_problem))
_solve = Program(jax.vmap(lp.solve))


def test_the_box_of_a_reuse_holds_the_exact_optimum():
    """``_LANES`` random K = 6 instances, float32, a warm start anchored at their means,
    the means then moved by N(0, d^2), d in 1e-4 .. 1e-2: wherever the re-use certifies
    the basis optimal, the box it hands the policy holds its ``c`` and the float64
    solve's ``c`` of the same float32 LP (its ``A`` and ``b``)."""
    inst = instances.random(4, ARMS, num_instances=_LANES)
    mu = np.asarray(inst.mu, np.float32)
    precision = np.asarray(inst.precision, np.float32)
    basis = np.asarray(Program(jax.vmap(bound_lp.solve_lower_bound))(mu, precision).basis)
    rng = np.random.default_rng(3)
    reused = 0
    for d in (1e-4, 1e-3, 1e-2):
        moved = (mu + d * rng.standard_normal(mu.shape)).astype(np.float32)
        ok, c, (low, high) = jax.tree.map(np.asarray, _box_of_the_reuse(mu, precision, basis, moved))
        problem = jax.tree.map(np.asarray, _problem(moved, precision))  # the float32 data
        with jax.enable_x64(True):
            exact = _solve(*(np.asarray(a, np.float64) for a in (problem.cost, problem.A, problem.b)))
            exact_ok, exact_c = np.asarray(exact.status) == lp.LPStatus.OPTIMAL, np.asarray(exact.x)
        lanes = ok & exact_ok
        assert np.all((low[ok] <= c[ok]) & (c[ok] <= high[ok]))
        assert np.all((low[lanes] <= exact_c[lanes]) & (exact_c[lanes] <= high[lanes])), d
        reused += lanes.sum()
    assert reused > _LANES  # not vacuous
