"""Instance validation and constructors."""

import re

import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import instances, representable

INF = np.inf


def test_valid_instance_and_precision():
    inst = jb.Instance([1.0, 0.5], [[1.0, INF], [2.0, 0.0]])
    assert inst.num_arms == 2 and not inst.is_batch
    np.testing.assert_array_equal(inst.precision, [[1.0, 0.0], [0.25, INF]])
    assert inst.best_arm == 0
    np.testing.assert_allclose(inst.gaps, [0.0, 0.5])
    with pytest.raises(AttributeError):
        inst.mu = np.zeros(2)
    with pytest.raises(ValueError):
        inst.mu[0] = 3.0  # arrays are read-only


@pytest.mark.parametrize(
    "mu, sigma, message",
    [
        ([1.0, 0.5], [[1.0, 1.0]], r"sigma must have shape \(2, 2\)"),
        ([[[1.0, 0.5]]], np.ones((1, 1, 2, 2)), r"mu must have shape"),
        ([1.0], [[1.0]], r"at least K=2"),
        ([1.0, np.nan], np.ones((2, 2)), r"mu must be finite.*nan"),
        ([1.0, np.inf], np.ones((2, 2)), r"mu must be finite.*inf"),
        ([1.0, 0.5], [[1.0, np.nan], [1.0, 1.0]], r"sigma must not contain NaN.*\[0, 1\]"),
        ([1.0, 0.5], [[1.0, -0.5], [1.0, 1.0]], r"sigma must be >= 0.*-0.5"),
        ([1.0, 0.5], [[1.0, INF], [1.0, INF]], r"arm 1 is observed by no row"),
        ("abc", np.ones((2, 2)), r"mu must be a numeric array"),
        # float() would take these; a boolean sigma would make each False noise-free
        ([True, False], np.ones((2, 2)), r"mu must be a numeric array, got \[True, False\]\. Booleans"),
        ([1.0, True], np.ones((2, 2)), r"mu must be a numeric array, got \[1.0, True\]"),
        (["1.0", "0.5"], np.ones((2, 2)), r"mu must be a numeric array, got \['1.0', '0.5'\]"),
        ([1.0, 0.5], np.eye(2, dtype=bool), r"sigma must be a numeric array, got array\(\[\[ True, False\]"),
        (np.zeros((0, 3)), np.ones((0, 3, 3)), r"mu must hold at least one instance, got an empty batch of shape \(0, 3\)"),
        # 1 / sigma**2 would be 0: read as "no information" though the sample is drawn
        ([1.0, 0.5], [[1.0, 1e160], [INF, 1.0]], r"sigma\[0, 1\] = 1e\+160 is finite but its precision 1 / sigma\*\*2 is 0 in float64"),
        # ... or inf: read as a noise-free sample though it is drawn with noise
        ([1.0, 0.5], [[1e-200, INF], [INF, 1.0]], r"sigma\[0, 0\] = 1e-200 is nonzero but its precision 1 / sigma\*\*2 overflows float64"),
    ],
)
def test_bad_instances(mu, sigma, message):
    with pytest.raises(ValueError, match=message):
        jb.Instance(mu, sigma)


def test_ties_rejected_only_when_asked():
    jb.Instance([1.0, 1.0], np.ones((2, 2)))
    with pytest.raises(jb.ArgumentError, match="tie for the best mean") as caught:
        jb.Instance([1.0, 1.0], np.ones((2, 2)), allow_ties=False)
    assert caught.value.argument == "mu"
    # in a batch, each instance's own best mean: the second's 0.7 is a tie though 1.0 is larger
    with pytest.raises(jb.ArgumentError, match=r"instance 1: mu has a tie for the best mean: arms \[0, 1\] at 0.7"):
        jb.Instance([[1.0, 0.5, 0.2], [0.7, 0.7, 0.1]], np.ones((2, 3, 3)), allow_ties=False)
    with pytest.raises(jb.ArgumentError, match="allow_ties must be True or False, got string 'no'"):
        jb.Instance([1.0, 1.0], np.ones((2, 2)), allow_ties="no")  # not read as True


