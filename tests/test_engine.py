"""The engine: compiled programs reused only for the same computation, plays counted
by the engine, consolidation at its fixed rounds, arms outside [0, K) reported."""

import functools
import itertools
import pickle
import types
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import dtypes as jax_dtypes

import jaxbandit as jb
from jaxbandit import engine, estimator, fingerprint
from jaxbandit.base import Decision
from jaxbandit.policy_check import PolicyError
from tests import reference, user_policies

BANDIT = jb.instances.bandit([1.0, 0.5, 0.2])  # gaps 0, 0.5, 0.8
INF = np.inf


def worst_arm(key, state, t, ctx):
    return jb.play(2)


def test_a_variant_with_the_same_name_is_not_served_another_computation():
    """``make("ucb_n")._replace(select_fn=...)`` keeps the name "ucb_n"; it must still
    run its own select_fn (always the worst arm: regret 0.8 per round)."""
    reference = jb.simulate(jb.policies.make("ucb_n"), BANDIT, 200, 4, seed=0)
    variant = jb.policies.make("ucb_n")._replace(select_fn=worst_arm)
    result = jb.simulate(variant, BANDIT, 200, 4, seed=0)
    np.testing.assert_allclose(result.final_regret, 160.0, rtol=1e-6)
    run = jb.SimulationRun(variant, BANDIT, 200, 4, seed=0)
    run.advance()
    np.testing.assert_allclose(run.result().final_regret, 160.0, rtol=1e-6)
    assert reference.final_regret.mean() < 60


def test_a_hyper_parameter_captured_in_a_closure_compiles_its_own_program():
    high = jb.simulate(user_policies.threshold(0.9), BANDIT, 200, 2, seed=0)
    low = jb.simulate(user_policies.threshold(0.1), BANDIT, 200, 2, seed=0)
    np.testing.assert_allclose(high.final_regret, 100.0, rtol=1e-6)
    np.testing.assert_array_equal(low.final_regret, 0.0)


def test_numeric_hyper_parameters_in_params_share_one_compile():
    """A grid over ``params`` traces select_fn once; its results still differ."""
    # A C object, keyed by identity: its count is not part of the program's key (an
    # object with attributes of its own, a list or a dict would be, by value).
    traces = itertools.count()
    policy = user_policies.traced_threshold(0.9)

    def counting_select(key, state, t, ctx):
        next(traces)  # runs at trace time only
        return policy.select_fn(key, state, t, ctx)

    results = [
        jb.simulate(user_policies.traced_threshold(eps)._replace(select_fn=counting_select), BANDIT, 50, 2, seed=0)
        for eps in (0.9, 0.1, 0.7)
    ]
    assert next(traces) == 3  # the contract check (abstract, twice: a second trace is the same program) and the one compile
    assert [float(r.final_regret[0]) for r in results] == [25.0, 0.0, 25.0]


def test_policy_keys_see_code_closures_defaults_and_globals():
    def factory(value, default=1):
        def select_fn(key, state, t, ctx, scale=default):
            return jb.play(jnp.int32(value * scale))

        return jb.policies.make("greedy")._replace(select_fn=select_fn)

    key = engine.policy_key
    assert key(factory(1)) == key(factory(1))
    assert key(factory(1)) != key(factory(2))  # closure
    assert key(factory(1)) != key(factory(1, default=2))  # default argument
    assert key(jb.policies.make("ucb_n", alpha=1.0)) == key(jb.policies.make("ucb_n", alpha=3.0))  # params
    assert key(jb.policies.make("ucb_n")) != key(jb.policies.make("ucb"))
    array_closure = lambda a: jb.policies.make("greedy")._replace(select_fn=lambda k, s, t, c: jb.play(a[0]))
    assert key(array_closure(np.array([1]))) == key(array_closure(np.array([1])))
    assert key(array_closure(np.array([1]))) != key(array_closure(np.array([2])))
    # An object without attributes of its own counts by identity: never merged with another.
    marker = object()
    other = lambda m: jb.policies.make("greedy")._replace(select_fn=lambda k, s, t, c: jb.play(0 if m else 1))
    assert key(other(marker)) != key(other(object()))
    # Floats by their bits: jnp.float32(-0.0) and 0.0 are different programs' constants.
    assert key(factory(-0.0)) != key(factory(0.0)) and key(factory(float("nan"))) == key(factory(float("nan")))
    # in a list or a tuple too, all floats or mixed, to the last bit of a float64
    for container in (list, tuple):
        for head in ([], [1]):
            values = lambda x, c=container, h=head: c([*h, x, 2.0])  # noqa: E731
            assert key(array_closure(values(1.0))) == key(array_closure(values(1.0)))
            assert key(array_closure(values(1.0))) != key(array_closure(values(1.0 + 2**-40))), (container, head)


