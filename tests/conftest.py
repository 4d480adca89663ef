"""Shared test configuration: strict numpy promotion rules, as in the model codebases."""

import jax

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")