def test_integer_arguments_take_zero_dimensional_arrays_as_numbers_do():
    """One integer rule: a JAX or numpy 0-d array of a whole number is that number (as a
    number argument takes one), a boolean or a fraction is refused."""
    import jax.numpy as jnp

    assert instances.random(jnp.int32(3), np.array(4)) == instances.random(3, 4)
    for bad, shown in ((jnp.array(True), "Array(True, dtype=bool)"), (np.array(2.5), "float 2.5")):
        with pytest.raises(jb.ArgumentError, match=rf"seed must be an integer >= 0, got {re.escape(shown)}"):
            instances.random(bad, 3)


def test_batch_of_one_from_random():
    """num_instances=1 is a batch of one, not a single instance (only >= 1 is refused)."""
    one = instances.random(0, 3, num_instances=1)
    assert one.is_batch and one.num_instances == 1


def test_batch_and_indexing():
    batch = instances.stack([instances.bandit([1.0, 0.2]), instances.full_information([0.1, 0.3])])
    assert batch.is_batch and batch.num_instances == 2
    assert batch[1] == instances.full_information([0.1, 0.3])
    with pytest.raises(ValueError, match="instance 1: arm 0"):
        jb.Instance(np.zeros((2, 2)), np.stack([np.ones((2, 2)), [[INF, 1.0], [INF, 1.0]]]))
    with pytest.raises(ValueError, match="equal K"):
        instances.stack([instances.bandit([1.0, 0.2]), instances.bandit([1.0, 0.2, 0.1])])
    with pytest.raises(jb.ArgumentError, match=r"stack needs single instances; instances\[1\] is a batch of 2 \(pass its instances"):
        instances.stack([instances.bandit([1.0, 0.2]), batch])
    assert instances.stack(i for i in [instances.bandit([1.0, 0.2])]) == instances.stack([instances.bandit([1.0, 0.2])])
    # an index is an integer in range (negative from the end); a batch iterates, a single instance does not
    assert batch[-1] == batch[1] and list(batch) == [batch[0], batch[1]]
    for bad, message in ((2, r"index must be at most 1 \(a batch of 2\), got 2"), (-3, "index must be an integer >= -2, got -3"),
                         (True, "got boolean True"), (slice(1, None), "got slice"), ((0, 1), "got array")):  # fmt: skip
        with pytest.raises(jb.ArgumentError, match=message):
            batch[bad]
    with pytest.raises(TypeError, match="a single Instance cannot be iterated"):
        list(batch[0])
    # stack's refusals name the argument
    for call, message in (
        (lambda: instances.stack([]), r"instances must be a non-empty list, got \[\]"),
        (lambda: instances.stack(batch[0]), "stack takes a list of instances, got one: Instance"),
        (lambda: instances.stack([batch[0], instances.full_information([0.1, 0.3], noise="uniform")]), "one noise family"),
    ):
        with pytest.raises(jb.ArgumentError, match=message) as caught:
            call()
        assert caught.value.argument == "instances"


def test_an_instance_pickles_and_copies_to_an_equal_one():
    """So it goes to other processes (multiprocessing, joblib) and into deep-copied
    configurations; immutable, it is built again from its values."""
    import copy
    import pickle

    for inst in (instances.bandit([1.0, 0.5], noise="bernoulli"), instances.random(3, 4, num_instances=2)):
        for again in (pickle.loads(pickle.dumps(inst)), copy.copy(inst), copy.deepcopy(inst)):
            assert again == inst and again.noise == inst.noise
            assert not again.mu.flags.writeable


