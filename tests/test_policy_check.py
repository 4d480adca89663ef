"""Author mistakes are reported before a run starts, naming the function, what it
returned and what was expected."""

import itertools
import random
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit.base import Decision, Solver, Stage
from tests import user_policies

BANDIT = jb.instances.bandit([1.0, 0.5, 0.2])
BASE = user_policies.fixed_arm(0)


def _fails(policy, message):
    with pytest.raises(jb.PolicyError, match=message):
        jb.simulate(policy, BANDIT, 10, 2)


def test_select_must_return_a_decision_with_an_integer_scalar_arm():
    _fails(BASE._replace(select_fn=lambda k, s, t, c: jnp.int32(0)), r"select_fn returned int32\[\]; expected a jaxbandit.Decision")
    _fails(BASE._replace(select_fn=lambda k, s, t, c: jb.play(0.0)), r"select_fn returned Decision.arm = float32\[\] \(weakly typed: a Python number, or computed from one\); expected an integer scalar")
    _fails(
        BASE._replace(select_fn=lambda k, s, t, c: Decision(jnp.float32(0), jnp.asarray(False))),
        r"select_fn returned Decision.arm = float32\[\]; expected an integer scalar",
    )
    _fails(BASE._replace(select_fn=lambda k, s, t, c: jb.play(jnp.zeros(3, jnp.int32))), r"Decision.arm = int32\[3\]")
    _fails(BASE._replace(select_fn=lambda k, s, t, c: Decision(jnp.int32(0), jnp.int32(0))), r"Decision.needs_solve = int32\[\]; expected a bool scalar")
    # no dtype to look at: the check names them too, without an AttributeError of its own
    _fails(BASE._replace(select_fn=lambda k, s, t, c: Decision(jnp.int32(0), None)), r"Decision.needs_solve = NoneType None; expected a bool scalar")
    _fails(BASE._replace(select_fn=lambda k, s, t, c: Decision((jnp.int32(0),), jnp.asarray(False))), r"Decision.arm = .*; expected an integer scalar")


def test_the_state_keeps_its_structure_shapes_and_dtypes():
    _fails(BASE._replace(update_fn=lambda s, a, v, c: s._replace(zeta=s.zeta.astype(jnp.int32))),
           r"update_fn changed the state leaf state.zeta: got int32\[3\], expected float32\[3\]")  # fmt: skip
    _fails(BASE._replace(update_fn=lambda s, a, v, c: s._replace(zeta=s.zeta[:2])), r"state.zeta: got float32\[2\]")
    _fails(BASE._replace(update_fn=lambda s, a, v, c: (s, 0)), r"update_fn returned a state of another structure")
    _fails(BASE._replace(consolidate_fn=lambda s: s.zeta), r"consolidate_fn returned a state of another structure")
    counter = BASE._replace(
        init_fn=lambda c: 0.0,  # a Python scalar: weakly typed
        update_fn=lambda s, a, v, c: s + jnp.float32(1),
        consolidate_fn=None,
    )
    _fails(counter, r"update_fn changed the state leaf state: got float32\[\], expected float32\[\] \(weakly typed")


def test_a_hyper_parameter_missing_from_params_is_named():
    """The key is named, and the params suggested without claiming that the lookup was
    in ctx.params (a typo in a key of the state reads the same)."""
    _fails(BASE._replace(select_fn=lambda k, s, t, c: jb.play(jnp.int32(c.params["alpha"]))),
           r"select_fn failed on one run's abstract inputs: KeyError: 'alpha'. If that is a hyper-parameter "
           r"\(ctx.params\['alpha'\]\), the policy's params do not define it \(params: \[\]\)")  # fmt: skip


def test_a_failing_function_is_named_with_its_error():
    _fails(BASE._replace(init_fn=lambda ctx, extra: None), r"init_fn failed on one run's abstract inputs: TypeError")
    _fails(BASE._replace(update_fn=lambda s, a, v, c: s + v), r"update_fn failed on one run's abstract inputs: TypeError")
    _fails(BASE._replace(diagnostics_fn=lambda s: {"zeta": s.zeta}), r"diagnostics_fn returned 'zeta' = float32\[3\]; expected a scalar per run")
    _fails(BASE._replace(diagnostics_fn=lambda s: s.zeta), r"diagnostics_fn returned float32\[3\]; expected a dict")
    # its names are the names its records are stored under
    _fails(BASE._replace(diagnostics_fn=lambda s: {1: s.zeta[0]}), r"diagnostics_fn returned the key 1; expected names that are strings")
    _fails(BASE._replace(select_fn=None), r"select_fn must be a function, got None")


