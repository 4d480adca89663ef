"""Type aliases shared across the package (shapes are documented in docstrings)."""

from typing import Any

import jax
import numpy as np

Array = jax.Array
ArrayLike = Any  # numpy array, jax array, or nested Python sequence
Key = jax.Array  # a typed PRNG key from ``jax.random.key``
NDArray = np.ndarray

__all__ = ["Array", "ArrayLike", "Key", "NDArray"]
