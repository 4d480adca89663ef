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
from jaxbandit.estimator import max_weight

__all__ = [
    "COARSE_MEANS", "CoarseMeansWarning", "check_large_gaps", "check_precisions", "check_representable", "check_small_gaps",
    "refuse_gap",
]  # fmt: skip

# The coarsest spacing of the best two means, relative to their gap, that a simulation
# runs without a warning: beyond it their estimates round to one value often enough to
# change how the policies decide (a tie for the best estimate).
COARSE_MEANS = 2.0**-7


class CoarseMeansWarning(UserWarning):
    """The working dtype spaces the best two means so coarsely, next to their gap, that
    their estimates will often tie (a large common offset in float32)."""


def check_representable(mu: np.ndarray, sigma: np.ndarray, dtype, remedy: str = "dtype='float64'") -> None:
    """The instance means the same in ``dtype`` as in float64: finite means and gaps, no
    worse arm rounded onto the best mean, no gap whose ``2 / gap**2`` the dtype loses
    (:func:`check_large_gaps`) or cannot hold (:func:`check_small_gaps`), and no
    noise level whose precision ``1 / sigma**2`` would vanish or overflow
    (:func:`check_precisions`).  Errors suggest ``remedy``, the caller's name for a
    wider dtype.

    Args:
        mu: ``(C, K)`` means, float64.
        sigma: ``(C, K, K)`` noise levels, float64.

    Errors name an entry by its index (in a batch, ``C > 1``, the instance's first).
    """
    name = np.dtype(dtype).name
    batch = len(mu) > 1
    # an entry's index: its instance's first in a batch
    mu_entries, sigma_entries = (mu, sigma) if batch else (mu[0], sigma[0])
    check_fits("instance mu", mu_entries, dtype, remedy, argument="instance", indexed=True)
    cast = mu.astype(dtype)
    with np.errstate(over="ignore"):
        exact = mu.max(axis=-1, keepdims=True) - mu
        gaps = cast.max(axis=-1, keepdims=True) - cast  # as the engine computes them
    if entry := first_entry("instance gap (max(mu) - mu)", exact, ~np.isfinite(gaps), batch):
        raise ArgumentError(f"{entry} overflows {name}; rescale it or use {remedy}.", argument="instance")
    merged = (exact > 0) & (gaps <= 0)
    if merged.any():
        # the rounded means tie a worse arm with the best: its plays would count no regret
        cell, arm = np.argwhere(merged)[0]
        best = int(np.argmax(mu[cell]))
        low, high = float(mu[cell, arm]), float(mu[cell, best])
        where = f"instance {cell}: " if batch else ""
        raise ArgumentError(
            f"{where}instance mu: arm {arm} ({low!r}) is below arm {best} ({high!r}), but not in {name}, which rounds "
            f"them to one value; subtract a common offset from mu (regret depends on the gaps only) or use {remedy}.",
            argument="instance",
        )
    check_large_gaps(mu, dtype, remedy)
    check_small_gaps(mu, dtype, remedy)
    _warn_coarse_means(mu, dtype, remedy)
    # the estimator caps a sample's weight (a noise-free one's too)
    check_precisions(sigma_entries, dtype, remedy, indexed=True, argument="instance", largest=max_weight(dtype))


def _requirements(mu: np.ndarray) -> tuple:
    """The gaps ``max(mu) - mu`` and each nonzero one's ``2 / gap**2`` (the samples the
    bound's LP asks of the arm; inf for a zero gap), in float64."""
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        gaps = np.max(mu, axis=-1, keepdims=True) - mu
        return gaps, 2 / np.square(np.where(gaps > 0, gaps, np.inf))


def check_large_gaps(mu: np.ndarray, dtype, remedy: str = "dtype='float64'") -> None:
    """No gap (``mu`` ``(C, K)``) whose ``2 / gap**2`` is not a normal number in
    ``dtype``: the arm would drop out of the bound and of the LP policies' rounds."""
    gaps, requirement = _requirements(mu)
    flagged = (gaps > 0) & np.isfinite(gaps) & (requirement < np.finfo(dtype).tiny)
    wider = f" or use {remedy}" if np.finfo(dtype).bits < 64 else ""
    refuse_gap(mu, gaps, flagged, f"is so large that 2 / gap**2 underflows {np.dtype(dtype).name}; rescale mu{wider}")


def check_small_gaps(mu: np.ndarray, dtype, remedy: str = "dtype='float64'") -> None:
    """No nonzero gap (``mu`` ``(C, K)``) whose ``2 / gap**2`` overflows ``dtype``, or
    whose ``gap**2`` is below its smallest normal number (XLA flushes it to 0, and the
    quotient is inf): the LP that reads it (the bound's, the oracle's) would be given an
    infinite requirement."""
    gaps, requirement = _requirements(mu)
    info = np.finfo(dtype)
    with np.errstate(under="ignore", over="ignore"):
        flushed = np.square(gaps) < info.tiny
    wider = f" or use {remedy}" if info.bits < 64 else ""
    name = np.dtype(dtype).name
    refuse_gap(mu, gaps, (gaps > 0) & ~(requirement <= info.max), f"is so small that 2 / gap**2 overflows {name}; rescale mu{wider}")
    refuse_gap(
        mu, gaps, (gaps > 0) & flushed,
        f"is so small that gap**2 is below {name}'s smallest normal number, which XLA flushes to 0 (2 / gap**2 "
        f"would be inf); rescale mu{wider}",
    )  # fmt: skip