def test_policy_fields_of_the_wrong_kind_are_named():
    """Not a TypeError of the runner's (params=None, a list), nor a misspelt feedback
    option that silently skips the check it asks for."""
    _fails(BASE._replace(params=None), r"Policy.params must be a dict with string keys, got None")
    _fails(BASE._replace(params={1: 2.0}), r"Policy.params must be a dict with string keys, got \{1: 2.0\}")
    _fails(BASE._replace(options=["own_arm"]), r"Policy.options must be a dict with string keys, got \['own_arm'\]")
    _fails(BASE._replace(name=3), r"Policy.name must be a string, got 3")
    _fails(BASE._replace(options={"feedback": "own-arm"}), r"Policy.options\['feedback'\] can only be 'own_arm', got 'own-arm'")


def test_a_function_that_traces_to_another_program_each_time_is_refused():
    """A global a function updates while traced: each trace of the engine (per run
    count, chunk size) would bake in another constant, so the results would depend on
    them, not on the seed alone."""
    base = jb.policies.make("ucb_n")
    traced = {"times": 0}

    def counting_update(state, arm, values, ctx):
        traced["times"] += 1
        return base.update_fn(state, arm, values * traced["times"], ctx)

    _fails(base._replace(update_fn=counting_update), r"update_fn gave another program when traced a second time: it reads something that changes while it is traced")

    def counting_init(ctx):
        traced["times"] += 1
        return BASE.init_fn(ctx)

    read = BASE._replace(init_fn=counting_init, select_fn=lambda k, s, t, c: jb.play(jnp.int32(traced["times"] % 3)))
    _fails(read, r"^select_fn gave another program")
    def counting_monitor_init(ctx):
        traced["times"] += 1
        return jnp.float32(0)

    watching = jb.monitors.Monitor(
        init_fn=counting_monitor_init, update_fn=lambda m, s, t, c: m + np.float32(traced["times"]), report_fn=lambda m: {"m": m}
    )
    with pytest.raises(jb.PolicyError, match=r"^monitor update_fn gave another program"):
        jb.simulate(BASE, BANDIT, 10, 2, monitor=watching)


def test_a_draw_from_a_global_generator_while_traced_is_refused_even_when_both_traces_draw_alike():
    """A Python or numpy random number drawn while tracing is one constant of the
    program: refused in any function of the policy or monitor, whether or not the two
    traces happen to draw the same value (``randint(2)`` does half the time)."""
    base = jb.policies.make("ucb_n")
    drawn = "drew from Python's or numpy's global random generator while it was traced"
    for seed in range(4):
        np.random.seed(seed)
        coin = base._replace(select_fn=lambda k, s, t, c: jb.play(jnp.int32(np.random.randint(2))))
        _fails(coin, rf"^select_fn {drawn}")
    python_draw = base._replace(select_fn=lambda k, s, t, c: jb.play(jnp.int32(random.randrange(2))))
    _fails(python_draw, rf"^select_fn {drawn}")
    noisy_init = BASE._replace(init_fn=lambda c: BASE.init_fn(c)._replace(zeta=jnp.asarray(np.random.rand(3), c.sigma.dtype)))
    _fails(noisy_init, rf"^init_fn {drawn}")
    noisy_consolidate = BASE._replace(consolidate_fn=lambda s: BASE.consolidate_fn(s)._replace(zeta=s.zeta + np.float32(np.random.rand())))
    _fails(noisy_consolidate, rf"^consolidate_fn {drawn}")
    noisy_stage = Stage(lambda r, s, c: (jnp.int32(np.random.randint(2**30)) % 3, jnp.asarray(True)))
    _fails(_solver_policy((noisy_stage,)), rf"^Solver.stages\[0\].solve_fn {drawn}")
    watching = jb.monitors.Monitor(
        init_fn=lambda c: jnp.float32(0), update_fn=lambda m, s, t, c: m + np.float32(np.random.rand()), report_fn=lambda m: {"m": m}
    )
    with pytest.raises(jb.PolicyError, match=rf"^monitor update_fn {drawn}"):
        jb.simulate(BASE, BANDIT, 10, 2, monitor=watching)
    # a generator of the policy's own, seeded outside, is outside what the check sees:
    # it is caught when its two draws differ
    own = np.random.default_rng(0)
    _fails(base._replace(select_fn=lambda k, s, t, c: jb.play(jnp.int32(own.integers(2**30)) % 3)), r"^select_fn gave another program")


