"""Policy registry: ``make(name, **params)`` builds a :class:`~jaxbandit.base.Policy`."""

from __future__ import annotations

import inspect
from typing import Callable

from jaxbandit.base import Policy
from jaxbandit.policies.greedy import eps_greedy, greedy
from jaxbandit.policies.lp_baselines import eps_greedy_lp, ucb_lp
from jaxbandit.policies.lp_explore import lp_explore
from jaxbandit.policies.oracle_etc import oracle_etc
from jaxbandit.policies.thompson import ts, ts_n
from jaxbandit.policies.ucb import ucb, ucb_n
from jaxbandit.policies.ucb_maxn import ucb_maxn

__all__ = ["make", "names", "register", "REGISTRY"]

REGISTRY: dict[str, Callable[..., Policy]] = {
    "greedy": greedy,
    "eps_greedy": eps_greedy,
    "ucb": ucb,
    "ucb_n": ucb_n,
    "ts": ts,
    "ts_n": ts_n,
    "ucb_maxn": ucb_maxn,
    "eps_greedy_lp": eps_greedy_lp,
    "ucb_lp": ucb_lp,
    "oracle_etc": oracle_etc,
    "lp_explore": lp_explore,
}


def register(name: str, factory: Callable[..., Policy]) -> None:
    """Add a policy factory to the registry (used by policy modules)."""
    REGISTRY[name] = factory


def names() -> list[str]:
    """Registered policy names."""
    return sorted(REGISTRY)


def make(name: str, **params) -> Policy:
    """Build a registered policy.

    Raises:
        ValueError: unknown ``name``, or a parameter the policy does not take or rejects.
    """
    if name not in REGISTRY:
        raise ValueError(f"unknown policy name {name!r}; known policies: {', '.join(names())}.")
    factory = REGISTRY[name]
    accepted = inspect.signature(factory).parameters
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(
            f"policy {name!r} got unknown parameter(s) {unknown}; it accepts {sorted(accepted) or 'none'}."
        )
    return factory(**params)
