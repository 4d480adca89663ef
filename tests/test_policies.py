"""The policy registry and the basic policies' decision rules on hand-built states."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import estimator, instances
from jaxbandit.engine import make_context
from jaxbandit.policies._common import EstimatorPolicyState

INF = np.inf
BASIC = ("greedy", "eps_greedy", "ucb", "ucb_n", "ts", "ts_n")


def test_registry_lists_the_basic_policies():
    assert set(BASIC) <= set(jb.policies.names())


def test_policies_by_import_path_and_registration():
    by_path = jb.policies.make("jaxbandit.policies.ucb:ucb_n", alpha=0.5)
    assert by_path.params == {"alpha": 0.5} and by_path.name == "ucb_n"
    jb.policies.register("ucb_n_again", jb.policies.ucb.ucb_n)
    try:
        assert jb.policies.make("ucb_n_again").name == "ucb_n"
    finally:
        jb.policies.REGISTRY.pop("ucb_n_again")
    for name in ("", "a:b", 3):
        with pytest.raises(jb.ArgumentError, match="policy name must be a non-empty string"):
            jb.policies.register(name, jb.policies.ucb.ucb_n)
    with pytest.raises(jb.ArgumentError, match="factory for policy 'x' must be callable, got 3"):
        jb.policies.register("x", 3)


def test_a_policy_shows_its_name_params_and_options():
    """Not its functions' addresses, which tell a reader nothing."""
    assert repr(jb.policies.make("ucb_n", alpha=2)) == "Policy(name='ucb_n', params={'alpha': 2.0}, options={})"
    shown = repr(jb.policies.make("lp_explore"))
    assert shown == "Policy(name='lp_explore', params={'alpha': 4.5, 'gamma': 0.5}, options={'case_c_rule': 'largest_deficit'}, solver)"


def test_a_registered_name_is_not_replaced_silently():
    with pytest.raises(jb.ArgumentError, match="policy name 'ucb_n' is already registered .*replace=True"):
        jb.policies.register("ucb_n", jb.policies.greedy.greedy)
    assert jb.policies.make("ucb_n").name == "ucb_n"
    jb.policies.register("ucb_n", jb.policies.ucb.ucb_n)  # the same factory again: nothing changes
    jb.policies.register("greedy_again", jb.policies.greedy.greedy)
    try:
        jb.policies.register("greedy_again", jb.policies.ucb.ucb_n, replace=True)
        assert jb.policies.make("greedy_again").name == "ucb_n"
    finally:
        jb.policies.REGISTRY.pop("greedy_again")


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("nope", {}, r"unknown policy name 'nope'; known policies: .*ucb_n"),
        ("no_such_module_xyz:factory", {}, r"cannot import module 'no_such_module_xyz'"),
        ("jaxbandit.policies:no_such_factory", {}, r"module 'jaxbandit.policies' has no attribute 'no_such_factory'"),
        ("jaxbandit.policies:REGISTRY", {}, r"'REGISTRY' must be a factory"),
        ("jaxbandit.instances:bandit", {"mu": [1.0, 0.5]}, r"the factory returned Instance, not a jaxbandit.Policy"),
        ("ucb", {"alpha": 0}, r"alpha must be a finite number > 0, got 0"),
        ("ucb_n", {"alpha": -1.0}, r"alpha must be a finite number > 0, got -1.0"),
        ("ucb_n", {"alpha": "big"}, r"alpha must be a number > 0, got 'big'"),
        # float() takes these, as 1.0 and 2.0: not numbers a user meant
        ("ucb", {"alpha": True}, r"alpha must be a number > 0, got True"),
        ("ucb_n", {"alpha": "2"}, r"alpha must be a number > 0, got '2'"),
        ("ossb", {"gamma": False}, r"gamma must be a number >= 0, got False"),
        ("ucb", {"alpha": np.complex128(2 + 3j)}, r"alpha must be a number > 0, got np.complex128\(2\+3j\)"),
        ("lp_explore", {"gamma": True}, r"gamma must be a number in \(0, 1\), got True"),
        ("eps_greedy", {"c": float("inf")}, r"c must be a finite number > 0, got inf"),
        ("ts", {"alpha": 1.0}, r"policy 'ts' got unknown parameter\(s\) \['alpha'\]; it accepts none"),
        ("ucb", {"exploration": 2.0}, r"unknown parameter\(s\) \['exploration'\]; it accepts \['alpha'\]"),
    ],
)
def test_bad_policy_names_and_parameters(name, params, message):
    with pytest.raises(jb.ArgumentError, match=message):
        jb.policies.make(name, **params)


def _context(inst, policy):
    _, ctx = make_context(inst, policy.params, 1000, jnp.float32)
    return jax.tree_util.tree_map(lambda x: x[0], ctx)


def _state(inst, counts, mean):
    counts = np.asarray(counts)
    zeta = counts @ np.where(np.isinf(inst.precision), 0.0, inst.precision)
    stats = estimator.from_estimates(counts, zeta, mean)
    return EstimatorPolicyState(stats, jnp.asarray(len(counts), jnp.int32))


