"""Problem instances: true means ``mu`` and the side-information matrix ``sigma``.

``sigma[i, j]`` is the noise standard deviation of the sample of arm ``j`` revealed
when arm ``i`` is played (row = arm played, column = arm observed, as in the paper).
``inf`` means "no information", ``0`` a noise-free observation.  The precision matrix
``W = 1 / sigma**2`` (with ``1 / inf = 0`` and ``1 / 0 = inf``) is what algorithms use.

An :class:`Instance` may also hold a *batch* of instances with the same number of
arms: ``mu`` of shape ``(num_instances, K)`` and ``sigma`` of shape
``(num_instances, K, K)``.  Validation happens once, here, on the host.

Every instance has a noise family (:mod:`jaxbandit.noise`, ``noise=``, default
``"gaussian"``); a batch has one.  Under ``"bernoulli"`` the means are probabilities and
every finite ``sigma`` at least 1/2; ``sigma`` keeps its meaning of the scale the
policies assume, and ``inf`` still means "no information".
"""

from __future__ import annotations

import math
import reprlib

import numpy as np

from jaxbandit._numbers import ArgumentError, boolean, check_nonnegative, first_entry, float_array, integer
from jaxbandit._numbers import is_real, not_a_number, number
from jaxbandit._types import ArrayLike
from jaxbandit.feedback_graph import read as read_graph
from jaxbandit.noise import BERNOULLI_MIN_SIGMA, GAUSSIAN, NoiseFamily
from jaxbandit.noise import resolve as resolve_noise
from jaxbandit.representable import check_precisions

__all__ = [
    "Instance",
    "bandit",
    "check_instance",
    "check_unique_best",
    "default_instances",
    "explicit",
    "from_networkx",
    "full_information",
    "graph",
    "random",
    "revealing_arm",
    "stack",
]


class Instance:
    """A validated bandit instance (or a batch of them, leading axis). Immutable.

    Attributes:
        mu: ``(K,)`` or ``(num_instances, K)`` float64 true means.
        sigma: ``(K, K)`` or ``(num_instances, K, K)`` float64 noise levels, ``>= 0``,
            ``inf`` allowed.
        noise: the :class:`~jaxbandit.noise.NoiseFamily` (``noise=`` takes a name such
            as ``"bernoulli"`` or a family such as ``jaxbandit.noise.student_t(df=3)``).
    """

    __slots__ = ("mu", "sigma", "noise")
    mu: np.ndarray
    sigma: np.ndarray
    noise: NoiseFamily

    def __init__(self, mu: ArrayLike, sigma: ArrayLike, *, allow_ties: bool = True, noise="gaussian"):
        family = resolve_noise(noise)
        mu_arr, sigma_arr = _validate(mu, sigma, family, allow_ties=boolean("allow_ties", allow_ties))
        object.__setattr__(self, "mu", mu_arr)
        object.__setattr__(self, "sigma", sigma_arr)
        object.__setattr__(self, "noise", family)

    def __setattr__(self, name, value):
        raise AttributeError("Instance is immutable; build a new one.")

    def __reduce__(self):  # pickle and copy: built again from its values
        return (_rebuilt, (self.mu, self.sigma, self.noise))

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Instance)
            and np.array_equal(self.mu, other.mu)
            and np.array_equal(self.sigma, other.sigma)
            and self.noise == other.noise
        )

    # -- derived quantities (host-side numpy) ---------------------------------------
    @property
    def num_arms(self) -> int:
        return int(self.mu.shape[-1])

    @property
    def is_batch(self) -> bool:
        return self.mu.ndim == 2

    @property
    def num_instances(self) -> int:
        return int(self.mu.shape[0]) if self.is_batch else 1

    @property
    def precision(self) -> np.ndarray:
        """``W = 1 / sigma**2`` with ``1/inf = 0`` and ``1/0 = inf``; same shape as sigma."""
        with np.errstate(divide="ignore"):
            return 1.0 / np.square(self.sigma)

    @property
    def best_arm(self) -> np.ndarray:
        """Smallest index among the maximisers of ``mu``: ``()`` or ``(num_instances,)``."""
        return np.argmax(self.mu, axis=-1)

    @property
    def gaps(self) -> np.ndarray:
        """``Delta_i = max(mu) - mu_i``, same shape as ``mu``."""
        return np.max(self.mu, axis=-1, keepdims=True) - self.mu

    def __getitem__(self, index) -> Instance:
        """``batch[k]`` is the k-th instance of a batch (``-num_instances <= k <
        num_instances``)."""
        if not self.is_batch:
            raise IndexError("a single Instance cannot be indexed; it is not a batch")
        k = integer("index", index, -self.num_instances, self.num_instances - 1, f" (a batch of {self.num_instances})")
        return Instance(self.mu[k], self.sigma[k], noise=self.noise)

    def __iter__(self):
        """A batch's instances in turn (``num_instances`` of them)."""
        if not self.is_batch:
            raise TypeError("a single Instance cannot be iterated; it is not a batch")
        return (self[k] for k in range(self.num_instances))

    def __repr__(self) -> str:
        kind = f"batch of {self.num_instances}" if self.is_batch else "single"
        noise = "" if self.noise == GAUSSIAN else f", noise={self.noise.label!r}"
        return f"Instance({kind}, K={self.num_arms}, mu={self.mu!r}{noise})"