class FixedArm:
    """A policy written as a class: its hyper-parameter is an attribute of ``self``."""

    def __init__(self, arm):
        self.arm = arm
        self.owner = self  # a cycle back to the object

    def select(self, key, state, t, ctx):
        return jb.play(self.arm)

    def policy(self):
        return user_policies.fixed_arm(0)._replace(select_fn=self.select, name="fixed")


def test_an_object_changed_in_place_is_another_computation():
    """A bound method's ``self`` (and any captured object) is keyed by its attributes, so
    changing one in place after a run compiles a new program instead of reusing the
    old one."""
    fixed = FixedArm(0)
    first = jb.simulate(fixed.policy(), BANDIT, 50, 2, seed=0)
    fixed.arm = 2
    second = jb.simulate(fixed.policy(), BANDIT, 50, 2, seed=0)
    np.testing.assert_array_equal(first.counts, [[50, 0, 0]] * 2)
    np.testing.assert_array_equal(second.counts, [[0, 0, 50]] * 2)
    assert engine.policy_key(FixedArm(1).policy()) == engine.policy_key(FixedArm(1).policy())
    config = types.SimpleNamespace(arm=1)
    captured = user_policies.fixed_arm(0)._replace(select_fn=lambda k, s, t, c: jb.play(config.arm))
    before = engine.policy_key(captured)
    config.arm = 2
    assert engine.policy_key(captured) != before


class CachedPreference:
    """A policy whose weights a ``functools.cached_property`` computes from ``arm``."""

    def __init__(self, arm):
        self.arm = arm

    @functools.cached_property
    def weights(self):
        return np.eye(3, dtype=np.float32)[self.arm]

    def select(self, key, state, t, ctx):
        return jb.play(jnp.argmax(jnp.asarray(self.weights)).astype(jnp.int32))

    def policy(self):
        return user_policies.fixed_arm(0)._replace(select_fn=self.select, name="cached")


def test_a_cached_property_s_value_counts_once_computed():
    """An object whose cached weights went stale (``arm`` changed after they were
    computed) is not the computation of a fresh object of that ``arm``: each runs its
    own weights, and an object simulated twice (its cache filled by its first trace)
    gives the same runs."""
    stale = CachedPreference(0)
    np.testing.assert_array_equal(jb.simulate(stale.policy(), BANDIT, 50, 2).counts, [[50, 0, 0]] * 2)
    stale.arm = 2  # its cached weights still prefer arm 0
    np.testing.assert_array_equal(jb.simulate(stale.policy(), BANDIT, 50, 2).counts, [[50, 0, 0]] * 2)
    fresh = CachedPreference(2)
    assert engine.policy_key(fresh.policy()) != engine.policy_key(stale.policy())
    np.testing.assert_array_equal(jb.simulate(fresh.policy(), BANDIT, 50, 2).counts, [[0, 0, 50]] * 2)
    np.testing.assert_array_equal(jb.simulate(fresh.policy(), BANDIT, 50, 2).counts, [[0, 0, 50]] * 2)


def test_policy_keys_see_what_else_a_function_reads(monkeypatch):
    """Hyper-parameters kept where users keep them give different computations different
    keys (one compiled program would otherwise serve both): an attribute set on the
    function, a setting of the user's own module (``user_policies.ARM``), the code of a
    callable object's class (seen across processes: the digest), and sets and ranges by
    value (a set changed in place too)."""
    greedy = jb.policies.make("greedy")

    def with_attribute(arm):
        def select_fn(key, state, t, ctx):
            return jb.play(select_fn.arm)

        select_fn.arm = arm
        return greedy._replace(select_fn=select_fn)

    assert engine.policy_key(with_attribute(0)) != engine.policy_key(with_attribute(2))

    from_module = greedy._replace(select_fn=lambda key, state, t, ctx: jb.play(user_policies.ARM))
    before = engine.policy_key(from_module)
    monkeypatch.setattr(user_policies, "ARM", 2)
    assert engine.policy_key(from_module) != before

    def callable_policy(arm):
        class Select:
            def __call__(self, key, state, t, ctx):
                return jb.play(arm)

        return greedy._replace(select_fn=Select())

    assert engine.policy_code(callable_policy(0)) != engine.policy_code(callable_policy(2))

    captured = lambda arms: greedy._replace(select_fn=lambda key, state, t, ctx: jb.play(min(arms)))
    assert engine.policy_code(captured(frozenset({0}))) != engine.policy_code(captured(frozenset({2})))
    assert engine.policy_code(captured(range(0, 3))) != engine.policy_code(captured(range(2, 3)))
    arms = {0}
    in_place = captured(arms)
    before = engine.policy_key(in_place)
    arms.add(-1)
    assert engine.policy_key(in_place) != before
    assert engine.policy_code(captured({1, 2, 3})) == engine.policy_code(captured({3, 2, 1}))


