"""Noise families: how the sample of arm ``j`` revealed by playing arm ``i`` is drawn.

A family is a property of an :class:`~jaxbandit.instances.Instance` (``noise=``); in
every family ``sigma[i, j] = inf`` means that playing ``i`` reveals nothing of ``j``,
and every policy treats a finite ``sigma[i, j]`` as the (sub-)Gaussian scale of that
sample, as in the paper.  ``X`` is the sample, ``mu_j`` its mean, ``s = sigma[i, j]``:

* ``"gaussian"`` (the paper's model, the default): ``X = mu_j + s z``, ``z ~ N(0, 1)``.
* ``"bernoulli"``: ``X = 1`` with probability ``mu_j`` (in ``[0, 1]``), else 0; ``s``
  only says which plays reveal the arm and is the scale the policies assume, at least
  1/2 (the sub-Gaussian scale of any ``[0, 1]`` variable).
* ``"uniform"``: ``X = mu_j + s sqrt(3) U``, ``U`` uniform on ``(-1, 1]``: variance ``s**2``,
  sub-Gaussian with scale ``s``.
* ``"rademacher"``: ``X = mu_j +- s`` with probability 1/2 each: variance and
  sub-Gaussian scale ``s``.
* ``student_t(df)``: ``X = mu_j + s T sqrt((df - 2) / df)``, ``T`` Student's t with
  ``df > 2`` degrees of freedom: variance ``s**2`` (less the tails of probability below
  ``2**-41``, at most 1% in a simulation: :func:`check_drawn`), heavy-tailed (not
  sub-Gaussian).

A family is static: the engine closes over it (one compiled program per family).  Each
draws one counter-based number per arm and round (:mod:`jaxbandit.rng`), so a run's
noise depends only on (seed, instance, run, round), and two policies run with the same
seed see the same numbers (Bernoulli: the same uniforms, thresholded at ``mu_j``).
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from jaxbandit import rng
from jaxbandit._numbers import ArgumentError, number
from jaxbandit._types import Array

__all__ = [
    "BERNOULLI_MIN_SIGMA",
    "GAUSSIAN",
    "MAX_CUT_VARIANCE_SHARE",
    "NAMES",
    "NoiseFamily",
    "bernoulli",
    "check_drawn",
    "cut_variance_share",
    "gaussian",
    "rademacher",
    "resolve",
    "sample",
    "student_t",
    "uniform",
]

NAMES = ("gaussian", "bernoulli", "uniform", "rademacher", "student_t")
# The smallest Bernoulli sigma: a [0, 1] variable is sub-Gaussian with variance proxy 1/4
# (Hoeffding's lemma), and with no smaller one for a fair coin.
BERNOULLI_MIN_SIGMA = 0.5


class NoiseFamily(NamedTuple):
    """A noise family (hashable, static): ``name`` one of :data:`NAMES`, and ``df``
    (Student's t degrees of freedom, a float) or None.  Build it with the constructors
    below or :func:`resolve`."""

    name: str
    df: Optional[float] = None

    @property
    def label(self) -> str:
        """The family as results record it: ``"bernoulli"``, ``"student_t(df=3)"``
        (read back by :func:`resolve`)."""
        if self.df is None:
            return self.name
        df = int(self.df) if float(self.df).is_integer() else self.df
        return f"{self.name}(df={df!r})"


def gaussian() -> NoiseFamily:
    """Gaussian noise with standard deviation ``sigma`` (the paper's model)."""
    return NoiseFamily("gaussian")


def bernoulli() -> NoiseFamily:
    """Bernoulli samples of mean ``mu`` (``sigma >= 1/2``: the scale policies assume)."""
    return NoiseFamily("bernoulli")


def uniform() -> NoiseFamily:
    """Uniform noise of variance ``sigma**2`` (sub-Gaussian with scale ``sigma``)."""
    return NoiseFamily("uniform")


def rademacher() -> NoiseFamily:
    """``mu +- sigma`` with probability 1/2 each (sub-Gaussian with scale ``sigma``)."""
    return NoiseFamily("rademacher")


def _degrees_of_freedom(df) -> float:
    """``df`` as a finite number > 2 (Student's t has a variance only then), or an
    :class:`ArgumentError` naming ``df``."""
    value = number("df", df, "> 2")
    if not (math.isfinite(value) and value > 2):  # NaN included
        raise ArgumentError(
            f"df must be a finite number > 2 (Student's t has a variance only then), got {value!r}.", argument="df"
        )
    return value


def cut_variance_share(df: float) -> float:
    """The share of the variance of Student's t (``df > 2``) that its draws lose to
    their grid: their uniforms ``u`` are the midpoints ``(j + 1/2) 2**-40`` of
    ``2**40`` cells (:mod:`jaxbandit.rng`), and the t radius grows as ``u`` shrinks,
    so the tails of probability below ``2**-41`` are never drawn.  Below ``1e-4`` from
    ``df = 3``; at ``df = 2.01`` the draws keep only 13% of the variance.

    With ``a = 2 / df`` and ``e = 2**-40``, ``T**2`` has mean ``E[u**-a] / (1 - a)``
    against ``1 / (1 - a)``, so the share is ``e**(1 - a) (1 - a) / a`` times ``sum_j
    (int_j^{j+1} x**-a dx - (j + 1/2)**-a)``: cell 0 in closed form, the others by
    their midpoint rule's error series (written with the factor ``a`` taken out, so
    that a huge ``df`` loses no digits)."""
    a = 2.0 / _degrees_of_freedom(df)
    first = 1 - (1 - a) * math.expm1(a * math.log(2)) / a  # cell 0, over a
    x = np.arange(1, 1000) + 0.5
    power_sum = lambda s: np.sum(x**-s) + 1000.0 ** (1 - s) / (s - 1)  # sum_{j >= 1} (j + 1/2)**-s
    others = (1 - a) * (
        (a + 1) / 24 * power_sum(a + 2) + (a + 1) * (a + 2) * (a + 3) / 1920 * power_sum(a + 4)
    )
    return float(2.0 ** (-40 * (1 - a)) * (first + others))


# The most of the variance a Student's t family may lose to the tails the draws cannot
# reach (cut_variance_share): beyond it "variance sigma**2" would not describe the draws.
MAX_CUT_VARIANCE_SHARE = 0.01
# The smallest df within it, to the digits a message shows (cut_variance_share(2.383) < 1%).
_SMALLEST_DRAWN_DF = 2.383


def student_t(df: float) -> NoiseFamily:
    """Student's t noise with ``df`` degrees of freedom (a finite number > 2, so that the
    variance exists), scaled to variance ``sigma**2``.  Near 2 most of that variance
    sits in tails of probability below ``2**-41``, which the draws do not reach: a
    simulation needs ``df`` large enough that they hold at most
    :data:`MAX_CUT_VARIANCE_SHARE` of it (:func:`check_drawn`)."""
    return NoiseFamily("student_t", _degrees_of_freedom(df))


def check_drawn(family: NoiseFamily) -> None:
    """A family a simulation may draw: for Student's t, the tails its draws cannot
    reach hold at most :data:`MAX_CUT_VARIANCE_SHARE` of the variance
    (:func:`cut_variance_share`), else an :class:`ArgumentError` naming ``df``.
    Checked where a simulation starts, not where results are read back."""
    if family.name != "student_t":
        return
    share = cut_variance_share(family.df)
    if share > MAX_CUT_VARIANCE_SHARE:
        raise ArgumentError(
            f"noise {family.label!r}: df = {family.df!r} is too close to 2: {share:.3%} of Student's t variance lies "
            f"in tails of probability below 2**-41, which the draws cannot reach (at most "
            f"{MAX_CUT_VARIANCE_SHARE:.0%} allowed: df >= {_SMALLEST_DRAWN_DF}).",
            argument="df",
        )


GAUSSIAN = gaussian()
_PLAIN = {"gaussian": gaussian, "bernoulli": bernoulli, "uniform": uniform, "rademacher": rademacher}
_STUDENT_LABEL = re.compile(r"student_t\(df=\s*([0-9.eE+-]+)\s*\)")  # a plain number, as the command line reads numbers


def resolve(value) -> NoiseFamily:
    """A family from its name (``"bernoulli"``), its label (``"student_t(df=3)"``) or a
    :class:`NoiseFamily`, checked.

    Raises:
        ArgumentError: naming the argument ``noise`` and the value.
    """
    expected = (
        f"noise must be one of {', '.join(repr(n) for n in _PLAIN)}, 'student_t(df=...)' "
        f"or a family of jaxbandit.noise (e.g. jaxbandit.noise.student_t(df=3)), got {value!r}."
    )
    if isinstance(value, NoiseFamily):
        name, df = value
    elif isinstance(value, str):
        match = _STUDENT_LABEL.fullmatch(value)
        name, df = ("student_t", match.group(1)) if match else (value, None)
        if match:
            try:
                df = float(df)
            except ValueError:
                raise ArgumentError(expected, argument="noise") from None
    else:
        raise ArgumentError(expected, argument="noise")
    if name in _PLAIN and df is None:
        return _PLAIN[name]()
    if name == "student_t" and df is not None:
        try:
            return student_t(df)
        except ArgumentError as err:
            raise ArgumentError(f"noise {value!r}: {err}", argument="noise") from None
    if name == "student_t":
        raise ArgumentError(
            f"noise 'student_t' needs its degrees of freedom: use jaxbandit.noise.student_t(df=...), got {value!r}.",
            argument="noise",
        )
    raise ArgumentError(expected, argument="noise")


def sample(family: NoiseFamily, run_key: Array, t: Array, mean: Array, scale: Array) -> Array:
    """The samples one play reveals at round ``t`` (0-based).

    Args:
        family: the noise family (static).
        run_key: ``(2,)`` uint32 noise key of the run.
        t: scalar round index.
        mean: ``(num_arms,)`` ``mu_j`` where the play reveals arm ``j``, else 0.
        scale: ``(num_arms,)`` ``sigma[i, j]`` where it reveals ``j``, else 0.

    Returns:
        ``(num_arms,)`` samples; 0 where the play reveals nothing.
    """
    num_arms, dtype = mean.shape[-1], mean.dtype.type
    if family.name == "gaussian":
        return mean + scale * rng.standard_normal(run_key, t, num_arms, dtype)
    if family.name == "student_t":
        draw = rng.student_t(run_key, t, num_arms, family.df, dtype) * dtype(math.sqrt((family.df - 2) / family.df))
        return mean + scale * draw
    u = rng.uniform(run_key, t, num_arms, dtype)  # in (0, 1]
    if family.name == "bernoulli":
        # P(u <= mu) = mu; an arm the play does not reveal has mean 0 here, and u > 0.
        return (u <= mean).astype(dtype)
    if family.name == "uniform":
        return mean + scale * ((2 * u - 1) * dtype(math.sqrt(3)))
    if family.name == "rademacher":
        return mean + scale * jnp.where(u > dtype(0.5), dtype(1), dtype(-1))
    raise ValueError(f"unknown noise family {family!r}")