def test_the_second_trace_is_compared_inside_nested_programs_and_callbacks_made_anew_pass():
    """A constant that changes inside a loop's or a branch's program is another program;
    a host callback made anew at each trace (the same function), JAX's own
    differentiable functions and a typed random key are the same program."""
    base = jb.policies.make("ucb_n")

    counter = itertools.count(1)

    def in_a_branch(k, s, t, c):
        arm = base.select_fn(k, s, t, c).arm
        bias = np.int32(next(counter))
        return jb.play(jax.lax.cond(t > 5, lambda a: (a + bias) % 3, lambda a: a, arm))

    _fails(base._replace(select_fn=in_a_branch), r"^select_fn gave another program")

    def with_a_callback(k, s, t, c):
        arm = base.select_fn(k, s, t, c).arm
        shifted = jax.pure_callback(lambda a: np.asarray(a), jax.ShapeDtypeStruct((), np.int32), arm, vmap_method="sequential")
        return jb.play(jnp.where(jax.nn.relu(jnp.float32(t)) > 0, shifted, arm))

    assert jb.simulate(base._replace(select_fn=with_a_callback), BANDIT, 10, 2).counts.sum() == 20
    # a typed random key it closes over: a constant of the program, compared (and told
    # apart from another key) by its data, also while the engine traces
    def with_a_key(key):
        def select_fn(k, s, t, c):
            arm = base.select_fn(k, s, t, c).arm
            return jb.play(jnp.where(jax.random.uniform(jax.random.fold_in(key, t)) < 0.5, arm, 0))

        return base._replace(select_fn=select_fn)

    counts = [jb.simulate(with_a_key(jax.random.key(seed)), BANDIT, 50, 2).counts for seed in (3, 3, 4)]
    np.testing.assert_array_equal(counts[1], counts[0])
    assert not np.array_equal(counts[2], counts[0])


def test_a_grid_over_a_parameter_no_function_reads_is_refused():
    """A factory that uses its argument as a closure value and only records it in
    ``params``: a grid given to the simulation changes ``ctx.params`` alone, so every
    cell would run the closure's value under another label."""
    closure = user_policies.fixed_arm(0)._replace(params={"w": 1.0})
    with pytest.raises(jb.ArgumentError, match=r"params gives \['w'\], which no function of policy 'fixed_arm' reads as ctx.params\[name\]"):
        jb.SimulationRun(closure, BANDIT, 10, 2, params={"w": [1.0, 2.0]})
    jb.simulate(closure, BANDIT, 10, 2)  # recorded, not varied: nothing to refuse
    read = user_policies.traced_threshold(0.5)  # reads ctx.params["eps"] in select_fn
    assert jb.SimulationRun(read, BANDIT, 10, 2, params={"eps": [0.1, 0.9]}).inputs.num_cells == 2


def test_a_hyper_parameter_is_one_number():
    """A per-arm vector in ``Policy.params`` was read as a grid of three cells by
    ``jb.simulate`` and crashed a sweep's records; both now refuse it naming the policy
    and the parameter (a grid is ``jb.SimulationRun``'s ``params`` argument)."""
    _fails(user_policies.per_arm_weight(), r"policy 'fixed_arm': Policy.params\['w'\] must be one number, got an array of shape \(3,\)")
    _fails(BASE._replace(params={"w": True}), r"Policy.params\['w'\] must be one number, got boolean True\.$")
    grid = jb.SimulationRun(user_policies.traced_threshold(0.5), BANDIT, 10, 2, params={"eps": [0.1, 0.2]})
    assert grid.inputs.num_cells == 2  # a grid, as the argument gives it
    entry = {"name": "tests.user_policies:per_arm_weight"}
    with pytest.raises(jb.config.ConfigError, match=r"key 'policies\[0\]': policy 'fixed_arm': Policy.params\['w'\] must be one number"):
        jb.config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [entry]})


def _solver_policy(stages, finish_fn=None):
    def select_fn(key, stats, t, ctx):
        return Decision(jnp.int32(0), t % 2 == 0, jnp.float32(1.0))

    finish = finish_fn or (lambda s, d, a, t, c: (jnp.where(d.needs_solve, a, d.arm), s))
    return BASE._replace(select_fn=select_fn, solver=Solver(stages, finish))


