"""Serving a Solver's stages to just the runs that need them: every buffer size and
batching gives the answers of a dense evaluation, and folds reach exactly the runs
each stage served."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import compaction, estimator, instances
from jaxbandit.base import Decision, Solver, Stage

INF = np.inf
GENERAL = jb.Instance(
    [0.9, 0.5, 0.2, 0.65],
    [[1.0, INF, 0.5, INF], [2.0, 0.7, INF, 1.5], [INF, 0.4, 1.5, 3.0], [0.3, INF, INF, 1.0]],
)


def test_buffer_sizes_shrink_by_four_down_to_the_smallest():
    assert compaction.buffer_sizes(256) == (256, 64, 16)
    assert compaction.buffer_sizes(100) == (100, 25)
    assert compaction.buffer_sizes(8) == (8,)
    assert compaction.stage_buffer_size("compact", 10_000, None) == 256
    # a sixteenth of the runs, as a power of two between 8 and the batch
    assert compaction.stage_buffer_size("compact", 1000, None) == 64
    assert compaction.stage_buffer_size("compact", 100, None) == 8
    assert compaction.stage_buffer_size("compact", 200, None) == 16
    assert compaction.stage_buffer_size("compact", 10, None) == 8
    assert compaction.stage_buffer_size("compact", 5, None) == 5
    assert compaction.stage_buffer_size("compact", 1, None) == 1
    assert compaction.stage_buffer_size("compact", 1000, 64) == 64
    assert compaction.stage_buffer_size("rare", 1000, None) == 7


def _needs(state, t):
    # run-dependent: depends on the run's own counts
    return (t % 3 == 0) & (state.stats.counts[0] % 2 == 0)


def _first_arm(mean):
    return jnp.argmin(mean).astype(jnp.int32)


def _first_resolves(mean):
    return mean[0] <= mean[1]


def _second_arm(mean):
    return jnp.argmax(mean[::-1]).astype(jnp.int32)


def _toy_policy(first_batching=None):
    """Greedy, except that some run-dependent rounds play the answer of a two-stage
    'solve'; ``first_batching=None`` computes the same answer inline, for every run."""

    def select_fn(key, state, t, ctx):
        mean = estimator.mean(state.stats)
        greedy = jnp.argmax(mean).astype(jnp.int32)
        needs = _needs(state, t)
        if first_batching is not None:
            return Decision(greedy, needs, mean)
        answer = jnp.where(_first_resolves(mean), _first_arm(mean), _second_arm(mean))
        return jb.play(jnp.where(needs, answer, greedy))

    def finish_fn(state, decision, answer, t, ctx):
        return jnp.where(decision.needs_solve, answer, decision.arm), state

    solver = None
    if first_batching is not None:
        first = Stage(lambda r, s, c: (_first_arm(r), _first_resolves(r)), batching=first_batching)
        second = Stage(lambda r, s, c: (_second_arm(r), jnp.asarray(True)), batching="rare")
        solver = Solver((first, second), finish_fn)
    base = jb.policies.make("greedy")
    return base._replace(select_fn=select_fn, solver=solver, name="toy")


@pytest.mark.parametrize("first_batching", ["compact", "single_pass"])
def test_compacted_solves_equal_dense_evaluation_for_any_buffer_size(first_batching):
    batch = instances.stack([GENERAL, instances.full_information(GENERAL.mu)])
    dense = jb.simulate(_toy_policy(), batch, 200, 13, seed=2)
    # 64: a buffer clipped to the 26 runs; 1 and 4: many passes of one buffer.
    for solve_batch in (1, 4, 64, None):
        compacted = jb.simulate(_toy_policy(first_batching), batch, 200, 13, seed=2, solve_batch=solve_batch)
        np.testing.assert_array_equal(compacted.regret, dense.regret)
        np.testing.assert_array_equal(compacted.counts, dense.counts)


REQUEST = jnp.arange(2 * 23, dtype=jnp.float32).reshape(2, 23)  # (cells, runs)
CELL_CTX = jnp.asarray([0.5, 0.25])  # a per-cell context leaf


def _serve(solver, needs, solve_batch):
    decision = Decision(jnp.zeros_like(needs, jnp.int32), needs, REQUEST)
    return jax.jit(lambda d, s: compaction.serve_solver(solver, d, s, CELL_CTX, solve_batch))(decision, -REQUEST)


def test_fold_reaches_exactly_the_runs_the_stage_served():
    needs = (REQUEST % 3) != 0
    first = Stage(lambda r, s, c: (jnp.int32(1), (r % 2) == 0))
    fold = lambda state, answer, ctx: state + 100 * answer.astype(jnp.float32) + ctx
    second = Stage(lambda r, s, c: (jnp.int32(2), jnp.asarray(True)), fold_fn=fold, batching="rare")
    solver = Solver((first, second), finish_fn=None)
    served = needs & ((REQUEST % 2) == 1)
    for solve_batch in (None, 4, 1, 46):
        answers, state = _serve(solver, needs, solve_batch)
        np.testing.assert_array_equal(answers, np.where(served, 2, np.where(needs, 1, 0)))
        np.testing.assert_array_equal(state, np.where(served, -REQUEST + 200 + CELL_CTX[:, None], -REQUEST))


def test_three_stages_serve_exactly_the_runs_each_needs():
    """A cheap single-pass first stage (served in one pass, or for every run when more
    than a quarter wait), a check with a fold, a full solve with another: each later
    stage serves exactly the runs the previous one left unresolved, and reads the
    state as the folds before it left it."""
    first = Stage(lambda r, s, c: (jnp.int32(1), (r % 2) == 0), batching="single_pass")
    check = Stage(
        lambda r, s, c: (jnp.int32(2), (r % 4) != 3),
        fold_fn=lambda state, answer, ctx: state + 10 * answer.astype(jnp.float32) + ctx,
    )
    full = Stage(
        lambda r, s, c: (3 + (s > -r).astype(jnp.int32), jnp.asarray(False)),  # reads the checked state
        fold_fn=lambda state, answer, ctx: state + 1000 * answer.astype(jnp.float32) + ctx,
        batching="rare",
    )
    solver = Solver((first, check, full), finish_fn=None)
    r = np.asarray(REQUEST)
    c = np.asarray(CELL_CTX)[:, None]
    # 2/3 of the runs wait (the first stage runs for all), then 1/7 (one compacted pass).
    for needs in ((REQUEST % 3) != 0, (REQUEST % 7) == 0):
        checked = np.asarray(needs) & (r % 2 == 1)
        solved = checked & (r % 4 == 3)
        for solve_batch in (None, 4, 46):
            answers, state = _serve(solver, needs, solve_batch)
            np.testing.assert_array_equal(answers, np.where(solved, 4, np.where(checked, 2, np.where(needs, 1, 0))))
            expected = -r + np.where(checked, 20 + c, 0) + np.where(solved, 4000 + c, 0)
            np.testing.assert_array_equal(state, expected)


def test_a_single_pass_stage_cannot_fold():
    with pytest.raises(ValueError, match="single_pass stage cannot have a fold_fn"):
        compaction.serve(lambda r, s, c: r, jnp.ones((1, 4), bool), REQUEST[:1, :4], REQUEST[:1, :4], CELL_CTX[:1],
                         size=4, fold_fn=lambda s, a, c: s, single_pass=True)  # fmt: skip
