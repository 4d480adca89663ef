"""Whether an instance means in a working dtype what it means in float64: its means,
gaps and noise levels, with the samples the lower bound asks of each arm (``2 /
gap**2``) and the precisions ``1 / sigma**2`` the estimators weigh samples by.  A value
the dtype cannot hold is refused, naming the entry and a remedy (rescale, or a wider
dtype), never silently rounded into another instance; means the dtype holds too
coarsely for their gaps get a :class:`CoarseMeansWarning`."""

from __future__ import annotations

import warnings

import numpy as np

from jaxbandit._numbers import ArgumentError, check_fits, first_entry

__all__ = ["COARSE_MEANS", "CoarseMeansWarning", "check_large_gaps", "check_precisions", "check_representable", "refuse_gap"]

# The coarsest spacing of the means, relative to the smallest gap, that a simulation
# runs without a warning: beyond it the estimates of two arms round to one value often
# enough to change how the policies decide (ties).
COARSE_MEANS = 2.0**-10


class CoarseMeansWarning(UserWarning):
    """The working dtype spaces the means so coarsely, next to their smallest gap, that
    estimates of different arms will often tie (a large common offset in float32)."""


def check_representable(mu: np.ndarray, sigma: np.ndarray, dtype, remedy: str = "dtype='float64'") -> None:
    """The instance means the same in ``dtype`` as in float64: finite means and gaps, no
    worse arm rounded onto the best mean, no gap whose ``2 / gap**2`` the dtype loses
    (:func:`check_large_gaps`), and no noise level whose precision ``1 / sigma**2``
    would vanish or overflow (:func:`check_precisions`).  Errors suggest ``remedy``,
    the caller's name for a wider dtype.

    Args:
        mu: ``(C, K)`` means, float64.
        sigma: ``(C, K, K)`` noise levels, float64.
    """
    name = np.dtype(dtype).name
    check_fits("instance mu", mu, dtype, remedy)
    cast = mu.astype(dtype)
    with np.errstate(over="ignore"):
        exact = mu.max(axis=-1, keepdims=True) - mu
        gaps = cast.max(axis=-1, keepdims=True) - cast  # as the engine computes them
    if entry := first_entry("instance gap (max(mu) - mu)", exact, ~np.isfinite(gaps)):
        raise ValueError(f"{entry} overflows {name}; rescale it or use {remedy}.")
    merged = (exact > 0) & (gaps <= 0)
    if merged.any():
        # the rounded means tie a worse arm with the best: its plays would count no regret
        cell, arm = np.argwhere(merged)[0]
        best = int(np.argmax(mu[cell]))
        low, high = float(mu[cell, arm]), float(mu[cell, best])
        raise ValueError(
            f"instance mu: arm {arm} ({low!r}) is below arm {best} ({high!r}), but not in {name}, which rounds "
            f"them to one value; subtract a common offset from mu (regret depends on the gaps only) or use {remedy}."
        )
    check_large_gaps(mu, dtype, remedy)
    _warn_coarse_means(mu, dtype, remedy)
    check_precisions(sigma, dtype, remedy)


def check_large_gaps(mu: np.ndarray, dtype, remedy: str = "dtype='float64'") -> None:
    """No gap ``max(mu) - mu`` (``mu`` ``(C, K)``) whose ``2 / gap**2``, the samples the
    bound's LP asks of the arm, is not a normal number in ``dtype``: the arm would drop
    out of the bound and of the LP policies' rounds."""
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        gaps = np.max(mu, axis=-1, keepdims=True) - mu
        requirement = 2 / np.square(np.where(gaps > 0, gaps, np.inf))
    flagged = (gaps > 0) & np.isfinite(gaps) & (requirement < np.finfo(dtype).tiny)
    wider = f" or use {remedy}" if np.finfo(dtype).bits < 64 else ""
    refuse_gap(mu, gaps, flagged, f"is so large that 2 / gap**2 underflows {np.dtype(dtype).name}; rescale mu{wider}")


def refuse_gap(mu: np.ndarray, gaps: np.ndarray, flagged: np.ndarray, problem: str) -> None:
    """A ValueError naming the first ``flagged`` gap (``(C, K)``) and saying ``problem``."""
    if flagged.any():
        index = np.argwhere(flagged)[0]
        where = f"instance {index[0]}: " if len(mu) > 1 else ""
        raise ValueError(
            f"{where}mu={mu[index[0]].tolist()}: the gap {float(gaps[tuple(index)])!r} of arm {int(index[-1])} {problem}."
        )


def check_precisions(
    sigma: np.ndarray, dtype, remedy: str = "dtype='float64'", *, name: str = "instance sigma", indexed: bool = False
) -> None:
    """No finite noise level in ``sigma`` (any shape) has a precision ``1 / sigma**2``
    that vanishes in ``dtype``, and no nonzero one a precision that overflows: that
    observation would be silently ignored (an estimator that never learns from it, a
    lower-bound row that looks unobserved) or taken as noise-free.  An
    :class:`ArgumentError` for ``sigma`` shows the entry as ``name`` (with its index if
    ``indexed``)."""
    dtype_name = np.dtype(dtype).name
    wider = f", or {remedy}" if np.finfo(dtype).bits < 64 else ""
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        precision = 1 / np.square(sigma.astype(dtype))
    if entry := first_entry(name, sigma, (sigma > 0) & np.isinf(precision), indexed):
        raise ArgumentError(
            f"{entry} is nonzero but its precision 1 / sigma**2 overflows {dtype_name} (the sample would count as "
            f"noise-free); use 0 for a noise-free sample{wider}.", argument="sigma"
        )
    if entry := first_entry(name, sigma, np.isfinite(sigma) & (precision == 0), indexed):
        raise ArgumentError(
            f"{entry} is finite but its precision 1 / sigma**2 is 0 in {dtype_name} (the sample would be "
            f"ignored); use np.inf for no information{wider}.", argument="sigma"
        )


def _warn_coarse_means(mu: np.ndarray, dtype, remedy: str) -> None:
    """A :class:`CoarseMeansWarning` where the spacing of ``dtype`` at the largest mean
    magnitude of an instance (``mu`` ``(C, K)``) exceeds :data:`COARSE_MEANS` of its
    smallest gap."""
    gaps = np.max(mu, axis=-1, keepdims=True) - mu
    smallest = np.min(np.where(gaps > 0, gaps, np.inf), axis=-1)
    spacing = np.spacing(np.max(np.abs(mu), axis=-1).astype(dtype)).astype(np.float64)
    coarse = spacing > COARSE_MEANS * smallest
    if coarse.any():
        i = int(np.argmax(coarse))
        where = f"instance {i}: " if len(mu) > 1 else ""
        warnings.warn(
            f"{where}{np.dtype(dtype).name} holds means near {float(np.max(np.abs(mu[i])))!r} to within "
            f"{float(spacing[i])!r}, {float(spacing[i] / smallest[i]):.2%} of the smallest gap {float(smallest[i])!r}: "
            f"estimates of different arms will often round to one value and tie. Subtract a common offset from mu "
            f"(regret depends on the gaps only) or use {remedy}.",
            CoarseMeansWarning,
            stacklevel=3,
        )
