"""The lower bound of an instance, on the host: :func:`lower_bound`.

One compiled, vmapped solve of the lower-bound LP (:mod:`jaxbandit.bound_lp`) for a
single or batch :class:`~jaxbandit.instances.Instance`, then rescues for the lanes a
float solve cannot certify: float32 lanes are solved again in float64, float64 lanes
are retried with other settings and, in the end, solved in exact rational arithmetic
(:mod:`jaxbandit.exact_lp`), so every feasible instance without a tie ends
``OPTIMAL``.  Ties, unobservable arms and unsolved LPs raise ``ValueError`` unless
``throw=False``.

The bound depends on the instance's noise family (:mod:`jaxbandit.noise`) through the
divergence between a sample's law and the closest alternative's, which the paper's LP
(§4) takes per sample as the Gaussian ``Delta**2 / (2 sigma**2)``.

* Gaussian: the paper's LP.
* Bernoulli: the same LP with other coefficients.  A play of ``j`` that observes arm
  ``k != i*`` gives ``kl(mu_k, mu*)`` toward the alternative that lifts ``mu_k`` just
  above ``mu*``, one that observes ``i*`` gives ``kl(mu*, mu_(2))`` toward the one that
  drops ``mu*`` to the second-best mean ``mu_(2) = mu* - Delta_min`` (``kl`` the
  Bernoulli relative entropy), so constraint ``k`` reads
  ``sum_j [j observes k] c_j kl(mu_k, mu*) >= 1``.  Multiplied by ``2 / Delta_k**2``
  it is the Gaussian constraint ``sum_j W'[j, k] c_j >= 2 / Delta_k**2`` with the
  *equivalent precision* ``W'[j, k] = [j observes k] 2 kl(mu_k, mu*) / Delta_k**2``
  (and ``2 kl(mu*, mu_(2)) / Delta_min**2`` in column ``i*``): :func:`bernoulli_precision`,
  solved by the same exact batched LP.  An infinite divergence (``mu* = 1`` against a
  worse arm, whose alternative would need a mean above 1; ``mu_(2) = 0`` for ``i*``)
  is an infinite precision: its constraint is dropped, as a noise-free observation's
  is (:mod:`jaxbandit.bound_lp`), so the statuses keep their meaning.  As
  ``W' >= 4`` (Pinsker: ``kl >= 2 Delta**2``), the Bernoulli bound is at most the
  Gaussian one at ``sigma = 1/2``.
* Uniform, Rademacher, Student's t: no bound is claimed (their divergences are not
  the Gaussian one, and the policies assume only the scale ``sigma``).
  ``lower_bound(instance, reference="gaussian")`` gives the Gaussian LP at that
  ``sigma``, labelled ``kind = "gaussian reference"``: a yardstick, not a bound.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit import exact_lp, lp
from jaxbandit._numbers import ArgumentError, boolean, check_fits, float_array, float_dtype
from jaxbandit._types import Array, ArrayLike
from jaxbandit.bound_lp import (
    LowerBoundSolution,
    LowerBoundStatus,
    check_warm_start,
    lower_bound_problem,
    solve_lower_bound,
    warm_start,
)
from jaxbandit.compile_options import Program
from jaxbandit.instances import Instance, check_instance, check_unique_best
from jaxbandit.representable import check_large_gaps, check_precisions, check_small_gaps, refuse_gap
from jaxbandit.threads import cpu_threads, map_on_threads

__all__ = ["BOUND_FAMILIES", "LowerBound", "bernoulli_kl", "bernoulli_precision", "bound_kind", "lower_bound"]

BOUND_FAMILIES = ("gaussian", "bernoulli")  # the noise families whose bound is known


class LowerBound(NamedTuple):
    """Host-side result of :func:`lower_bound` (numpy arrays).

    Attributes:
        c: ``(K,)`` or ``(num_instances, K)`` the canonical ``c*``; NaN where not
            solved (``status`` says why).
        value: ``()`` or ``(num_instances,)`` ``sum_i c*_i Delta_i`` (the constant of the
            bound ``R_T >~ value * log T``); ``inf`` where not solved.
        status: ``()`` or ``(num_instances,)`` int32
            :class:`~jaxbandit.bound_lp.LowerBoundStatus`.
        best_arm: ``()`` or ``(num_instances,)`` ``i*``.
        gaps: same shape as ``c``, ``Delta``.
        kind: ``"bound"`` (the lower bound of the instance's noise family) or
            ``"gaussian reference"`` (the Gaussian LP at the instance's ``sigma``, for a
            family whose bound is not known or not asked for; not a bound).
        family: the instance's noise family, as its label (:mod:`jaxbandit.noise`).
    """

    c: np.ndarray
    value: np.ndarray
    status: np.ndarray
    best_arm: np.ndarray
    gaps: np.ndarray
    kind: str = "bound"
    family: str = "gaussian"

    def curve(self, times: ArrayLike) -> np.ndarray:
        """The lower-bound curve ``value * log(times)``: ``(P,)`` or ``(num_instances, P)``;
        ``inf`` throughout where there is no finite bound (a tie: ``value = inf``)."""
        times = float_array("times", times, "numbers >= 1")
        if times.ndim > 1 or not np.all(times >= 1):  # NaN included
            raise ArgumentError(f"times must be one number or a list of numbers >= 1, got {times.tolist()!r}.", argument="times")
        value = np.asarray(self.value, np.float64)
        with np.errstate(invalid="ignore"):  # inf * log(1): inf, not NaN
            return np.where(np.isinf(value)[..., None], np.inf, np.multiply.outer(value, np.log(times)))


_batched_solve = Program(jax.vmap(solve_lower_bound))

# Every vmapped program here runs on a few fixed batch sizes: the powers of two from
# _MIN_LANES up to the largest of the problem's size (_largest_lanes), larger batches in
# pieces of that.  A new number of instances (or of lanes left to rescue) then reuses a
# compiled program instead of compiling another; each lane's answer does not depend on
# the others in its batch.
_MIN_LANES = 8
_MAX_LANES = 1024
# On a CPU the tableaux of one piece stay within about this many bytes: a vmapped
# pivot sweeps all its lanes' tableaux, a piece whose tableaux outgrow the processor's
# caches solves fewer LPs per second, and the wider a piece the more of its lanes wait
# for its slowest LP, so large K runs in small pieces (benchmarks/README.md gives the
# trade by K).  An accelerator solves more LPs per second the wider the batch: there
# pieces are _MAX_LANES wide.
_PIECE_BYTES = 2**19


def _largest_lanes(num_arms: int, dtype) -> int:
    """The largest batch size of a ``num_arms``-arm LP in ``dtype``: a power of two in
    ``[_MIN_LANES, _MAX_LANES]``, on a CPU one whose tableaux (``(K + 2) x (2K + 1)``
    each) fit in ``_PIECE_BYTES``."""
    if jax.default_backend() != "cpu":
        return _MAX_LANES
    tableau_bytes = (num_arms + 2) * (2 * num_arms + 1) * np.dtype(dtype).itemsize
    fits = max(_PIECE_BYTES // tableau_bytes, 1)
    return min(max(_MIN_LANES, 1 << (fits.bit_length() - 1)), _MAX_LANES)


def _lanes(count: int, largest: int = _MAX_LANES) -> int:
    """The compiled batch size that serves ``count`` instances (``count >= 1``)."""
    return min(max(_MIN_LANES, 1 << (count - 1).bit_length()), largest)


def _on_lanes(function, *arrays, largest: int = _MAX_LANES):
    """``function(*arrays)`` (vmapped, jitted) over the leading axis, run on batches of
    :func:`_lanes` size (at most ``largest``) padded with copies of the first instance;
    numpy outputs.  On a CPU the batches after the first run on one thread per core
    (:mod:`jaxbandit.threads`)."""
    count = len(arrays[0])
    if count == 0:  # an empty batch: nothing to pad with
        return jax.tree.map(np.asarray, function(*arrays))
    lanes = _lanes(count, largest)

    def solved(start: int):
        # each batch gathered where it is solved: no copy of the whole input at once
        take = np.arange(start, start + lanes)
        take[take >= count] = 0
        return jax.tree.map(np.asarray, function(*(a[take] for a in arrays)))

    starts = range(0, count, lanes)
    # The first batch alone: it compiles the program.
    pieces = [solved(starts[0])] + map_on_threads(solved, starts[1:], cpu_threads())
    return jax.tree.map(lambda *parts: np.concatenate(parts)[:count], *pieces)


def _solve_batch(mu: np.ndarray, precision: np.ndarray, dtype) -> LowerBoundSolution:
    dtype = np.dtype(dtype)
    with jax.enable_x64(dtype == np.float64):
        largest = _largest_lanes(np.shape(mu)[-1], dtype)
        return _on_lanes(_batched_solve, np.asarray(mu, dtype), np.asarray(precision, dtype), largest=largest)


# Float64 lanes the default solve cannot certify (badly scaled sigma) are tried again
# with these (re-factorisation rounds, feasibility tolerance), in order; the first that
# ends OPTIMAL is kept.  The last two certify optimality to a looser relative
# feasibility tolerance.  They are traced values: one compiled program serves all three.
_FLOAT64_RETRIES = (
    (10, lp.default_tolerance(np.float64)),
    (lp.default_refactorizations(np.float64), 1e-8),
    (lp.default_refactorizations(np.float64), 1e-7),
)


@Program
def _solve_with(mu, precision, max_refactorizations, feasibility_tolerance) -> LowerBoundSolution:
    settings = {"max_refactorizations": max_refactorizations, "feasibility_tolerance": feasibility_tolerance}
    return jax.vmap(lambda m, p: solve_lower_bound(m, p, **settings))(mu, precision)


@Program
def _verify_basis(mu, precision, basis) -> tuple[Array, LowerBoundSolution]:
    return jax.vmap(lambda m, p, b: check_warm_start(m, p, warm_start(p, b))[:2])(mu, precision, basis)


def _unsolved(status: np.ndarray) -> np.ndarray:
    return np.isin(status, (lp.LPStatus.NUMERICAL_ERROR, lp.LPStatus.MAX_ITERATIONS))


_batched_problem = Program(jax.vmap(lower_bound_problem))


def _solved_exactly(mu: np.ndarray, precision: np.ndarray, guess: np.ndarray) -> LowerBoundSolution:
    """:func:`jaxbandit.exact_lp.solve_exact` on each lane (float64 data), started from
    the basis ``guess`` the float solve ended on."""
    with jax.enable_x64(True):
        problem = _on_lanes(_batched_problem, np.asarray(mu, np.float64), np.asarray(precision, np.float64))
    answers = [
        exact_lp.solve_exact(problem.cost[i], problem.A[i], problem.b[i], basis=guess[i]) for i in range(len(mu))
    ]
    return LowerBoundSolution(
        c=np.stack([a.x for a in answers]),
        value=np.array([a.objective for a in answers], np.float64),
        status=np.array([a.status for a in answers], np.int32),
        num_iterations=np.array([a.num_iterations for a in answers], np.int32),
        basis=np.stack([a.basis for a in answers]),
    )


def _rescue_float64(mu: np.ndarray, precision: np.ndarray, out: LowerBoundSolution) -> LowerBoundSolution:
    """Retry the float64 lanes left unsolved: the float32 solve's basis verified in
    float64 (a different pivot path often ends elsewhere), then :data:`_FLOAT64_RETRIES`,
    then, for what is left, the exact rational solve (:mod:`jaxbandit.exact_lp`)."""
    retry = _unsolved(out.status)
    if not retry.any():
        return out
    best = jax.tree.map(lambda a: a[retry], out)
    with jax.enable_x64(True):
        mu64 = np.asarray(mu[retry], np.float64)
        precision64 = np.asarray(precision[retry], np.float64)
        largest = _largest_lanes(mu64.shape[-1], np.float64)

        def verified_guess():
            guess = _solve_batch(mu64, precision64, np.float32).basis
            ok, verified = _on_lanes(_verify_basis, mu64, precision64, guess, largest=largest)
            return verified._replace(status=np.where(ok, verified.status, lp.LPStatus.NUMERICAL_ERROR))

        def solved_with(settings):
            refactorizations, tolerance = settings
            traced = (jnp.int32(refactorizations), jnp.float64(tolerance))
            return _on_lanes(lambda m, p: _solve_with(m, p, *traced), mu64, precision64, largest=largest)

        def solved_exactly():
            unsolved = _unsolved(best.status)
            exact = _solved_exactly(mu[retry][unsolved], precision[retry][unsolved], best.basis[unsolved])
            return jax.tree.map(lambda a, b: _assign(a, unsolved, b), best, exact)

        attempts = [verified_guess] + [functools.partial(solved_with, o) for o in _FLOAT64_RETRIES] + [solved_exactly]
        for attempt in attempts:  # in order, only while some lane is still unsolved
            if not _unsolved(best.status).any():
                break
            candidate = attempt()
            take = _unsolved(best.status) & (candidate.status == LowerBoundStatus.OPTIMAL)
            best = jax.tree.map(lambda a, b: _assign(a, take, b[take]), best, candidate)
    return jax.tree.map(lambda a, b: _assign(a, retry, b), out, best)


def _log1p_minus_x(x: np.ndarray) -> np.ndarray:
    """``log1p(x) - x`` to full relative precision, for ``|x| < 1/2``: its Taylor series
    below 1e-2 (the direct difference would keep only ``eps / |x|`` of it)."""
    series = sum((-1) ** (n + 1) * x**n / n for n in range(2, 10))  # next term below 1e-20 relative
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x) < 1e-2, series, np.log1p(x) - x)


def bernoulli_kl(p: ArrayLike, q: ArrayLike) -> np.ndarray:
    """The Bernoulli relative entropy ``kl(p, q) = p log(p/q) + (1-p) log((1-p)/(1-q))``,
    elementwise (float64, broadcasting), with ``0 log 0 = 0``: ``kl(0, q) = -log(1 - q)``,
    ``kl(1, q) = -log q``, and ``inf`` where ``q`` is 0 or 1 and ``p`` is not ``q``.

    Near ``p = q`` its two terms nearly cancel (each of order ``p - q``, the sum of order
    ``(p - q)**2``); there it is evaluated as ``d**2 / (q (1 - q)) + p g(d / q) +
    (1 - p) g(-d / (1 - q))`` with ``d = p - q`` and ``g(x) = log1p(x) - x``, which keeps
    its relative precision.
    """
    p, q = np.broadcast_arrays(np.asarray(p, np.float64), np.asarray(q, np.float64))
    d = p - q
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x, y = d / q, -d / (1 - q)
        # log(p/q) as log1p(x) loses its digits where x rounds towards -1 (p << q)
        log_ratio = np.where(x < -0.5, np.log(p / q), np.log1p(x))
        direct = np.where(p > 0, p * log_ratio, 0.0) + np.where(p < 1, (1 - p) * np.log1p(y), 0.0)
        near = (np.abs(x) < 0.5) & (np.abs(y) < 0.5)  # False where q is 0 or 1 (x or y not finite)
        series = d * d / (q * (1 - q)) + p * _log1p_minus_x(x) + (1 - p) * _log1p_minus_x(y)
    return np.where(near, series, direct)


def bernoulli_precision(mu: ArrayLike, sigma: ArrayLike) -> np.ndarray:
    """The equivalent precision ``W'`` of Bernoulli instances (see the module's
    docstring): ``W'[j, k] = 2 kl(mu_k, mu*) / Delta_k**2`` where ``j`` observes ``k``
    (finite ``sigma[j, k]``), ``2 kl(mu*, mu_(2)) / Delta_min**2`` in the best arm's
    column, ``inf`` where the divergence is, 0 where ``j`` does not observe ``k``.

    Args:
        mu: ``(..., K)`` means in ``[0, 1]``.
        sigma: ``(..., K, K)``; only which entries are finite matters.

    Returns:
        ``(..., K, K)`` float64, for :func:`jaxbandit.bound_lp.solve_lower_bound`.
    """
    mu = np.asarray(mu, np.float64)
    top = mu.max(axis=-1, keepdims=True)
    gaps = top - mu
    positive = gaps > 0
    min_gap = np.min(np.where(positive, gaps, np.inf), axis=-1, keepdims=True)
    second = np.max(np.where(positive, mu, -np.inf), axis=-1, keepdims=True)  # top - min_gap may round to another mean
    with np.errstate(divide="ignore", invalid="ignore"):
        worse = 2 * bernoulli_kl(mu, top) / np.square(gaps)
        best = 2 * bernoulli_kl(top, second) / np.square(min_gap)
    # Tied arms (gap 0 but not i*) take the best arm's column; with no positive gap at
    # all the instance is a tie (the LP reports it) and any finite value does.
    ratio = np.where(positive, worse, np.where(np.isfinite(min_gap), best, 1.0))
    return np.where(np.isfinite(np.asarray(sigma)), ratio[..., None, :], 0.0)


def bound_kind(family, reference) -> str:
    """What :func:`lower_bound` gives for noise ``family`` and ``reference``:
    ``"bound"``, or ``"gaussian reference"`` (the Gaussian LP for a family without a bound)."""
    return "bound" if reference is None or family.name == "gaussian" else "gaussian reference"


def lower_bound(
    instance: Instance, *, dtype=np.float64, throw: bool = True, reference: str | None = None
) -> LowerBound:
    """The lower bound ``c*(mu)`` and ``value = sum_i c*_i Delta_i`` of an instance.

    A batch :class:`~jaxbandit.instances.Instance` gives batched arrays (one compiled,
    vmapped solve).  float32 instances the float32 solver cannot certify (a
    ``NUMERICAL_ERROR``/``MAX_ITERATIONS`` status) are solved again in float64.  Float64
    lanes still unsolved (badly scaled ``sigma``) are retried: the float32 solve's
    basis verified in float64, more re-factorisations, then feasibility tolerances of
    1e-8 and 1e-7 (relative), and what none of those certifies is solved in exact
    rational arithmetic (:mod:`jaxbandit.exact_lp`: plain Python, slow, so kept for
    the few lanes left).  So every feasible instance without a tie ends ``OPTIMAL``.

    The bound is that of the instance's noise family (Gaussian: the paper's LP;
    Bernoulli: the same LP with :func:`bernoulli_precision`); for the others none is
    known, and ``reference="gaussian"`` asks for the Gaussian LP at the instance's
    ``sigma`` instead (see the module's docstring).

    Args:
        instance: a single or batch ``Instance``.
        dtype: ``np.float64`` (default) or ``np.float32``, the working precision.
        throw: raise ``ValueError`` when an instance has a tie for the best mean, an
            unobservable arm or an unsolved LP; otherwise report it in ``status``.
        reference: None (the family's bound) or ``"gaussian"`` (the Gaussian LP at
            ``sigma``: ``kind = "gaussian reference"`` unless the noise is Gaussian).

    Returns:
        A :class:`LowerBound`.

    Raises:
        ValueError: also for a noise family without a known bound and no ``reference``,
            and, in float32, for an answer (``c`` or ``value``) float32 cannot hold.
    """
    check_instance("instance", instance)
    dtype = float_dtype("dtype", dtype)
    boolean("throw", throw)
    if reference not in (None, "gaussian"):
        raise ArgumentError(f"reference must be None or 'gaussian', got {reference!r}.", argument="reference")
    family = instance.noise
    if reference is None and family.name not in BOUND_FAMILIES:
        raise ArgumentError(
            f"no lower bound is known for noise {family.label!r} (only for {' and '.join(BOUND_FAMILIES)}); "
            "lower_bound(instance, reference='gaussian') (on the command line: --gaussian-reference) gives "
            "the Gaussian LP at the instance's sigma, "
            "labelled as a Gaussian reference, not a bound.", argument="noise")
    gaussian = reference == "gaussian" or family.name == "gaussian"
    kind = bound_kind(family, reference)
    mu = np.atleast_2d(instance.mu)
    sigma = instance.sigma.reshape(mu.shape + (mu.shape[-1],))
    precision = instance.precision.reshape(sigma.shape) if gaussian else bernoulli_precision(mu, sigma)
    _check_gaps(mu, dtype)
    float32 = np.dtype(dtype) == np.float32
    if gaussian:  # a precision that rounds to 0 or overflows: an unobserved row, or a noise-free one
        check_precisions(instance.sigma, dtype, "dtype=np.float64", indexed=True, argument="instance")
    elif float32:  # W' >= 4 never vanishes, but one near a mean of 0 or 1 can overflow
        check_fits("the Bernoulli equivalent precision", precision, dtype, "dtype=np.float64", "dtype", rescalable=False)
    # The LP depends on the gaps only: in float32 take them from the float64 means (one
    # rounding), not from means rounded to float32 first, where two close means lose
    # most of their gap.  float64 solves the means as given.
    out = _solve_batch(mu - mu.max(axis=-1, keepdims=True) if float32 else mu, precision, dtype)
    retry = _unsolved(out.status)
    if float32:  # a gap so small that float32's 2 / gap**2 overflows: float64 holds it
        retry |= out.status == LowerBoundStatus.INVALID_INPUT
    if float32 and retry.any():
        again = _rescue_float64(mu[retry], precision[retry], _solve_batch(mu[retry], precision[retry], np.float64))
        out = jax.tree.map(lambda a, b: _assign(a, retry, b), out, again)
    elif not float32:
        out = _rescue_float64(mu, precision, out)
    if throw:
        _raise_for_status(out.status, mu, precision)
    squeeze = (lambda a: a[0]) if not instance.is_batch else (lambda a: a)
    solved = (out.status == LowerBoundStatus.OPTIMAL)[:, None]  # else the LP's last point, no allocation
    if float32:  # an answer rescued in float64 must still be held by float32
        for name, value in (("the lower bound's allocation c", np.where(solved, out.c, 0)), ("the lower bound's value", out.value)):
            check_fits(name, squeeze(value), dtype, "dtype=np.float64", "dtype", instance.is_batch, rescalable=False)
    return LowerBound(
        c=squeeze(np.where(solved, out.c, np.nan).astype(dtype)),
        value=squeeze(out.value.astype(dtype)),
        status=squeeze(out.status.astype(np.int32)),
        best_arm=squeeze(np.argmax(mu, axis=-1)),
        gaps=squeeze((np.max(mu, axis=-1, keepdims=True) - mu).astype(dtype)),
        kind=kind,
        family=family.label,
    )


def _check_gaps(mu: np.ndarray, dtype) -> None:
    """Every nonzero gap's ``b_i = 2 / gap**2`` must be finite in float64 (float32's
    overflow is solved in float64) and a normal number in ``dtype``
    (:func:`~jaxbandit.representable.check_large_gaps`), and every gap must fit in
    ``dtype`` (the results report them)."""
    check_small_gaps(mu, np.float64)
    with np.errstate(over="ignore"):
        gaps = np.max(mu, axis=-1, keepdims=True) - mu
    refuse_gap(mu, gaps, gaps > np.finfo(dtype).max, f"does not fit in {np.dtype(dtype).name}; rescale mu")
    check_large_gaps(mu, dtype, "dtype=np.float64")


def _assign(target: np.ndarray, mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``target`` with ``values`` where ``mask`` holds, in the wider of their dtypes (the
    float64 rescue's answers are cast once, where the result is made, after their check)."""
    result = np.array(target, dtype=np.result_type(target, values), copy=True)
    result[mask] = values
    return result


def _raise_for_status(status: np.ndarray, mu: np.ndarray, precision: np.ndarray) -> None:
    for index in np.flatnonzero(status != LowerBoundStatus.OPTIMAL):
        prefix = f"instance {index}: " if len(status) > 1 else ""
        code = int(status[index])
        if code == LowerBoundStatus.TIED_BEST_ARM:
            try:
                check_unique_best(mu[index])
            except ArgumentError as err:
                raise ArgumentError(f"{prefix}{err}", argument="instance") from None
        unobserved = np.flatnonzero(np.all(precision[index] == 0, axis=0))
        if code == LowerBoundStatus.INFEASIBLE and unobserved.size:
            raise ArgumentError(
                f"{prefix}arm {int(unobserved[0])} is observed by no row of sigma, so the "
                "lower-bound LP is infeasible (its mean can never be estimated).",
                argument="instance",
            )
        raise ValueError(
            f"{prefix}the lower-bound LP was not solved: status {code} "
            f"({LowerBoundStatus.NAMES.get(code, 'unknown')}) for mu={mu[index].tolist()}."
        )
