"""Policies: the registry, and the helpers for writing one of your own.

``make(name, **params)`` builds a registered :class:`~jaxbandit.base.Policy`; ``name`` may
also be an import path ``"package.module:factory"`` naming a factory of your own.
``register(name, factory)`` adds one to the registry.  A factory is any callable that
takes the hyper-parameters as keyword arguments and returns a ``Policy``.

Helpers for authors (see README, "Writing your own policy"): :func:`play` (a decision
that needs no solve), :mod:`jaxbandit.estimator` (the weighted estimator of the
paper's eq. (1): ``init``, ``update``, ``mean``, ``weighted_counts``, ``consolidate``),
:mod:`jaxbandit.rng` (counter-based random numbers: ``uniform``, ``standard_normal``),
:func:`initial_side_arm` (the paper's initial rounds).
"""

from __future__ import annotations

import importlib
from typing import Callable

from jaxbandit._numbers import ArgumentError, check_keywords
from jaxbandit.base import Policy, play
from jaxbandit.policies import greedy, lp_baselines, lp_explore, oracle_etc, ossb, thompson, ucb, ucb_maxn
from jaxbandit.policies._common import initial_side_arm
from jaxbandit.policy_check import check_policy_fields

__all__ = ["REGISTRY", "initial_side_arm", "make", "names", "play", "register", "resolve"]

# Modules and their factories share names (ucb.ucb): the package's attributes are the
# modules, the registry holds the factories.
REGISTRY: dict[str, Callable[..., Policy]] = {
    "greedy": greedy.greedy,
    "eps_greedy": greedy.eps_greedy,
    "ucb": ucb.ucb,
    "ucb_n": ucb.ucb_n,
    "ts": thompson.ts,
    "ts_n": thompson.ts_n,
    "ucb_maxn": ucb_maxn.ucb_maxn,
    "eps_greedy_lp": lp_baselines.eps_greedy_lp,
    "ucb_lp": lp_baselines.ucb_lp,
    "oracle_etc": oracle_etc.oracle_etc,
    "lp_explore": lp_explore.lp_explore,
    "ossb": ossb.ossb,
}


def register(name: str, factory: Callable[..., Policy], *, replace: bool = False) -> None:
    """Add ``factory`` to the registry under ``name``.

    A name already registered to another factory (a built-in one included) is refused
    unless ``replace``: replacing it silently would run another policy under a name the
    results record.  Registering the same factory again changes nothing.

    Raises:
        ArgumentError (a ValueError): ``name`` is not a non-empty string without
            ``":"`` (which marks an import path), ``factory`` is not callable, or
            ``name`` is taken by another factory and ``replace`` is False.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ArgumentError(f"a policy name must be a non-empty string without ':', got {name!r}.", argument="name")
    if not callable(factory):
        raise ArgumentError(f"factory for policy {name!r} must be callable, got {factory!r}.", argument="factory")
    if name in REGISTRY and REGISTRY[name] is not factory and not replace:
        raise ArgumentError(
            f"policy name {name!r} is already registered (to {REGISTRY[name]!r}); choose another name, "
            "or pass replace=True to replace it.",
            argument="name",
        )
    REGISTRY[name] = factory


def names() -> list[str]:
    """Registered policy names."""
    return sorted(REGISTRY)


def resolve(name: str) -> Callable[..., Policy]:
    """The factory of a registered ``name``, or of an import path ``"module:attribute"``.

    Raises:
        ArgumentError (a ValueError, naming ``name``): unknown name, a module that
            cannot be imported (or fails as it is), or an attribute that is missing or
            not callable.
    """
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"a policy name must be a non-empty string, got {name!r}.", argument="name")
    if ":" not in name:
        if name not in REGISTRY:
            raise ArgumentError(
                f"unknown policy name {name!r}; known policies: {', '.join(names())} "
                "(or give an import path 'package.module:factory').",
                argument="name",
            )
        return REGISTRY[name]
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # not found, an empty name, or the module's own code failing
        raise ArgumentError(f"policy {name!r}: cannot import module {module_name!r} ({type(err).__name__}: {err}).", argument="name") from err
    found = module
    for part in attribute.split("."):
        if not part or not hasattr(found, part):
            raise ArgumentError(f"policy {name!r}: module {module_name!r} has no attribute {attribute!r}.", argument="name")
        found = getattr(found, part)
    if not callable(found) or isinstance(found, Policy):
        raise ArgumentError(
            f"policy {name!r}: {attribute!r} must be a factory (a function returning a jaxbandit.Policy), got {found!r}.",
            argument="name",
        )
    return found


def make(name: str, **params) -> Policy:
    """Build the policy ``name`` (registered, or an import path) with ``params``.

    Raises:
        ArgumentError (a ValueError): unknown ``name``, a parameter the factory does
            not take or rejects, a factory that fails otherwise (its error's type and
            message given), or one that does not return a
            :class:`~jaxbandit.base.Policy`.
    """
    build = resolve(name)
    check_keywords(f"policy {name!r}", build, params)
    try:
        policy = build(**params)
    except ValueError:  # the factory refuses a value: its message names it
        raise
    except Exception as err:  # not a factory of keyword arguments, or its own code failing
        raise ArgumentError(f"policy {name!r}: calling {build!r} with {params} failed ({type(err).__name__}: {err}).", argument="name") from err
    if not isinstance(policy, Policy):
        raise ArgumentError(f"policy {name!r}: the factory returned {type(policy).__name__}, not a jaxbandit.Policy.", argument="name")
    check_policy_fields(policy)
    return policy