def test_constructors():
    mu = [1.0, 0.5, 0.2]
    b = instances.bandit(mu, sigma=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.diag(b.sigma), [1.0, 2.0, 3.0])
    assert np.all(np.isinf(b.sigma[~np.eye(3, dtype=bool)]))
    f = instances.full_information(mu, 0.5)
    assert np.all(f.sigma == 0.5)
    adjacency = np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0]])
    g = instances.graph(mu, adjacency, 2.0)
    np.testing.assert_array_equal(np.isfinite(g.sigma), adjacency.astype(bool) | np.eye(3, dtype=bool))
    r = instances.revealing_arm([1.0, 0.5], reveal_mean=-1.0)
    assert r.num_arms == 3 and r.mu[-1] == -1.0 and np.all(np.isfinite(r.sigma[-1]))
    g2 = instances.random(0, 6, inf_prob=0.5)
    assert g2.num_arms == 6 and np.any(np.isinf(g2.sigma))
    # general matrices allow better information from another arm than from the arm itself
    many = instances.random(1, 4, num_instances=20)
    diag = np.diagonal(many.sigma, axis1=1, axis2=2)
    assert np.any(many.sigma < diag[:, None, :])
    assert list(instances.default_instances()) == ["bandit", "full_information", "graph_star", "revealing_arm", "general"]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: instances.graph([1.0, 0.5], np.ones((3, 3))), r"adjacency must be a 2 x 2 array \(rows of equal length\)"),
        (lambda: instances.graph([1.0, 0.5], [[0, 2], [0, 0]]), r"adjacency must be boolean"),
        (lambda: instances.random(0, 1), r"num_arms must be an integer >= 2"),
        (lambda: instances.random(0, 3, inf_prob=1.0), r"inf_prob must be in"),
        (lambda: instances.bandit([[1.0, 0.5]]), r"mu must have shape \(K,\)"),
        (lambda: instances.bandit([1.0, 0.5], sigma=-1.0), r"sigma must be >= 0"),
        (lambda: instances.bandit([1.0, 0.5], sigma=[1, 2, 3]), r"sigma must be a number or have shape \(2,\) for the 2 arms, got shape \(3,\)"),
        (lambda: instances.bandit([1.0, 0.5], sigma="x"), r"sigma must be a number or 2 numbers, got 'x'"),
        (lambda: instances.full_information([1.0, 0.5], sigma=[1, 2]), r"sigma must be a number, got \[1, 2\]"),
        (lambda: instances.bandit(["a", 0.5]), r"mu must be a list of K numbers, got \['a', 0.5\]"),
        (lambda: instances.bandit([1.0, None]), r"mu must be a list of K numbers, got \[1.0, None\]"),
        (lambda: instances.bandit([1.0, 0.5], sigma=None), r"sigma must be a number or 2 numbers, got None"),
        (lambda: instances.full_information([1.0, 0.5], sigma=None), r"sigma must be a number, got None"),
        (lambda: instances.graph([1.0, 0.5], np.eye(2), sigma=None), r"sigma must be a number, got None"),
        (lambda: instances.revealing_arm(sigma=None), r"sigma must be a number >= 0, got None"),
        (lambda: instances.revealing_arm(reveal_sigma="x"), r"reveal_sigma must be a number >= 0, got 'x'"),
        (lambda: instances.revealing_arm(reveal_mean=None), r"reveal_mean must be a number, got None"),
        (lambda: instances.revealing_arm([]), r"mu must hold the means of at least one ordinary arm \(K - 1 >= 1\), got \[\]"),
        (lambda: instances.random(0, None), r"num_arms must be an integer >= 2, got None"),
        (lambda: instances.random(0, 3, num_instances=0), r"num_instances must be an integer >= 1, got 0"),
        (lambda: instances.random(0, 3, num_instances=-1), r"num_instances must be an integer >= 1, got -1"),
        (lambda: instances.random(0, 3, num_instances=2.5), r"num_instances must be an integer >= 1, got float 2.5"),
        (lambda: instances.random(0, 3, inf_prob=None), r"inf_prob must be a number, got None"),
        (lambda: instances.random(0, 3, mean_range=None), r"mean_range must be two numbers \(low, high\), got None"),
        (lambda: instances.random(0, 3, log10_sigma_range=(1.0,)), r"log10_sigma_range must be two numbers"),
        # booleans and strings are not numbers, though float() would take them
        (lambda: instances.revealing_arm(reveal_mean=True), r"reveal_mean must be a number, got True"),
        (lambda: instances.bandit([1.0, 0.5], sigma=True), r"sigma must be a number or 2 numbers, got True"),
        (lambda: instances.graph([1.0, 0.5], np.eye(2), sigma="1"), r"sigma must be a number, got '1'"),
        (lambda: instances.random(0, 3, inf_prob="0.5"), r"inf_prob must be a number, got '0.5'"),
        (lambda: instances.random(0, 3, num_instances=True), r"num_instances must be an integer >= 1, got boolean True"),
        (lambda: instances.random(0, 3, mean_range="05"), r"mean_range must be two numbers \(low, high\), got '05'"),
        (lambda: instances.random(0, 3, mean_range=(0, "1")), r"mean_range must be two numbers \(low, high\), got \(0, '1'\)"),
        (lambda: instances.random(0, 3, log10_sigma_range=(1, -1)), r"log10_sigma_range must be two numbers with low <= high, got \(1, -1\)"),
        (
            lambda: instances.stack([instances.bandit([1.0, 0.0]), "x"]),
            r"instances\[1\] must be a jaxbandit.Instance, got str 'x'",
        ),
    ],
)
def test_bad_constructor_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# -- noise families ---------------------------------------------------------------------