def test_policy_keys_follow_the_users_modules_and_classes_wherever_reached(monkeypatch):
    """A setting of the user's own reached through a package (``tests.user_policies.ARM``),
    a module imported by the enclosing function (a closure cell holds it) or inside the
    function itself, a class in a closure whose attribute it inherits from a base class,
    a class attribute that a method another method calls reads (``self.ARM``), a class
    method, and a global that ``__init__`` or a property reads: each changed gives
    another key, here and on disk."""
    greedy = jb.policies.make("greedy")
    import tests  # a local import: the lambdas' closures hold the package

    class Base:
        ARM = 0

    class Derived(Base):
        pass

    class Reader:
        ARM = 0

        def select(self, key, state, t, ctx):
            return jb.play(self._pick())

        def _pick(self):  # the attribute is read by a method the policy's code does not name
            return self.ARM

        @classmethod
        def pick(cls):
            return cls.ARM

    class Setting:
        def __init__(self):  # called unnamed, as Setting()
            self.arm = tests.user_policies.ARM

        @property
        def read(self):
            return tests.user_policies.ARM

    def imports(key, state, t, ctx):
        from tests import user_policies as imported  # a module imported where it is used

        return jb.play(imported.ARM)

    Reader.ITEMS = []
    Reader.ITEMS.append(Reader.ITEMS)  # a cycle: described once, not forever
    reached = {
        "through a package": (greedy._replace(select_fn=lambda k, s, t, c: jb.play(tests.user_policies.ARM)), user_policies),
        "an inherited class attribute": (greedy._replace(select_fn=lambda k, s, t, c: jb.play(Derived.ARM)), Base),
        "a class attribute read by self": (greedy._replace(select_fn=Reader().select), Reader),
        "a class method": (greedy._replace(select_fn=lambda k, s, t, c: jb.play(Reader.pick() + len(Reader.ITEMS))), Reader),
        "a global read by __init__": (greedy._replace(select_fn=lambda k, s, t, c: jb.play(Setting().arm)), user_policies),
        "a global read by a property": (greedy._replace(select_fn=lambda k, s, t, c: jb.play(Setting().read)), user_policies),
        "an import inside the function": (greedy._replace(select_fn=imports), user_policies),
    }
    for what, (policy, owner) in reached.items():
        before = engine.policy_key(policy), engine.policy_code(policy)
        with monkeypatch.context() as patch:
            patch.setattr(owner, "ARM", 2)
            after = engine.policy_key(policy), engine.policy_code(policy)
        assert after[0] != before[0] and after[1] != before[1], what
        assert (engine.policy_key(policy), engine.policy_code(policy)) == before, what  # restored: the same again


def test_policy_keys_see_what_any_function_reads_and_what_builtins_hold(monkeypatch):
    """A setting read by a helper that another function passes the module to, a
    NamedTuple's method reading a global, a dict's order, a dict read through its bound
    ``get``, slices, code that differs in its exception table or its flags, and narrow
    dtypes that share their ``dtype.str``: each difference gives another key."""
    greedy = jb.policies.make("greedy")
    key = lambda fn: engine.policy_key(greedy._replace(select_fn=fn))

    def read(module):
        return module.ARM

    passed = lambda k, s, t, c: jb.play(read(user_policies))
    before = key(passed)
    monkeypatch.setattr(user_policies, "ARM", 2)
    assert key(passed) != before
    monkeypatch.undo()

    class Settings(typing.NamedTuple):
        arm: int

        def scaled(self):
            return self.arm * user_policies.ARM

    settings = Settings(1)
    scaled = lambda k, s, t, c: jb.play(settings.scaled())
    before = key(scaled)
    monkeypatch.setattr(user_policies, "ARM", 2)
    assert key(scaled) != before
    monkeypatch.undo()

    first = lambda d: (lambda k, s, t, c: jb.play(list(d.values())[0]))
    assert key(first({"a": 0, "b": 1})) != key(first({"b": 1, "a": 0}))
    table = {"arm": 0}
    get = table.get
    through_get = lambda k, s, t, c: jb.play(get("arm"))
    before = key(through_get)
    table["arm"] = 1
    assert key(through_get) != before
    sliced = lambda part: (lambda k, s, t, c: jb.play(len(range(5)[part])))
    assert key(sliced(slice(0, 3))) != key(sliced(slice(0, 5)))
    assert engine.policy_code(greedy._replace(select_fn=sliced(slice(0, 3)))) != engine.policy_code(greedy._replace(select_fn=sliced(slice(0, 5))))

    def caught(x):
        try:
            a = int(x)
            b = int(a - 5)
        except ValueError:
            return 0
        return b

    def uncaught(x):
        try:
            a = int(x)
        except ValueError:
            return 0
        else:
            b = int(a - 5)
        return b

    assert caught.__code__.co_code == uncaught.__code__.co_code  # the same bytecode: told apart by the table
    assert fingerprint.computation_key(caught) != fingerprint.computation_key(uncaught)
    assert fingerprint.computation_key(lambda *a: a) != fingerprint.computation_key(lambda **a: a)
    u = np.array([0x38], np.uint8)
    import ml_dtypes

    assert fingerprint.computation_key(u.view(ml_dtypes.int4)) != fingerprint.computation_key(u.view(ml_dtypes.float8_e4m3fn))