def _rebuilt(mu: np.ndarray, sigma: np.ndarray, noise: NoiseFamily) -> Instance:
    return Instance(mu, sigma, noise=noise)


def _validate(mu: ArrayLike, sigma: ArrayLike, family: NoiseFamily, *, allow_ties: bool):
    mu_arr = float_array("mu", mu, "a numeric array")
    sigma_arr = float_array("sigma", sigma, "a numeric array")

    if mu_arr.ndim not in (1, 2):
        raise ArgumentError(
            f"mu must have shape (K,) or (num_instances, K), got shape {mu_arr.shape}.", argument="mu")
    if mu_arr.ndim == 2 and mu_arr.shape[0] == 0:
        raise ArgumentError(f"mu must hold at least one instance, got an empty batch of shape {mu_arr.shape}.", argument="mu")
    num_arms = mu_arr.shape[-1]
    if num_arms < 2:
        raise ArgumentError(
            f"mu must have at least K=2 arms on its last axis ((K,), or (num_instances, K) for a batch), "
            f"got shape {mu_arr.shape}.", argument="mu")  # fmt: skip
    expected = mu_arr.shape + (num_arms,)
    if sigma_arr.shape != expected:
        raise ArgumentError(
            f"sigma must have shape {expected} to match mu of shape {mu_arr.shape}, "
            f"got shape {sigma_arr.shape}.", argument="sigma")
    if not np.all(np.isfinite(mu_arr)):
        bad = mu_arr[~np.isfinite(mu_arr)]
        raise ArgumentError(f"mu must be finite, got non-finite entries {bad.tolist()} in mu={mu_arr.tolist()}.", argument="mu")
    if entry := first_entry("sigma", sigma_arr, np.isnan(sigma_arr), indexed=True):
        raise ArgumentError(f"sigma must not contain NaN, got {entry}.", argument="sigma")
    if entry := first_entry("sigma", sigma_arr, sigma_arr < 0, indexed=True):
        raise ArgumentError(f"sigma must be >= 0 (inf allowed), got {entry}.", argument="sigma")
    check_precisions(sigma_arr, np.float64, name="sigma", indexed=True)
    unobserved = np.all(np.isinf(sigma_arr), axis=-2)  # column all inf
    if np.any(unobserved):
        where = np.argwhere(unobserved)[0].tolist()
        arm = where[-1]
        prefix = f"instance {where[0]}: " if mu_arr.ndim == 2 else ""
        raise ArgumentError(
            f"{prefix}arm {arm} is observed by no row of sigma (sigma[:, {arm}] is all inf), "
            "so its mean can never be estimated.", argument="sigma")
    if family.name == "bernoulli":
        _bernoulli_means("mu", mu_arr)
        _bernoulli_sigmas("sigma", sigma_arr)
    if not allow_ties:
        check_unique_best(mu_arr)
    mu_arr.setflags(write=False)
    sigma_arr.setflags(write=False)
    return mu_arr, sigma_arr