GENERAL = jb.Instance([0.5, 0.4, 0.1], [[1.0, INF, 2.0], [0.5, 1.0, INF], [INF, 0.25, 1.0]])


@pytest.mark.parametrize("name", BASIC)
def test_initial_rounds(name):
    policy = jb.policies.make(name)
    ctx = _context(GENERAL, policy)
    state = jax.vmap(lambda _: policy.init_fn(ctx))(jnp.arange(1))
    state = jax.tree_util.tree_map(lambda x: x[0], state)
    select = jax.jit(policy.select_fn)
    arms = [int(select(jnp.zeros(2, jnp.uint32), state, jnp.int32(t), ctx).arm) for t in (1, 2, 3)]
    if name in ("ucb", "ts"):
        assert arms == [0, 1, 2]  # own-arm policies play each arm once
    else:
        assert arms == [1, 2, 2]  # argmin_i sigma[i, j] for j = 0, 1, 2


def test_ucb_n_index_rule():
    policy = jb.policies.make("ucb_n", alpha=1.0)
    ctx = _context(GENERAL, policy)
    counts = [10, 1, 30]
    mean = [0.5, 0.3, 0.45]
    state = _state(GENERAL, counts, mean)
    t = 50
    zeta = np.asarray(counts) @ np.where(np.isinf(GENERAL.precision), 0, GENERAL.precision)
    index = np.asarray(mean) + np.sqrt(2 * np.log(t) / zeta)
    decision = jax.jit(policy.select_fn)(jnp.zeros(2, jnp.uint32), state, jnp.int32(t), ctx)
    assert int(decision.arm) == int(np.argmax(index))


def test_ucb_own_arm_index_uses_sigma_ii_and_own_counts():
    inst = instances.bandit([0.5, 0.4], sigma=[1.0, 3.0])
    policy = jb.policies.make("ucb", alpha=1.0)
    ctx = _context(inst, policy)
    # own counts 100 and 20: widths sqrt(2 log 50 / 100) and 3 sqrt(2 log 50 / 20)
    state = _state(instances.bandit([0.5, 0.4]), [100, 20], [0.5, 0.4])
    decision = jax.jit(policy.select_fn)(jnp.zeros(2, jnp.uint32), state, jnp.int32(50), ctx)
    widths = np.array([1.0, 3.0]) * np.sqrt(2 * np.log(50) / np.array([100, 20]))
    assert int(decision.arm) == int(np.argmax(np.array([0.5, 0.4]) + widths)) == 1


def test_greedy_and_ties_go_to_the_smallest_index():
    policy = jb.policies.make("greedy")
    ctx = _context(GENERAL, policy)
    state = _state(GENERAL, [5, 5, 5], [0.3, 0.7, 0.7])
    assert int(jax.jit(policy.select_fn)(jnp.zeros(2, jnp.uint32), state, jnp.int32(9), ctx).arm) == 1


def test_eps_greedy_explores_at_rate_c_k_over_t():
    """Over 20000 runs at t = 300 with c = 10, K = 3: explore w.p. 0.1 and then pick a
    uniform arm, so the non-greedy arms are played w.p. 0.1 * 2/3 = 0.0667 (5 s.e.)."""
    inst = jb.Instance([0.5, 0.4, 0.1], [[1.0, INF, 2.0], [0.5, 1.0, INF], [INF, 0.25, 1.0]])
    policy = jb.policies.make("eps_greedy", c=10.0)
    ctx = _context(inst, policy)
    state = _state(inst, [5, 5, 5], [0.7, 0.3, 0.2])
    keys = jb.rng.run_keys(jb.rng.stream_key(0, jb.rng.POLICY_STREAM), 0, jnp.arange(20000))
    arms = jax.jit(jax.vmap(lambda k: policy.select_fn(k, state, jnp.int32(300), ctx).arm))(keys)
    rate = float(np.mean(np.asarray(arms) != 0))
    assert abs(rate - 0.1 * 2 / 3) < 5 * np.sqrt(0.0667 * 0.9333 / 20000)


def test_thompson_sampling_draws_from_the_weighted_posterior():
    """ts_n with zeta = (4, 100): P(sample_1 > sample_0) for means (0.5, 0.45) is
    Phi(-0.05 / sqrt(1/4 + 1/100)); 20000 draws, 5 binomial s.e."""
    from math import erf, sqrt

    inst = instances.full_information([0.5, 0.45])
    policy = jb.policies.make("ts_n")
    ctx = _context(inst, policy)
    stats = estimator.from_estimates([4, 100], [4.0, 100.0], [0.5, 0.45])
    state = EstimatorPolicyState(stats, jnp.asarray(2, jnp.int32))
    keys = jb.rng.run_keys(jb.rng.stream_key(1, jb.rng.POLICY_STREAM), 0, jnp.arange(20000))
    arms = jax.jit(jax.vmap(lambda k: policy.select_fn(k, state, jnp.int32(100), ctx).arm))(keys)
    p = 0.5 * (1 + erf((-0.05 / sqrt(0.25 + 0.01)) / sqrt(2)))
    assert abs(float(np.mean(np.asarray(arms) == 1)) - p) < 5 * sqrt(p * (1 - p) / 20000)
