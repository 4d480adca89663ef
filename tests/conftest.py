"""Shared test configuration: strict numpy promotion rules, as in the model codebases;
no persistent compile cache (the command line's default), so that tests neither write
to the user's cache nor read what an earlier run left there."""

import os

import jax

os.environ["JAXBANDIT_COMPILE_CACHE"] = "off"  # subprocesses inherit it
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # a developer's own JAX cache too
jax.config.update("jax_compilation_cache_dir", None)

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")