def _bernoulli_means(name: str, mu: np.ndarray) -> None:
    """Bernoulli means are probabilities: in ``[0, 1]`` (``mu`` an array or a 0-d
    array for a scalar, given as the argument ``name``)."""
    if entry := first_entry(name, mu, (mu < 0) | (mu > 1), indexed=mu.ndim > 0):
        raise ArgumentError(
            f"{entry}: under Bernoulli noise a mean is the probability of a 1, so it must lie in [0, 1].",
            argument=name)


def _bernoulli_sigmas(name: str, sigma: np.ndarray) -> None:
    """A finite Bernoulli ``sigma`` (the scale the policies assume) is one that every
    ``[0, 1]`` sample satisfies: at least 1/2."""
    if entry := first_entry(name, sigma, np.isfinite(sigma) & (sigma < BERNOULLI_MIN_SIGMA), indexed=sigma.ndim > 0):
        raise ArgumentError(
            f"{entry} is below 1/2: under Bernoulli noise sigma is the "
            "sub-Gaussian scale the policies assume, and a [0, 1] sample is sub-Gaussian with scale 1/2 (variance "
            "proxy 1/4, Hoeffding's lemma) but with no smaller one for every mean (a fair coin); use sigma >= 1/2, "
            "and inf where a play reveals nothing.", argument=name)


def check_unique_best(mu: np.ndarray) -> None:
    """Raise if an instance's best mean is shared by several arms: the best arm ``i*``,
    the regret lower bound and the LP policies' allocations are then undefined.

    Args:
        mu: ``(K,)`` or ``(C, K)`` means.
    """
    mu = np.atleast_2d(mu)
    tied = mu == mu.max(axis=-1, keepdims=True)
    shared = np.flatnonzero(tied.sum(axis=-1) > 1)
    if shared.size:
        cell = int(shared[0])
        where = f"instance {cell}: " if len(mu) > 1 else ""
        raise ArgumentError(
            f"{where}mu has a tie for the best mean: arms {np.flatnonzero(tied[cell]).tolist()} at "
            f"{float(mu[cell].max())!r}, so the regret lower bound and the LP policies' allocations are undefined; "
            "make one of them larger.",
            argument="mu",
        )


_LOG10_SIGMA_LIMIT = 150  # 1e150**2 and 1e-150**2 are still normal float64 numbers


def _interval(name: str, value) -> tuple:
    """``(low, high)`` as floats; a string is refused (it would be read character by
    character: ``"05"`` as ``(0.0, 5.0)``)."""
    try:
        low, high = value
        if not_a_number(value):
            raise ValueError
        low, high = number(name, low), number(name, high)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name} must be two numbers (low, high), got {value!r}.", argument=name) from None
    if not low <= high:  # NaN included
        raise ArgumentError(f"{name} must be two numbers with low <= high, got {value!r}.", argument=name)
    if not math.isfinite(high - low):  # numpy draws uniformly only over a finite width
        raise ArgumentError(f"{name} must be two finite numbers a finite distance apart, got {value!r}.", argument=name)
    return low, high


def _as_means(mu: ArrayLike) -> np.ndarray:
    mu_arr = float_array("mu", mu, "a list of K numbers")
    if mu_arr.ndim != 1:
        raise ArgumentError(f"mu must have shape (K,), got shape {mu_arr.shape}.", argument="mu")
    return mu_arr