def test_solver_stages_are_checked():
    good = Stage(lambda r, s, c: (jnp.int32(1), jnp.asarray(True)))
    assert jb.simulate(_solver_policy((good,)), BANDIT, 10, 2).counts.tolist() == [[5, 5, 0]] * 2
    _fails(_solver_policy(()), r"Solver.stages must be a non-empty tuple of Stage")
    _fails(_solver_policy([good]), r"Solver.stages must be a non-empty tuple of Stage")
    _fails(_solver_policy((good, lambda r, s, c: 0)), r"Solver.stages\[1\] must be a jaxbandit.Stage")
    _fails(_solver_policy((Stage(lambda r, s, c: jnp.int32(1)),)), r"Solver.stages\[0\].solve_fn returned int32\[\]; expected a pair \(answer, resolved\)")
    _fails(_solver_policy((good, Stage(lambda r, s, c: (jnp.float32(1), jnp.asarray(True))))), r"every stage must answer like Solver.stages\[0\]")
    _fails(_solver_policy((Stage(good.solve_fn, batching="fast"),)), r"batching must be one of .*got 'fast'")
    _fails(_solver_policy((Stage(good.solve_fn, fold_fn=lambda s, a, c: s, batching="single_pass"),)), "single_pass, which cannot have a fold_fn")
    _fails(_solver_policy((Stage(good.solve_fn, fold_fn=lambda s, a, c: s.zeta),)), r"Solver.stages\[0\].fold_fn returned a state of another structure")
    _fails(_solver_policy((good,), finish_fn=lambda s, d, a, t, c: a), r"Solver.finish_fn returned int32\[\]; expected a pair \(arm, state\)")
    _fails(_solver_policy((good,), finish_fn=lambda s, d, a, t, c: (jnp.float32(a), s)), r"Solver.finish_fn returned arm = float32\[\]")
    # a leaf of another dtype, from the finish or a fold: named, not the engine's loop error
    halved = lambda s: s._replace(zeta=s.zeta.astype(jnp.float16))  # noqa: E731
    changed = r"changed the state leaf state.zeta: got float16\[3\], expected float32\[3\]"
    _fails(_solver_policy((good,), finish_fn=lambda s, d, a, t, c: (d.arm, halved(s))), "Solver.finish_fn " + changed)
    _fails(_solver_policy((Stage(good.solve_fn, fold_fn=lambda s, a, c: halved(s)),)), r"Solver.stages\[0\].fold_fn " + changed)


def test_a_request_without_a_solver_is_refused():
    asks = BASE._replace(select_fn=lambda k, s, t, c: Decision(jnp.int32(0), jnp.asarray(True), jnp.float32(1.0)))
    _fails(asks, r"select_fn returned a Decision with a request \(float32\[\]\) but the policy has no solver")


def test_a_computed_needs_solve_without_a_solver_is_refused():
    """Without a solver the engine plays Decision.arm whatever needs_solve says: a
    policy that computes it would silently play its placeholder arm."""
    _fails(BASE._replace(select_fn=lambda k, s, t, c: Decision(jnp.int32(0), t % 2 == 0)),
           r"select_fn returned a Decision whose needs_solve may be True \(it is not the constant False of "
           r"jaxbandit.play\), but the policy has no solver")  # fmt: skip
    constant = BASE._replace(select_fn=lambda k, s, t, c: Decision(jnp.int32(1), jnp.asarray(False)))
    assert jb.simulate(constant, BANDIT, 10, 2).counts.tolist() == [[0, 10, 0]] * 2


def test_an_estimator_without_consolidate_fn_is_refused():
    """``update_fn`` is not told the round, so only ``consolidate_fn`` can keep an
    estimator's float32 sums accurate: leaving it out is a mistake, named with the
    estimator's place in the state."""
    _fails(BASE._replace(consolidate_fn=None), r"EstimatorState at state but the policy has no consolidate_fn")
    nested = BASE._replace(
        init_fn=lambda ctx: (jnp.zeros((), jnp.int32), BASE.init_fn(ctx)),
        select_fn=lambda k, s, t, c: jb.play(0),
        update_fn=lambda s, a, v, c: (s[0], BASE.update_fn(s[1], a, v, c)),
        consolidate_fn=None,
    )
    _fails(nested, r"EstimatorState at state\[1\] but the policy has no consolidate_fn")


def test_not_a_policy():
    with pytest.raises(ValueError, match="policy must be a jaxbandit.Policy"):
        jb.simulate(user_policies.not_a_factory(), BANDIT, 10, 2)
    assert np.isfinite(jb.simulate(BASE, BANDIT, 10, 2).final_regret).all()


def test_another_threads_draws_are_not_taken_for_the_policys():
    """The global generators are the process's: where another thread draws from them
    while a policy is checked, the draws are told apart by whether the policy's program
    changes with the generators' states."""
    busy = threading.Event()

    def draw_until_set():
        while not busy.is_set():
            random.random()
            np.random.rand()

    other = threading.Thread(target=draw_until_set, daemon=True)
    other.start()
    try:
        assert jb.simulate(jb.policies.make("ucb_n"), BANDIT, 10, 2).counts.sum() == 20
        drawn = BASE._replace(select_fn=lambda k, s, t, c: jb.play(jnp.int32(np.random.randint(3))))
        _fails(drawn, r"^select_fn drew from Python's or numpy's global random generator")
    finally:
        busy.set()
        other.join()
