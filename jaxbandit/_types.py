"""Type aliases shared across the package (shapes are documented in docstrings)."""

from typing import Any

import jax

Array = jax.Array
ArrayLike = Any  # numpy array, jax array, or nested Python sequence

__all__ = ["Array", "ArrayLike"]