def test_keys_see_base_methods_container_attributes_private_slots_and_array_kinds(monkeypatch):
    """A class attribute only a base's method reads (through ``super()``), an attribute
    of a dict subclass, a private slot, a structured dtype, the contents of an object
    array and a float subclass: each difference gives another key."""
    key = fingerprint.computation_key

    class Base:
        FACTOR = 2.0

        def select(self, x):
            return x * self.FACTOR

    class Child(Base):
        def select(self, x):
            return super().select(x) + 1.0

    child = Child()
    before = key(child.select)
    monkeypatch.setattr(Base, "FACTOR", 5.0)
    assert key(child.select) != before

    class Params(dict):
        def __init__(self, scale):
            super().__init__(lr=1.0)
            self.scale = scale

        def lr(self):
            return self["lr"] * self.scale

    assert key(Params(1.0).lr) != key(Params(9.0).lr)

    class Slotted:
        __slots__ = ("__lr",)

        def __init__(self, lr):
            self.__lr = lr

        def select(self, x):
            return x * self.__lr

    assert key(Slotted(1.0).select) != key(Slotted(2.0).select)
    assert key(np.zeros(1, dtype=[("a", "<f8")])) != key(np.zeros(1, dtype=[("a", "<i8")]))
    table = {"lr": 1.0}
    objects = np.array([table, None], dtype=object)
    before = key(objects)
    table["lr"] = 5.0
    assert key(objects) != before

    class Doubled(float):
        def __mul__(self, other):
            return 2 * float(self) * other

    assert key(Doubled(1.0)) != key(1.0) and key([0.5, -0.0]) != key([0.5, 0.0])
    # a weakly typed JAX array promotes otherwise (a float64 one multiplied into float32
    # data gives float32): its key and digest are its own
    with jax.enable_x64(True):
        weak, strong = jax.numpy.asarray(1.5), jax.numpy.asarray(1.5, dtype=jax.numpy.float64)
        assert weak.weak_type and not strong.weak_type
        assert key(weak) != key(strong)
        assert fingerprint.stable_digest(key(weak)) != fingerprint.stable_digest(key(strong))
        assert key(strong) == key(np.float64(1.5).reshape(()))  # a strong one is its values


def test_a_policy_changed_in_place_after_its_simulation_was_set_up_is_refused():
    """A value the policy reads, changed between setting up a simulation and its first
    trace, would compile the new computation under the old one's key: the run is refused
    naming the policy (its identity stays the one it was set up with); a run sharing the
    engine of a policy changed so is served by one built from its own; fresh policies of
    either setting play their own arm."""

    class Settings:
        def __init__(self, arm):
            self.arm = arm

    def make(settings):
        return jb.policies.make("greedy")._replace(
            select_fn=lambda key, state, t, ctx: jb.play(jnp.int32(settings.arm)), name="settings_arm"
        )

    arms = lambda result: set(reference.arms_from_regret(result.regret[0], BANDIT.gaps))
    settings = Settings(1)
    run = jb.SimulationRun(make(settings), BANDIT, 40, 2, seed=0)
    sharing = jb.SimulationRun(make(Settings(1)), BANDIT, 40, 2, seed=0, times=np.arange(1, 41))
    identity = run.identity()
    settings.arm = 0
    assert run.identity() == identity  # what it was set up to compute, as its checkpoints record
    with pytest.raises(PolicyError, match=r"policy 'settings_arm' \(or its monitor\) reads other values than when"):
        run.advance()
    sharing.advance()
    assert arms(sharing.result()) == {1}
    assert arms(jb.simulate(make(Settings(1)), BANDIT, 40, 2, seed=0, times=np.arange(1, 41))) == {1}
    assert arms(jb.simulate(make(settings), BANDIT, 40, 2, seed=0, times=np.arange(1, 41))) == {0}