def refuse_gap(mu: np.ndarray, gaps: np.ndarray, flagged: np.ndarray, problem: str) -> None:
    """An :class:`ArgumentError` (argument ``instance``) naming the first ``flagged`` gap
    (``(C, K)``) and saying ``problem``."""
    if flagged.any():
        index = np.argwhere(flagged)[0]
        where = f"instance {index[0]}: " if len(mu) > 1 else ""
        raise ArgumentError(
            f"{where}mu={mu[index[0]].tolist()}: the gap {float(gaps[tuple(index)])!r} of arm {int(index[-1])} {problem}.",
            argument="instance",
        )


def check_precisions(
    sigma: np.ndarray,
    dtype,
    remedy: str = "dtype='float64'",
    *,
    name: str = "instance sigma",
    indexed: bool = False,
    argument: str = "sigma",
    largest: float | None = None,
) -> None:
    """No finite noise level in ``sigma`` (any shape) has a precision ``1 / sigma**2``
    that vanishes in ``dtype``, and no nonzero one a precision that overflows, or
    exceeds ``largest`` (the most weight its user gives one sample: the estimator's
    cap): that observation would be silently ignored (an estimator that never learns
    from it, a lower-bound row that looks unobserved), taken as noise-free, or weighted
    as less precise than it is.  Below the smallest normal number counts as 0, as XLA
    flushes it.  An :class:`ArgumentError` for ``argument`` shows the entry as ``name``
    (with its index if ``indexed``)."""
    dtype_name = np.dtype(dtype).name
    tiny = np.finfo(dtype).tiny
    wider = f", or {remedy}" if np.finfo(dtype).bits < 64 else ""
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        square = np.square(sigma.astype(dtype))
        precision = 1 / square
    kept = (square >= tiny) & (precision <= (np.inf if largest is None else largest))
    if largest is not None and (entry := first_entry(name, sigma, (sigma > 0) & np.isfinite(precision) & ~kept, indexed)):
        raise ArgumentError(
            f"{entry} is nonzero but its precision 1 / sigma**2 is more than the {largest:.3g} the estimator gives one "
            f"sample in {dtype_name} (sigma at least {1 / np.sqrt(largest):.3g}): the sample would count as less precise "
            f"than it is; use 0 for a noise-free sample, rescale the instance{wider}.", argument=argument
        )
    if entry := first_entry(name, sigma, (sigma > 0) & ~kept, indexed):
        raise ArgumentError(
            f"{entry} is nonzero but its precision 1 / sigma**2 overflows {dtype_name} (the sample would count as "
            f"noise-free); use 0 for a noise-free sample{wider}.", argument=argument
        )
    if entry := first_entry(name, sigma, np.isfinite(sigma) & ~(precision >= tiny), indexed):
        raise ArgumentError(
            f"{entry} is finite but its precision 1 / sigma**2 is 0 in {dtype_name}, or below its smallest normal "
            f"number, which XLA flushes to 0 (the sample would be ignored); use inf for no information{wider}.",
            argument=argument,
        )


def _warn_coarse_means(mu: np.ndarray, dtype, remedy: str) -> None:
    """A :class:`CoarseMeansWarning` where ``dtype`` spaces the best two means of an
    instance (``mu`` ``(C, K)``) more than :data:`COARSE_MEANS` of their gap apart
    (the spacing below the larger magnitude: a power of two's own is twice that)."""
    best = np.max(mu, axis=-1)
    below = np.where(mu < best[:, None], mu, -np.inf)
    runner_up = np.max(below, axis=-1)
    gap = best - runner_up  # inf for one arm, or all tied
    magnitude = np.maximum(np.abs(best), np.where(np.isfinite(runner_up), np.abs(runner_up), 0)).astype(dtype)
    spacing = np.spacing(np.nextafter(magnitude, np.zeros_like(magnitude))).astype(np.float64)
    coarse = spacing > COARSE_MEANS * gap
    if coarse.any():
        i = int(np.argmax(coarse))
        where = f"instance {i}: " if len(mu) > 1 else ""
        wider = f" or use {remedy}" if np.finfo(dtype).bits < 64 else ""
        warnings.warn(
            f"{where}{np.dtype(dtype).name} spaces the best two means ({float(best[i])!r}, {float(runner_up[i])!r}) "
            f"{float(spacing[i])!r} apart, {float(spacing[i] / gap[i]):.1%} of their gap: their estimates will often "
            f"round to one value and tie. Subtract a common offset from mu (regret depends on the gaps only){wider}.",
            CoarseMeansWarning,
            stacklevel=3,
        )