def explicit(mu: ArrayLike, sigma: ArrayLike, *, noise="gaussian") -> Instance:
    """The instance of ``mu`` and ``sigma`` as a user writes them down (a configuration,
    an instance file, the command line): ``sigma`` a ``(K, K)`` matrix, or one number for
    a standard bandit's (:func:`bandit`)."""
    # not np.ndim, which raises numpy's own error for a ragged list
    one_number = not isinstance(sigma, (list, tuple)) and getattr(sigma, "ndim", 0) == 0
    if one_number:  # its error names what explicit takes, not bandit's (K,) vector
        float_array("sigma", sigma, "one number or a (K, K) matrix of numbers")
    return (bandit if one_number else Instance)(mu, sigma, noise=noise)


def bandit(mu: ArrayLike, sigma: ArrayLike = 1.0, *, noise="gaussian") -> Instance:
    """Standard bandit: arm ``i`` reveals only itself, with noise ``sigma`` (scalar or (K,))
    of the family ``noise`` (:mod:`jaxbandit.noise`), as in every constructor here."""
    mu_arr = _as_means(mu)
    k = mu_arr.shape[0]
    diag = float_array("sigma", sigma, f"a number or {k} numbers")
    if diag.shape not in ((), (k,)):
        raise ArgumentError(
            f"sigma must be a number or have shape ({k},) for the {k} arms, got shape {diag.shape}.", argument="sigma"
        )
    matrix = np.full((k, k), np.inf)
    np.fill_diagonal(matrix, diag)  # a scalar fills the whole diagonal
    return Instance(mu_arr, matrix, noise=noise)


def full_information(mu: ArrayLike, sigma: float = 1.0, *, noise="gaussian") -> Instance:
    """Full information: every play reveals every arm with noise ``sigma``."""
    mu_arr = _as_means(mu)
    k = mu_arr.shape[0]
    return Instance(mu_arr, np.full((k, k), number("sigma", sigma)), noise=noise)


def graph(mu: ArrayLike, adjacency: ArrayLike, sigma: float = 1.0, *, noise="gaussian") -> Instance:
    """Graph feedback: playing ``i`` reveals ``i`` and every ``j`` with ``adjacency[i, j]``.

    Args:
        mu: ``(K,)`` means.
        adjacency: ``(K, K)`` boolean (or 0/1) directed adjacency; self-loops are implied.
        sigma: noise level of every revealed sample.
    """
    mu_arr = _as_means(mu)
    k = mu_arr.shape[0]
    try:
        entries = np.array(adjacency, dtype=object)
    except ValueError:  # ragged rows
        entries = np.empty(0, dtype=object)
    if entries.shape != (k, k):
        raise ArgumentError(f"adjacency must be a {k} x {k} array (rows of equal length), got {adjacency!r}.", argument="adjacency")
    bad = [v for v in entries.ravel() if not (isinstance(v, (bool, np.bool_)) or (is_real(v) and v in (0, 1)))]
    if bad:
        raise ArgumentError(f"adjacency must be booleans or 0/1, got {bad[0]!r}.", argument="adjacency")
    adj = entries.astype(bool) | np.eye(k, dtype=bool)
    return Instance(mu_arr, np.where(adj, number("sigma", sigma), np.inf), noise=noise)


def from_networkx(graph, mu, sigma: float = 1.0, self_loops: bool = True, *, noise="gaussian") -> Instance:
    """Graph feedback from a graph object (a networkx ``Graph``, ``DiGraph`` or their
    multigraphs; networkx itself is not needed here).

    The arms are ``list(graph.nodes)``, in that order.  An edge ``u -> v`` means that
    playing ``u`` reveals ``v`` (both ways for an undirected graph), with noise the
    edge's ``sigma`` attribute if it has one, else ``sigma``.  Parallel edges of a
    multigraph must agree on their sigma.

    Args:
        graph: the feedback graph.
        mu: ``(K,)`` means in node order, or a mapping node -> mean.
        sigma: noise level of an edge without a ``sigma`` attribute, and of the
            self-loops added.
        self_loops: every arm also reveals itself (at ``sigma``) where the graph has no
            loop; if False, every node needs an edge into it.
    """
    mu_arr, matrix = read_graph(graph, mu, sigma, self_loops)
    return Instance(mu_arr, matrix, noise=noise)