def test_a_policy_that_counts_its_traces_runs_again():
    """A change the policy's own tracing makes (a count of traces, in a dict it closes
    over) is what the compiled program holds: not a change in place, so never refused."""
    calls = {"traces": 0}
    ucb = jb.policies.make("ucb_n")

    def select_fn(key, state, t, ctx):
        calls["traces"] += 1
        return ucb.select_fn(key, state, t, ctx)

    policy = ucb._replace(select_fn=select_fn)
    first, second = (jb.simulate(policy, BANDIT, 30, 2, seed=0) for _ in range(2))
    np.testing.assert_array_equal(first.regret, second.regret)
    assert first.diagnostics.keys() == second.diagnostics.keys() and calls["traces"] >= 2


def test_an_object_s_key_leaves_out_what_made_it_and_deep_structures_are_named():
    """A class attribute only the constructor changes (a count of instances) is no part
    of an object's key; a structure too deep to walk is a ValueError saying so."""
    greedy = jb.policies.make("greedy")

    class Counted:
        made = 0

        def __init__(self, arm):
            Counted.made += 1
            self.arm = arm

        def select(self, key, state, t, ctx):
            return jb.play(self.arm)

    policy = greedy._replace(select_fn=Counted(1).select)
    before = engine.policy_key(policy), engine.policy_code(policy)
    Counted(2)
    assert (engine.policy_key(policy), engine.policy_code(policy)) == before
    chain = []
    for _ in range(5000):
        chain = [chain]
    with pytest.raises(ValueError, match="nested deeper than Python's recursion limit"):
        engine.policy_key(greedy._replace(select_fn=lambda k, s, t, c: jb.play(len(chain))))


def test_a_policy_that_keeps_no_arrays_runs():
    """A state of None has nothing to vmap: the results hold no diagnostics rather than
    the run failing at its end."""
    stateless = user_policies.fixed_arm(1)._replace(init_fn=lambda ctx: None, update_fn=lambda s, a, v, c: s, consolidate_fn=None)
    result = jb.simulate(stateless, BANDIT, 10, 2, seed=0)
    np.testing.assert_array_equal(result.counts, [[0, 10, 0]] * 2)
    assert result.diagnostics == {}


def test_plays_are_counted_by_the_engine():
    result = jb.simulate(user_policies.fixed_arm(1), BANDIT, 300, 3, seed=0)
    np.testing.assert_array_equal(result.counts, [[0, 300, 0]] * 3)
    np.testing.assert_allclose(result.regret[:, -1], 150.0)


def test_consolidate_fn_runs_after_the_fixed_rounds():
    """Rounds 1, 2, 4, ..., 128 and every 256 after: 8 + 3 times in 1000 rounds,
    whatever the chunk size."""

    def consolidate_fn(state):
        stats, calls = state
        return estimator.consolidate(stats), calls + 1

    base = user_policies.fixed_arm(0)
    policy = base._replace(
        init_fn=lambda ctx: (base.init_fn(ctx), jnp.zeros((), jnp.int32)),
        select_fn=lambda key, state, t, ctx: jb.play(0),
        update_fn=lambda state, arm, values, ctx: (base.update_fn(state[0], arm, values, ctx), state[1]),
        consolidate_fn=consolidate_fn,
        diagnostics_fn=lambda state: {"consolidations": state[1]},
    )
    for chunk_size in (1000, 100, 77):
        result = jb.simulate(policy, BANDIT, 1000, 2, chunk_size=chunk_size)
        np.testing.assert_array_equal(result.diagnostics["consolidations"], 8 + 3)
    expected = [int(r) for r in range(1, 1001) if bool(estimator.consolidation_due(r))]
    assert len(expected) == 11


