"""The fast reductions over the arms give what the jnp reductions they replace give."""

import jax
import numpy as np
import pytest

from jaxbandit import reductions


@pytest.mark.parametrize("num_arms", [1, 2, 5, 10, 50])
def test_all_true_and_first_true_match_jnp(num_arms):
    gen = np.random.default_rng(num_arms)
    # Rows with every density of True, including all False and all True.
    flags = gen.random((300, num_arms)) < gen.random((300, 1))
    flags[0] = False
    flags[1] = True
    assert np.array_equal(np.asarray(reductions.all_true(flags)), flags.all(axis=-1))
    first = np.asarray(reductions.first_true(flags))
    assert first.dtype == np.int32
    assert np.array_equal(first, flags.argmax(axis=-1))  # 0 where no True, as argmax
    # Per run under vmap and jit, as the policies use them.
    per_run = jax.jit(jax.vmap(lambda f: (reductions.all_true(f), reductions.first_true(f))))(flags)
    assert np.array_equal(np.asarray(per_run[0]), flags.all(axis=-1))
    assert np.array_equal(np.asarray(per_run[1]), flags.argmax(axis=-1))


def test_ordered_sum_adds_in_index_order_whatever_the_rows():
    """Each row's sum is the left-to-right float sum, the same bits in a batch of any
    number of rows (1, 4, 12, 300), float32 and float64.  On a CPU ``jnp.sum`` passes
    this too (a dot does not): the recorded regret's own test in ``test_runner.py`` is
    what would see the engine sum otherwise."""
    gen = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        with jax.enable_x64(dtype == np.float64):
            values = (gen.random((300, 10)) * 10.0 ** gen.integers(-3, 4, (300, 10))).astype(dtype)
            expected = np.zeros(300, dtype)
            for k in range(10):
                expected = expected + values[:, k]
            for rows in (1, 4, 12, 300):
                got = np.asarray(jax.jit(reductions.ordered_sum)(values[:rows]))
                assert got.dtype == dtype
                np.testing.assert_array_equal(got, expected[:rows])
