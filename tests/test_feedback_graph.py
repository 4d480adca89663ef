"""Instances from graph objects (:func:`jaxbandit.instances.from_networkx`, read by
:mod:`jaxbandit.feedback_graph`): the graph instance of the same adjacency, edge sigmas,
errors naming the node or edge, and random graphs that round-trip."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxbandit as jb
from jaxbandit import instances

nx = pytest.importorskip("networkx")  # the analysis extra, which the test extra pulls

INF = math.inf


def _adjacency(graph) -> np.ndarray:
    return nx.to_numpy_array(graph, nodelist=list(graph.nodes)) != 0


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_random_graph_is_the_graph_instance_of_its_adjacency(directed, seed):
    graph = nx.gnp_random_graph(7, 0.3, seed=seed, directed=directed)
    mu = np.random.default_rng(seed).uniform(size=7)
    built = instances.from_networkx(graph, mu, sigma=0.5)
    assert built == instances.graph(mu, _adjacency(graph), 0.5)
    if not directed:
        np.testing.assert_array_equal(built.sigma, built.sigma.T)  # an undirected edge reveals both ways


def test_arms_follow_the_node_order_and_mu_may_be_a_mapping():
    graph = nx.DiGraph()
    graph.add_nodes_from(["c", "a", "b"])
    graph.add_edge("c", "b")
    mu = {"a": 0.5, "b": 0.25, "c": 1.0}
    built = instances.from_networkx(graph, mu)
    assert built == instances.from_networkx(graph, [1.0, 0.5, 0.25])
    np.testing.assert_array_equal(built.mu, [1.0, 0.5, 0.25])
    np.testing.assert_array_equal(built.sigma, [[1, INF, 1], [INF, 1, INF], [INF, INF, 1]])
    assert instances.from_networkx(graph, mu, noise="bernoulli").noise == jb.noise.bernoulli()


def test_edge_sigmas_self_loops_and_parallel_edges():
    graph = nx.DiGraph()
    graph.add_edge(0, 1, sigma=2.0)
    graph.add_edge(1, 0)
    graph.add_edge(1, 1, sigma=0.5)  # a loop of its own is kept
    graph.add_edge(2, 1, sigma=3)
    np.testing.assert_array_equal(
        instances.from_networkx(graph, [1.0, 0.5, 0.25], sigma=1.5).sigma,
        [[1.5, 2.0, INF], [1.5, 0.5, INF], [INF, 3.0, 1.5]],
    )
    undirected = nx.Graph([(0, 1, {"sigma": 2.0})])
    np.testing.assert_array_equal(instances.from_networkx(undirected, [1.0, 0.5]).sigma, [[1, 2], [2, 1]])
    loops = nx.DiGraph([(0, 0), (0, 1), (1, 1, {"sigma": 4.0})])
    np.testing.assert_array_equal(
        instances.from_networkx(loops, [1.0, 0.5], self_loops=False).sigma, [[1, 1], [INF, 4]]
    )
    # sigma 0, an edge's or the default: a noise-free sample, as in graph() and Instance
    exact = instances.from_networkx(nx.DiGraph([(0, 1, {"sigma": 0.0})]), [1.0, 0.5], sigma=0)
    np.testing.assert_array_equal(exact.sigma, [[0, 0], [INF, 0]])
    assert exact == instances.graph([1.0, 0.5], [[True, True], [False, True]], sigma=0)
    parallel = nx.MultiDiGraph([(0, 1, {"sigma": 2.0}), (0, 1, {"sigma": 2.0})])
    np.testing.assert_array_equal(instances.from_networkx(parallel, [1.0, 0.5]).sigma, [[1, 2], [INF, 1]])


def _digraph(*edges, nodes=()):
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from(edges)
    return graph


@pytest.mark.parametrize(
    "call, argument, message",
    [
        (lambda: instances.from_networkx(nx.Graph(), []), "graph", "graph has no nodes"),
        (lambda: instances.from_networkx(_digraph(("a", "b")), [1.0, 0.5], self_loops=False), "graph",
         "node 'a' is observed by no arm"),
        (lambda: instances.from_networkx(_digraph(("a", "b"), ("b", "a"), nodes="c"), [1, 0.5, 0], self_loops=False),
         "graph", "node 'c' is observed by no arm"),
        (lambda: instances.from_networkx(_digraph(("a", "b", {"sigma": True})), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -> 'b' must be a number >= 0, got True"),
        (lambda: instances.from_networkx(_digraph(("a", "b", {"sigma": "1"})), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -> 'b' must be a number >= 0, got '1'"),
        (lambda: instances.from_networkx(_digraph(("a", "b", {"sigma": math.nan})), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -> 'b' must be a finite number >= 0, got nan"),
        (lambda: instances.from_networkx(_digraph(("a", "b", {"sigma": math.inf})), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -> 'b' must be a finite number >= 0, got inf"),
        (lambda: instances.from_networkx(nx.Graph([("a", "b", {"sigma": -1.0})]), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -- 'b' must be a finite number >= 0, got -1.0"),
        (lambda: instances.from_networkx(nx.MultiGraph([(0, 1, {"sigma": 1.0}), (1, 0, {"sigma": 2.0})]), [1.0, 0.5]),
         "graph", "parallel edges 0 -- 1 have different sigmas, 1.0 and 2.0"),
        (lambda: instances.from_networkx(nx.MultiDiGraph([(0, 1), (0, 1, {"sigma": 2.0})]), [1.0, 0.5]),
         "graph", "parallel edges 0 -> 1 have different sigmas, 1.0 and 2.0"),
        (lambda: instances.from_networkx(_digraph(("a", "b")), {"a": 1.0}), "mu", "mu gives no mean for node 'b'"),
        (lambda: instances.from_networkx(_digraph(("a", "b")), {"a": 1, "b": 0, "z": 0}), "mu",
         "mu gives a mean for 'z', which is not a node of the graph"),
        (lambda: instances.from_networkx(_digraph(("a", "b")), [1.0, 0.5, 0.2]), "mu",
         r"mu must hold one mean for each of the graph's 2 nodes \(in list\(graph.nodes\) order\), got shape \(3,\)"),
        (lambda: instances.from_networkx(_digraph(("a", "b")), [1.0, "x"]), "mu", "mu must be a number for each node"),
        (lambda: instances.from_networkx(_digraph(("a", "b")), [1.0, 0.5], sigma=-0.5), "sigma",
         "sigma must be a finite number >= 0, got -0.5"),
        (lambda: instances.from_networkx(_digraph(("a", "b")), [1.0, 0.5], self_loops="yes"), "self_loops",
         "self_loops must be True or False, got string 'yes'"),
        (lambda: instances.from_networkx(np.eye(2), [1.0, 0.5]), "graph", "graph must be a networkx graph .* got ndarray"),
    ],
)  # fmt: skip
def test_bad_graphs_name_the_node_or_edge(call, argument, message):
    with pytest.raises(jb.ArgumentError, match=message) as excinfo:
        call()
    assert excinfo.value.argument == argument


@st.composite
def _graphs(draw):
    num_arms = draw(st.integers(2, 6))
    adjacency = np.array(draw(st.lists(st.booleans(), min_size=num_arms**2, max_size=num_arms**2))).reshape(
        num_arms, -1
    )
    order = draw(st.permutations(range(num_arms)))  # nodes added in another order than their labels
    mu = draw(st.lists(st.floats(-10, 10), min_size=num_arms, max_size=num_arms))
    return adjacency, order, mu, draw(st.sampled_from([0.25, 1.0, 3.0]))


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_graphs())
def test_random_valid_graphs_round_trip(case):
    """A graph whose nodes are added in any order is the graph instance of its adjacency
    in that order, and its sigma read back as a graph is the same graph."""
    adjacency, order, mu, sigma = case
    graph = nx.DiGraph()
    graph.add_nodes_from(f"n{i}" for i in order)
    graph.add_edges_from((f"n{i}", f"n{j}") for i, j in zip(*np.nonzero(adjacency)))
    means = {f"n{i}": m for i, m in enumerate(mu)}
    built = instances.from_networkx(graph, means, sigma)
    assert built == instances.graph([mu[i] for i in order], adjacency[np.ix_(order, order)], sigma)
    back = nx.DiGraph()
    back.add_nodes_from(range(len(order)))
    back.add_edges_from(
        (int(i), int(j), {"sigma": built.sigma[i, j]}) for i, j in zip(*np.nonzero(np.isfinite(built.sigma)))
    )
    assert instances.from_networkx(back, built.mu, self_loops=False) == built