def test_an_arm_outside_the_arms_is_reported_with_its_round():
    policy = user_policies.arm_out_of_range(bad_round=700)
    run = jb.SimulationRun(policy, BANDIT, 2000, 3, chunk_size=500)
    run.advance(max_chunks=1)  # rounds 1-500: nothing wrong
    with pytest.raises(jb.InvalidArmError, match=r"select_fn chose arm 3 at round 700 \(run 0, cell 0\); arms are 0..2") as caught:
        run.advance()
    assert run.rounds_done == 1000  # it stopped after the chunk in which it happened
    # the runs cannot go on, nor give a result (the invalid round counted for no arm),
    # here or restored from a checkpoint
    saved = run.checkpoint()
    for attempt in (lambda: run.advance(max_chunks=1), lambda: run.advance(), lambda: run.result()):
        with pytest.raises(jb.InvalidArmError, match=r"chose arm 3 at round 700"):
            attempt()
    assert run.rounds_done == 1000
    restored = jb.SimulationRun(policy, BANDIT, 2000, 3, chunk_size=500)
    restored.restore(saved)
    with pytest.raises(jb.InvalidArmError, match=r"chose arm 3 at round 700"):
        restored.advance()
    # whole across processes (multiprocessing pickles it): its message and its cell
    again = pickle.loads(pickle.dumps(caught.value))
    assert (type(again), str(again), again.cell) == (jb.InvalidArmError, str(caught.value), 0)
    again = pickle.loads(pickle.dumps(jb.NaNStateError("state", cell=2)))
    assert (type(again), str(again), again.cell) == (jb.NaNStateError, "state", 2)
    with pytest.raises(jb.InvalidArmError, match="chose arm 3 at round 5"):
        jb.simulate(user_policies.arm_out_of_range(bad_round=5), BANDIT, 20, 2)


def test_negative_arms_are_reported_too():
    """Arm -1 from round 3 to the horizon, all in one chunk: the first invalid round is
    the one reported, not the chunk's last."""
    policy = user_policies.fixed_arm(0)._replace(select_fn=lambda key, s, t, ctx: jb.play(jnp.where(t >= 3, -1, 0)))
    with pytest.raises(jb.InvalidArmError, match="chose arm -1 at round 3 "):
        jb.simulate(policy, BANDIT, 10, 2)


def test_a_64_bit_arm_beyond_int32_does_not_wrap_into_the_arms():
    """2**32 + 2 cast to int32 would be arm 2; it saturates instead, and is reported."""
    beyond = lambda key, s, t, ctx: Decision(jnp.where(t == 3, jnp.int64(2**32 + 2), jnp.int64(0)), jnp.asarray(False))
    with jax.enable_x64(True):
        for select_fn in (beyond, lambda key, s, t, ctx: jb.play(beyond(key, s, t, ctx).arm)):
            with pytest.raises(jb.InvalidArmError, match="chose arm 2147483647 at round 3"):
                jb.simulate(user_policies.fixed_arm(0)._replace(select_fn=select_fn), BANDIT, 10, 2)
    # so does a host integer (Python or numpy) in 32-bit mode, which JAX would wrap,
    # however the Decision is made, and from a solver's finish_fn
    replaced = lambda arm: jb.play(0)._replace(arm=arm)  # noqa: E731
    for arm in (2**32 + 2, np.int64(2**32 + 2), np.array(2**32 + 2), np.uint64(2**63)):
        for make in (jb.play, lambda arm: Decision(arm, jnp.asarray(False)), replaced):
            select_fn = lambda key, s, t, ctx, arm=arm, make=make: make(arm)  # noqa: E731
            with pytest.raises(jb.InvalidArmError, match="chose arm 2147483647 at round 1"):
                jb.simulate(user_policies.fixed_arm(0)._replace(select_fn=select_fn), BANDIT, 10, 2)
    assert int(jb.play(-(2**40)).arm) == -(2**31)
    stage = jb.Stage(lambda request, s, c: (jnp.int32(0), jnp.asarray(True)))
    solver = jb.Solver((stage,), lambda s, d, a, t, c: (np.int64(2**32 + 2), s))
    asking = lambda key, s, t, ctx: Decision(jnp.int32(0), jnp.asarray(t > 0), jnp.float32(1.0))  # noqa: E731
    with pytest.raises(jb.InvalidArmError, match="chose arm 2147483647 at round 1"):
        jb.simulate(user_policies.fixed_arm(0)._replace(select_fn=asking, solver=solver), BANDIT, 10, 2)