def revealing_arm(
    mu: ArrayLike = (1.0, 0.8, 0.6, 0.4),
    reveal_mean: float = 0.0,
    sigma: float = 1.0,
    reveal_sigma: float | None = None,
    *,
    noise="gaussian",
) -> Instance:
    """The paper's §1 example: ``K-1`` bandit arms plus one "information-revealing" arm.

    The last arm has mean ``reveal_mean`` (low reward) and, when played, reveals every
    arm with noise ``reveal_sigma`` (default ``sigma``); the others reveal only themselves.
    Its own reward is observed with that noise too (the paper's example has a
    deterministic reward; give ``sigma[-1, -1] = 0`` through :class:`Instance` for that).

    Args:
        mu: ``(K-1,)`` means of the ordinary bandit arms.
    """
    mu_arr = _as_means(mu)
    if mu_arr.size == 0:
        raise ArgumentError("mu must hold the means of at least one ordinary arm (K - 1 >= 1), got [].", argument="mu")
    k = mu_arr.shape[0] + 1
    sigma = check_nonnegative("sigma", sigma)
    reveal_sigma = sigma if reveal_sigma is None else check_nonnegative("reveal_sigma", reveal_sigma)
    reveal_mean = number("reveal_mean", reveal_mean)
    if not math.isfinite(reveal_mean):
        raise ArgumentError(f"reveal_mean must be finite, got {reveal_mean!r}.", argument="reveal_mean")
    if resolve_noise(noise).name == "bernoulli":  # the revealing arm's values, named as given
        _bernoulli_means("reveal_mean", np.array(reveal_mean))
        _bernoulli_sigmas("sigma", np.array(sigma))
        _bernoulli_sigmas("reveal_sigma", np.array(reveal_sigma))
    matrix = np.full((k, k), np.inf)
    np.fill_diagonal(matrix, sigma)
    matrix[-1, :] = reveal_sigma
    return Instance(np.append(mu_arr, reveal_mean), matrix, noise=noise)


def random(
    seed: int | np.random.Generator,
    num_arms: int,
    *,
    mean_range: tuple[float, float] = (0.0, 1.0),
    log10_sigma_range: tuple[float, float] = (-0.5, 0.5),
    inf_prob: float = 0.3,
    num_instances: int | None = None,
    noise="gaussian",
) -> Instance:
    """Random general side-information instances (asymmetric, with ``inf`` entries).

    Entries are ``10**U(log10_sigma_range)``; off-diagonal entries are ``inf`` with
    probability ``inf_prob``; the diagonal is always finite, so every arm is observable.
    ``sigma[j, i] < sigma[i, i]`` occurs freely.  Means are uniform in ``mean_range``.
    Under Bernoulli noise ``mean_range`` must lie in ``[0, 1]`` and ``log10_sigma_range``
    start at ``log10(1/2)`` or above.

    Args:
        seed: integer seed or a ``numpy.random.Generator`` (host-side randomness).
        num_arms: K >= 2.
        num_instances: if given (>= 1), a batch ``(num_instances, K)`` is returned.
    """
    k = integer("num_arms", num_arms, 2)
    inf_prob = number("inf_prob", inf_prob)
    if not 0.0 <= inf_prob < 1.0:
        raise ArgumentError(f"inf_prob must be in [0, 1), got {inf_prob}.", argument="inf_prob")
    mean_range = _interval("mean_range", mean_range)
    given = log10_sigma_range
    log10_sigma_range = _interval("log10_sigma_range", log10_sigma_range)
    family = resolve_noise(noise)
    if family.name == "bernoulli":
        _bernoulli_means("mean_range", np.array(mean_range))
        if 10.0 ** log10_sigma_range[0] < BERNOULLI_MIN_SIGMA:
            raise ArgumentError(
                f"log10_sigma_range {log10_sigma_range!r} reaches sigma = {10.0 ** log10_sigma_range[0]!r}, below the "
                "1/2 that Bernoulli noise needs (the sub-Gaussian scale of a [0, 1] sample); start it at "
                "np.log10(0.5) or above.", argument="log10_sigma_range")
    shape = () if num_instances is None else (integer("num_instances", num_instances, 1),)
    if max(abs(x) for x in log10_sigma_range) > _LOG10_SIGMA_LIMIT:
        raise ArgumentError(
            f"log10_sigma_range must lie in [-{_LOG10_SIGMA_LIMIT}, {_LOG10_SIGMA_LIMIT}] (sigma and its precision "
            f"1 / sigma**2 finite and nonzero), got {given!r}.",
            argument="log10_sigma_range",
        )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(integer("seed", seed, 0))
    try:
        mu = rng.uniform(*mean_range, size=shape + (k,))
        sigma = 10.0 ** rng.uniform(*log10_sigma_range, size=shape + (k, k))
        unseen = rng.uniform(size=shape + (k, k)) < inf_prob
    except (ValueError, MemoryError) as err:  # numpy's "maximum allowed dimension exceeded", or no memory
        raise MemoryError(f"num_arms = {k} with num_instances = {num_instances} is too large to build ({err})") from None
    sigma = np.where(unseen & ~np.eye(k, dtype=bool), np.inf, sigma)
    return Instance(mu, sigma, noise=family)


