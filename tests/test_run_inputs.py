"""The checks of a simulation's arguments (the Python API's boundary): values the
simulation's dtype cannot hold are errors, not silent NaN or merged cells."""

import jax
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit.run_inputs import check_inputs
from tests import user_policies

BANDIT = jb.instances.bandit([1.0, 0.5, 0.2])
UCB_N = jb.policies.make("ucb_n")
THRESHOLD = user_policies.traced_threshold()


def test_cells_whose_values_float32_merges_are_refused():
    """Two cells' hyper-parameters one value in float32 would run one computation under
    two values (a user's policy may have no check_params to notice)."""
    pair = jb.instances.stack([BANDIT, BANDIT])
    with pytest.raises(ValueError, match=r"parameter 'eps' values 16777216.0 and 16777217.0 are one value in float32"):
        check_inputs(THRESHOLD, pair, 10, 1, params={"eps": [16777216, 16777217]})
    check_inputs(THRESHOLD, pair, 10, 1, params={"eps": [0.5, 0.5]})  # one value given twice is fine


@pytest.mark.parametrize(
    "instance, params, message",
    [
        (jb.instances.bandit([1e39, 0.0]), {}, r"^instance mu\[0\] = 1e\+39 overflows float32"),
        (jb.instances.bandit([2e38, -2e38]), {}, r"instance gap \(max\(mu\) - mu\) = 4e\+38 overflows float32"),
        (jb.Instance([1.0, 0.0], [[1.0, 2e19], [np.inf, 1.0]]), {}, r"^instance sigma\[0, 1\] = 2e\+19 is finite but its precision"),
        # float32 rounds both to 1e5: arm 0's plays counted no regret
        (jb.instances.bandit([1e5, 1e5 + 1e-3]), {}, r"^instance mu: arm 0 \(100000.0\) is below arm 1 \(100000.001\), but not in float32"),
        # in a batch: the instance, and an entry by its index
        (jb.instances.stack([BANDIT, jb.instances.bandit([1e5 + 1e-3, 1e5, 0.0])]), {}, r"^instance 1: instance mu: arm 1 \(100000.0\) is below arm 0"),
        (jb.instances.stack([BANDIT, jb.instances.bandit([1.0, 1e39, 0.0])]), {}, r"^instance mu\[1, 1\] = 1e\+39 overflows float32"),
        (jb.instances.stack([jb.instances.bandit([1.0, 0.0])] * 2 + [jb.instances.bandit([1.0, 0.0], [1.0, 1e30])]), {},
         r"^instance sigma\[2, 1, 1\] = 1e\+30 is finite but its precision"),
        (BANDIT, {"alpha": 1e39}, r"parameter 'alpha' = 1e\+39 overflows float32"),
        (BANDIT, {"alpha": float("nan")}, r"parameter 'alpha' must not be NaN"),
        (BANDIT, {"alpha": "fast"}, r"parameter 'alpha' must be a number or an array of numbers, got 'fast'"),
        # float() or numpy would take these as 1.0, 2.0 and 1.0 (recording the value as given)
        (BANDIT, {"alpha": True}, r"parameter 'alpha' must be a number or an array of numbers, got True"),
        (BANDIT, {"alpha": "2"}, r"parameter 'alpha' must be a number or an array of numbers, got '2'"),
        (BANDIT, {"alpha": np.array([1 + 2j])}, r"parameter 'alpha' must be a number or an array of numbers, got array\(\[1.\+2.j\]\)"),
        (BANDIT, {"alpha": None}, r"parameter 'alpha' must be a number or an array of numbers, got None"),
    ],
)
def test_values_float32_cannot_hold_are_refused(instance, params, message):
    """Finite or distinct in float64 but not in the simulation's dtype: an error, not
    NaN or zero regret or an ``alpha`` of inf."""
    with pytest.raises(ValueError, match=message):
        check_inputs(UCB_N, instance, 10, 1, params=params)
    with jax.enable_x64(True):
        check_inputs(UCB_N, instance, 10, 1, params={k: 1.0 for k in params}, dtype="float64")  # fits in float64


def test_an_exploration_scale_beyond_its_range_is_refused_by_the_policy():
    """UCB's 2 alpha log t overflowed float32 from alpha near 1e37: every index inf, arm
    0 played forever.  The index policies take alpha up to 1e30 (in every dtype); at 1e29
    float32 explores as float64 does (round robin at this scale)."""
    with pytest.raises(jb.ArgumentError, match=r"^params for policy 'ucb_n': alpha must be at most 1e\+30, got 1e\+36: it scales log t") as caught:
        check_inputs(UCB_N, BANDIT, 10, 1, params={"alpha": 1e36})
    assert caught.value.argument == "alpha"
    for name in ("ucb", "ucb_maxn", "ucb_lp", "lp_explore"):
        with pytest.raises(jb.ArgumentError, match=r"^alpha must be at most 1e\+30"):
            jb.policies.make(name, alpha=1e31)
    assert jb.simulate(jb.policies.make("ucb_n", alpha=1e30), BANDIT, 30, 1).counts.sum() == 30  # as float32 holds it
    within = jb.simulate(jb.policies.make("ucb_n", alpha=1e29), BANDIT, 30, 1).counts
    with jax.enable_x64(True):
        wide = jb.simulate(jb.policies.make("ucb_n", alpha=1e29), BANDIT, 30, 1, dtype="float64").counts
    np.testing.assert_array_equal(within, wide)
    assert np.ptp(within) <= 1