def test_a_nan_in_the_state_is_reported_with_its_chunk():
    """An update that writes NaN from round 300 on (a user's bug): the simulation stops
    after the chunk where it is first looked for (round 512, the recording times being
    100 and 2000) instead of steering by NaN to the horizon."""
    base = user_policies.fixed_arm(0)

    def update_fn(state, arm, values, ctx):
        state = base.update_fn(state, arm, values, ctx)
        return state._replace(zeta=jnp.where(state.counts.sum() >= 300, jnp.nan, state.zeta))

    policy = base._replace(update_fn=update_fn, name="leaky")
    run = jb.SimulationRun(policy, BANDIT, 2000, 3, times=[100, 2000], chunk_size=256)
    run.advance(max_chunks=1)  # rounds 1-256: no NaN yet
    with pytest.raises(jb.NaNStateError, match=r"policy 'leaky': its state held a NaN by round 512 \(run 0, cell 0\).*3 run\(s\)"):
        run.advance()
    assert run.rounds_done == 512
    # one chunk looks at rounds 512, 768, ..., 2000: the first look that saw it is named
    with pytest.raises(jb.NaNStateError, match=r"held a NaN by round 512 "):
        jb.SimulationRun(policy, BANDIT, 2000, 3, times=[100, 2000], chunk_size=2000).advance()


def test_a_passing_nan_is_seen_or_not_whatever_the_chunk_size():
    """A NaN held only after rounds 500-519 is looked for at round 512 (rounds fixed in
    advance), so every chunk size reports it there; one held only after rounds 300-309
    is seen by none.  (Looked for at chunk ends instead, chunks of 5 rounds would see
    the second and chunks of 256 would not.)"""
    base = user_policies.fixed_arm(0)

    def update_fn(state, arm, values, ctx):
        stats = base.update_fn(state[0], arm, values, ctx)
        done = stats.counts.sum().astype(ctx.sigma.dtype)
        window = (done >= ctx.params["start"]) & (done < ctx.params["start"] + 20)
        return stats, jnp.where(window, jnp.nan, 0.0).astype(ctx.sigma.dtype)

    policy = jb.Policy(
        lambda ctx: (base.init_fn(ctx), jnp.zeros((), ctx.sigma.dtype)),
        lambda key, state, t, ctx: base.select_fn(key, state[0], t, ctx),
        update_fn,
        consolidate_fn=lambda state: (estimator.consolidate(state[0]), state[1]),
        name="passing", params={"start": 500.0},
    )  # fmt: skip
    for chunk_size in (5, 1000):
        with pytest.raises(jb.NaNStateError, match=r"its state held a NaN by round 512 \(run 0, cell 0\)"):
            jb.SimulationRun(policy, BANDIT, 1000, 2, times=[100, 1000], chunk_size=chunk_size).advance()
        run = jb.SimulationRun(policy, BANDIT, 1000, 2, times=[100, 1000], chunk_size=chunk_size, params={"start": 300.0})
        run.advance()
        assert run.done


def test_diagnostics_are_optional():
    result = jb.simulate(user_policies.fixed_arm(0), BANDIT, 10, 2)
    assert result.diagnostics == {}


def test_the_engine_cache_is_bounded():
    for value in range(engine._CACHE_SIZE + 3):
        engine.cached_simulation(user_policies.fixed_arm(value), 16, None)
    assert len(engine._SIMULATIONS) == engine._CACHE_SIZE


def test_each_noise_family_is_its_own_engine():
    """The family is static (the engine closes over it): part of the cache key."""
    policy = jb.policies.make("ucb_n")
    gaussian = engine.cached_simulation(policy, 16, None)
    assert engine.cached_simulation(policy, 16, None, noise=jb.noise.gaussian()) is gaussian
    bernoulli = engine.cached_simulation(policy, 16, None, noise=jb.noise.bernoulli())
    assert bernoulli is not gaussian
    assert engine.cached_simulation(policy, 16, None, noise=jb.noise.student_t(3)) is not bernoulli
    assert engine.cached_simulation(policy, 16, None, noise=jb.noise.resolve("bernoulli")) is bernoulli


GRAPH = jb.Instance(
    [0.9, 0.5, 0.2, 0.65],
    [[2.0, INF, 1.0, INF], [4.0, 1.4, INF, 3.0], [INF, 0.8, 3.0, 6.0], [0.6, INF, INF, 2.0]],
)


def test_the_quick_options_round_multiply_adds_as_the_defaults():
    """``a * b + c`` on 10^4 float32 normals: the host's quick options give XLA's
    defaults' bits, the fused or unfused multiply-add alike (options that change it,
    such as ``-O0``, change the rounding of every program, and a simulation's mode
    follows its number of runs)."""
    from jaxbandit import compile_options

    a, b, c = np.random.default_rng(0).standard_normal((3, 10_000)).astype(np.float32)
    multiply_add = lambda a, b, c: a * b + c  # noqa: E731
    quick = compile_options.Program(multiply_add)(a, b, c)
    default = jax.jit(multiply_add)(a, b, c)
    np.testing.assert_array_equal(np.asarray(quick), np.asarray(default))


