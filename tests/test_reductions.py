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