def test_every_constructor_takes_and_keeps_the_noise_family():
    mu = [0.9, 0.5, 0.2]
    built = [
        jb.Instance(mu, np.full((3, 3), 0.5), noise="bernoulli"),
        instances.bandit(mu, 0.5, noise="bernoulli"),
        instances.full_information(mu, 0.5, noise="bernoulli"),
        instances.graph(mu, np.eye(3), 0.5, noise="bernoulli"),
        instances.revealing_arm(mu, noise="bernoulli"),
        instances.random(0, 3, log10_sigma_range=(np.log10(0.5), 0.5), noise="bernoulli"),
    ]
    assert all(inst.noise == jb.noise.bernoulli() for inst in built)
    assert instances.bandit(mu).noise == jb.noise.gaussian()  # the default: the paper's model
    student = instances.random(0, 3, num_instances=2, noise=jb.noise.student_t(df=3))
    assert student.noise.label == "student_t(df=3)" and student[1].noise == student.noise
    assert instances.stack([student[0], student[1]]).noise == student.noise
    # the family is part of the instance
    assert instances.bandit(mu, 0.5) != instances.bandit(mu, 0.5, noise="uniform")
    assert repr(instances.bandit(mu, 0.5, noise="rademacher")).endswith("noise='rademacher')")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: instances.bandit([1.5, 0.5], 0.5, noise="bernoulli"), r"mu\[0\] = 1.5: under Bernoulli noise a mean is the probability"),
        (lambda: instances.bandit([0.5, -0.1], 0.5, noise="bernoulli"), r"mu\[1\] = -0.1: .* must lie in \[0, 1\]"),
        (lambda: instances.bandit([0.5, 0.2], [0.5, 0.3], noise="bernoulli"), r"sigma\[1, 1\] = 0.3 is below 1/2: .*Hoeffding"),
        (lambda: instances.full_information([0.5, 0.2], 0.0, noise="bernoulli"), r"sigma\[0, 0\] = 0.0 is below 1/2"),
        (lambda: instances.random(0, 3, noise="bernoulli"), r"log10_sigma_range \(-0.5, 0.5\) reaches sigma = 0.316.*np.log10\(0.5\)"),
        (lambda: instances.random(0, 3, mean_range=(0, 2), log10_sigma_range=(0, 1), noise="bernoulli"), r"mean_range\[1\] = 2.0: under Bernoulli noise a mean"),
        # whatever the draws: seed 0 would draw no mean above 1 here
        (lambda: instances.random(0, 4, mean_range=(0, 1.05), log10_sigma_range=(0, 1), noise="bernoulli"), r"mean_range\[1\] = 1.05:"),
        # the revealing arm's own values, by the arguments that gave them
        (lambda: instances.revealing_arm([0.9, 0.5], reveal_mean=1.5, sigma=0.5, noise="bernoulli"), r"^reveal_mean = 1.5: under Bernoulli"),
        (lambda: instances.revealing_arm([0.9, 0.5], sigma=0.5, reveal_sigma=0.3, noise="bernoulli"), r"^reveal_sigma = 0.3 is below 1/2"),
        (lambda: instances.revealing_arm([0.9, 0.5], sigma=0.3, noise="bernoulli"), r"^sigma = 0.3 is below 1/2"),
        (
            lambda: instances.stack([instances.bandit([1.0, 0.0]), instances.bandit([1.0, 0.0], noise="uniform")]),
            r"stack needs instances of one noise family: instances\[0\] has noise 'gaussian', instances\[1\] 'uniform'",
        ),
    ],
)
def test_bad_instances_for_a_noise_family(call, message):
    with pytest.raises(ValueError, match=message) as caught:
        call()
    if isinstance(caught.value, jb.ArgumentError) and "stack" not in message:
        assert str(caught.value).startswith(caught.value.argument), caught.value  # the argument it names


def test_the_other_families_take_any_gaussian_instance():
    """Uniform, Rademacher and Student's t noise are scaled by sigma as Gaussian noise
    is: any mean, and sigma = 0 (a noise-free observation)."""
    for noise in ("uniform", "rademacher", jb.noise.student_t(df=4)):
        inst = jb.Instance([3.0, -2.0], [[0.0, INF], [0.1, 1.0]], noise=noise)
        assert inst.noise == jb.noise.resolve(noise)


