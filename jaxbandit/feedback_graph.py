"""A feedback graph given as a graph object, read as the means and the side-information
matrix of :func:`jaxbandit.instances.from_networkx`.

The object is read through networkx's interface (``nodes``, ``edges(data=True)``,
``is_directed()``), not through networkx itself: the core does not import it, and any
object with those methods is a graph here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from jaxbandit._numbers import ArgumentError, boolean, check_nonnegative, float_array

__all__ = ["read"]


def read(graph, mu, sigma, self_loops) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, sigma)``: ``(K,)`` means and ``(K, K)`` noise levels of the arms
    ``list(graph.nodes)``, in that order (see :func:`jaxbandit.instances.from_networkx`).

    Raises:
        ArgumentError: naming the argument, and the node or edge at fault.
    """
    try:
        nodes = list(graph.nodes)
        directed = bool(graph.is_directed())
        edges = list(graph.edges(data=True))
    except (AttributeError, TypeError):
        raise ArgumentError(
            f"graph must be a networkx graph (nodes, edges(data=True), is_directed()), got {type(graph).__name__}; "
            "for an adjacency matrix use jaxbandit.instances.graph.",
            argument="graph",
        ) from None
    if not nodes:
        raise ArgumentError(
            "graph has no nodes; every node is an arm, and an instance needs at least 2.", argument="graph"
        )
    boolean("self_loops", self_loops)
    default = check_nonnegative("sigma", sigma)  # 0: a noise-free sample, as in Instance
    means = _means(mu, nodes)
    index = {node: i for i, node in enumerate(nodes)}
    matrix = np.full((len(nodes), len(nodes)), np.inf)
    arrow = "->" if directed else "--"
    given = set()  # the (played, observed) pairs an edge sets
    for u, v, data in edges:
        edge = f"edge {u!r} {arrow} {v!r}"
        level = default
        if "sigma" in data:
            try:
                level = check_nonnegative(f"sigma of {edge}", data["sigma"])
            except ArgumentError as err:
                raise ArgumentError(str(err), argument="graph") from None
        for a, b in ((u, v),) if directed else ((u, v), (v, u)):
            i, j = index[a], index[b]
            if (i, j) in given and matrix[i, j] != level:
                raise ArgumentError(
                    f"parallel edges {a!r} {arrow} {b!r} have different sigmas, {float(matrix[i, j])!r} and {level!r}; a play of "
                    f"{a!r} reveals {b!r} once, at one noise level: keep one of the edges, or give them one sigma.",
                    argument="graph")  # fmt: skip
            matrix[i, j] = level
            given.add((i, j))
    if self_loops:
        for i in range(len(nodes)):
            if (i, i) not in given:
                matrix[i, i] = default
    unobserved = np.flatnonzero(np.all(np.isinf(matrix), axis=0))
    if unobserved.size:
        raise ArgumentError(
            f"node {nodes[unobserved[0]]!r} is observed by no arm (no edge leads to it, and self_loops is False), so "
            "its mean can never be estimated; add an edge into it, or use self_loops=True.",
            argument="graph",
        )
    return means, matrix


def _means(mu, nodes: list) -> np.ndarray:
    """``mu`` in node order: a sequence in that order, or a mapping node -> mean."""
    if isinstance(mu, Mapping):
        missing = [node for node in nodes if node not in mu]
        if missing:
            raise ArgumentError(f"mu gives no mean for node {missing[0]!r}; give one for every node.", argument="mu")
        if len(mu) != len(nodes):
            other = next(key for key in mu if key not in set(nodes))
            raise ArgumentError(f"mu gives a mean for {other!r}, which is not a node of the graph.", argument="mu")
        mu = [mu[node] for node in nodes]
    means = float_array("mu", mu, "a number for each node (in list(graph.nodes) order) or a mapping node -> mean")
    if means.shape != (len(nodes),):
        raise ArgumentError(
            f"mu must hold one mean for each of the graph's {len(nodes)} nodes (in list(graph.nodes) order), "
            f"got shape {means.shape}.",
            argument="mu",
        )
    return means