def check_instance(name: str, value) -> Instance:
    """``value`` if it is an :class:`Instance`, else an :class:`ArgumentError` naming ``name``."""
    if not isinstance(value, Instance):
        shown = reprlib.repr(value)  # a long list shortened
        batch = " (for a batch, jaxbandit.instances.stack them into one)" if isinstance(value, (list, tuple)) else ""
        raise ArgumentError(
            f"{name} must be a jaxbandit.Instance{batch}, got {type(value).__name__} {shown}.", argument=name
        )
    return value


def stack(instances: list[Instance]) -> Instance:
    """Stack single instances with the same K into a batch (leading axis)."""
    if isinstance(instances, Instance):
        raise ArgumentError(f"stack takes a list of instances, got one: {instances!r}.", argument="instances")
    instances = list(instances)  # a generator is read once
    if not instances:
        raise ArgumentError("instances must be a non-empty list, got [].", argument="instances")
    for i, inst in enumerate(instances):
        check_instance(f"instances[{i}]", inst)
    batch = next((i for i, inst in enumerate(instances) if inst.is_batch), None)
    if batch is not None:
        raise ArgumentError(
            f"stack needs single instances; instances[{batch}] is a batch of {instances[batch].num_instances} "
            f"(pass its instances, instances[{batch}][k] for each k).",
            argument="instances",
        )
    sizes = {inst.num_arms for inst in instances}
    if len(sizes) != 1:
        raise ArgumentError(f"stack needs single instances with equal K, got K in {sorted(sizes)}.", argument="instances")
    families = list(dict.fromkeys(inst.noise for inst in instances))
    if len(families) > 1:  # one compiled program draws the whole batch's noise
        first = next(i for i, inst in enumerate(instances) if inst.noise == families[1])
        raise ArgumentError(
            f"stack needs instances of one noise family: instances[0] has noise {families[0].label!r}, "
            f"instances[{first}] {families[1].label!r}.",
            argument="instances",
        )
    return Instance(np.stack([i.mu for i in instances]), np.stack([i.sigma for i in instances]), noise=families[0])


def default_instances() -> dict[str, Instance]:
    """The built-in instances used by the demo and the studies (K = 5 each)."""
    mu = np.array([1.0, 0.8, 0.7, 0.5, 0.2])
    star = np.zeros((5, 5), dtype=bool)
    star[0, :] = True  # arm 0 is a hub that observes all arms
    return {
        "bandit": bandit(mu, 1.0),
        "full_information": full_information(mu, 1.0),
        "graph_star": graph(mu[::-1].copy(), star, 1.0),
        "revealing_arm": revealing_arm(mu[:4], reveal_mean=0.0, sigma=1.0),
        "general": random(7, 5),
    }