@pytest.mark.parametrize(
    "name, noise, dtype, monitor",
    [
        ("ts_n", "student_t(df=3)", "float32", None),  # posterior and noise samplers
        ("ucb_n", "bernoulli", "float64", "estimator_deviation"),
    ],
)
def test_a_short_simulation_compiled_quickly_gives_the_bits_of_the_default_compile(name, noise, dtype, monitor, monkeypatch):
    """A short simulation's chunk step compiles with the host's options
    (:func:`jaxbandit.compile_options.compiles_quickly`); forced to XLA's defaults, the
    same simulation gives the same bits: 300 rounds x 3 runs of a feedback graph.  An LP
    policy: ``test_lp_explore.py::test_results_do_not_depend_on_the_solve_buffers_the_compile_mode_or_the_devices``."""
    from jaxbandit import compile_options

    inst = jb.Instance(GRAPH.mu, GRAPH.sigma, noise=noise)
    kwargs = {"dtype": dtype, "times": [100, 300]}
    if monitor is not None:
        kwargs["monitor"] = jb.monitors.make(monitor)

    def simulate(quick_compile):
        run = jb.SimulationRun(jb.policies.make(name), inst, 300, 3, seed=4, **kwargs)
        assert isinstance(run._sim.run_chunk, compile_options.Program) == quick_compile
        run.advance()
        return run.result()

    with jax.enable_x64(dtype == "float64"):
        quick = simulate(True)
        monkeypatch.setattr(compile_options, "QUICK_WORK", 0)
        default = simulate(False)
    leaves = lambda r: jax.tree_util.tree_leaves((r.regret, r.counts, r.diagnostics, r.monitor))  # noqa: E731
    assert len(leaves(quick)) == len(leaves(default))
    for a, b in zip(leaves(quick), leaves(default)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_float64_array_changed_in_place_between_simulations_is_read_anew(tmp_path):
    """JAX keeps its float32 copy of a float64 numpy array a traced function read for as
    long as the copy lives, and an earlier simulation's program keeps it alive: the
    next simulation of the array changed in place would read the old values (and keep
    that program under the new values' key, for a fresh array of them too).  The
    engine drops what keeps the copy before it traces (its own programs and JAX's caches,
    a live simulation of the old values notwithstanding); a copy kept alive elsewhere is
    a PolicyError.  (Last in this file: dropping JAX's caches makes the programs
    compiled before it compile again.)"""

    def prefers(weights):
        return user_policies.fixed_arm(0)._replace(select_fn=lambda k, s, t, c: jb.play(jnp.argmax(jnp.asarray(weights))))

    weights = np.array([1.0, 0.0, 0.0])
    np.testing.assert_array_equal(jb.simulate(prefers(weights), BANDIT, 50, 2).counts, [[50, 0, 0]] * 2)
    weights[:] = [0.0, 1.0, 0.0]
    np.testing.assert_array_equal(jb.simulate(prefers(weights), BANDIT, 50, 2).counts, [[0, 50, 0]] * 2)
    np.testing.assert_array_equal(jb.simulate(prefers(np.array([0.0, 1.0, 0.0])), BANDIT, 50, 2).counts, [[0, 50, 0]] * 2)
    kept = jb.SimulationRun(prefers(weights), BANDIT, 50, 2)
    kept.advance()  # a live simulation of [0, 1, 0]
    weights[:] = [0.0, 0.0, 1.0]
    np.testing.assert_array_equal(jb.simulate(prefers(weights), BANDIT, 50, 2).counts, [[0, 0, 50]] * 2)
    held = jax_dtypes.canonicalize_value(weights)  # JAX's copy, kept alive where the engine cannot drop it
    weights[:] = [1.0, 0.0, 0.0]
    with pytest.raises(jb.PolicyError, match="reads a numpy array that was changed in place after an earlier simulation"):
        jb.simulate(prefers(weights), BANDIT, 50, 2)
    del held
    np.testing.assert_array_equal(jb.simulate(prefers(weights), BANDIT, 50, 2).counts, [[50, 0, 0]] * 2)
    # a numpy array's subclass too: a file mapped into memory, changed in place
    np.save(tmp_path / "weights.npy", np.array([1.0, 0.0, 0.0]))
    mapped = np.load(tmp_path / "weights.npy", mmap_mode="r+")
    np.testing.assert_array_equal(jb.simulate(prefers(mapped), BANDIT, 50, 2).counts, [[50, 0, 0]] * 2)
    mapped[:] = [0.0, 0.0, 1.0]
    np.testing.assert_array_equal(jb.simulate(prefers(mapped), BANDIT, 50, 2).counts, [[0, 0, 50]] * 2)