def test_a_simulation_refuses_gaps_whose_lp_requirement_its_dtype_loses():
    """A gap so large that float32 holds 2 / gap**2 as 0: the LP policies' rounds and the
    bound would drop the arm (an explore-then-commit oracle that never explores)."""
    huge = jb.instances.bandit([1e20, 0.0], 1e10)
    with pytest.raises(ValueError, match=r"the gap 1e\+20 of arm 1 is so large that 2 / gap\*\*2 underflows float32; rescale mu or use dtype='float64'"):
        jb.simulate(jb.policies.make("oracle_etc"), huge, 10, 2)
    representable.check_representable(huge.mu[None], huge.sigma[None], np.float64)  # float64 holds it


def test_a_simulation_refuses_gaps_whose_lp_requirement_overflows_its_dtype():
    """A gap so small that 2 / gap**2 overflows the dtype: the oracle's LP would get an
    infinite requirement (and give up, committing after one play of each arm), as the
    lower bound refuses it; 1.2e-19 is held in float32, and 1e-20 in float64."""
    tiny = jb.instances.bandit([1e-20, 0.0, -1.0])
    with pytest.raises(jb.ArgumentError, match=r"the gap 1e-20 of arm 1 is so small that 2 / gap\*\*2 overflows float32; rescale mu or use dtype='float64'\.$"):
        jb.simulate(jb.policies.make("oracle_etc"), tiny, 10, 2)
    representable.check_representable(tiny.mu[None], tiny.sigma[None], np.float64)
    # 2 / gap**2 = 1.8e38 is held, but gap**2 is below float32's smallest normal number:
    # XLA flushes it to 0, the quotient is inf
    with pytest.raises(jb.ArgumentError, match=r"the gap 1.05e-19 of arm 1 is so small"):
        jb.simulate(jb.policies.make("oracle_etc"), jb.instances.bandit([1.05e-19, 0.0, -1.0]), 10, 2)
    held = jb.simulate(jb.policies.make("oracle_etc"), jb.instances.bandit([1.2e-19, 0.0, -1.0]), 10, 2)
    assert (held.diagnostics["lp_status"] == 0).all()
    with pytest.raises(jb.ArgumentError, match=r"the gap 1e-200 of arm 1 is so small that 2 / gap\*\*2 overflows float64; rescale mu\.$"):
        representable.check_representable(np.array([[1e-200, 0.0, -1.0]]), tiny.sigma[None], np.float64)


def test_means_float32_spaces_coarsely_next_to_their_gaps_are_warned_about():
    """Gaps of 0.2 at a common offset of 1e5: float32 spaces the means 0.0078 apart
    there, so estimates of the best two arms often tie (the LP policies' tie fallback).
    Warned about, naming the remedy, in a simulation and at a configuration's key; not
    at an offset of 100, for a far arm beside two close ones near 1, for the gaps of a
    random K = 1000 instance, nor in float64 (whose own remedy is not "use float64")."""
    base = np.array([0.0, -0.2, -0.5, -1.0])
    far = jb.instances.bandit(base + 1e5)
    with pytest.warns(representable.CoarseMeansWarning, match=r"float32 spaces the best two means \(100000.0, 99999.8\) 0.0078125 apart, 3.9% of their gap: .*Subtract a common offset .* or use dtype='float64'\.$"):
        jb.SimulationRun(jb.policies.make("ucb_n"), far, 10, 2)
    entry = {"type": "bandit", "name": "far", "mu": list(base + 1e5)}
    with pytest.warns(representable.CoarseMeansWarning, match=r"<dict>: instances\[0\] \(far\): float32 .*or use precision = \"float64\""):
        jb.config.load({"runs": 1, "horizon": 10, "instances": [entry], "policies": [{"name": "ucb_n"}]})
    check = lambda mu, dtype: representable.check_representable(np.atleast_2d(mu), np.ones((1, len(mu), len(mu))), dtype)
    for quiet in (base + 100.0, np.array([1.0, 0.99, -1000.0]), jb.instances.random(0, 1000).mu):
        check(quiet, np.float32)  # warnings are errors in the tests
    check(far.mu, np.float64)
    with pytest.warns(representable.CoarseMeansWarning, match=r"float64 .*regret depends on the gaps only\)\.$"):
        check(np.array([1e5, 1e5 - 1e-9]), np.float64)
