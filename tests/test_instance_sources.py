"""Instances from graph objects (:func:`jaxbandit.instances.from_networkx`) and from files
named by a sweep configuration (``type = "file"``): the same instance as the matrix
written out, the same results, errors naming the node, the edge or the key, and a sweep
directory that refuses the same configuration over an edited file."""

import hashlib
import importlib.util
import json
import math
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxbandit as jb
from jaxbandit import config, instances, sweep
from jaxbandit.config import ConfigError
from jaxbandit.policies.lp_explore import TheoryWarning

REPO = Path(__file__).resolve().parents[1]
INF = math.inf

# -- from_networkx ------------------------------------------------------------------


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
    np.testing.assert_array_equal(instances.from_networkx(loops, [1.0, 0.5], self_loops=False).sigma, [[1, 1], [INF, 4]])
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
         "sigma of edge 'a' -> 'b' must be a number > 0, got True"),
        (lambda: instances.from_networkx(_digraph(("a", "b", {"sigma": "1"})), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -> 'b' must be a number > 0, got '1'"),
        (lambda: instances.from_networkx(_digraph(("a", "b", {"sigma": math.nan})), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -> 'b' must be a finite number > 0, got nan"),
        (lambda: instances.from_networkx(_digraph(("a", "b", {"sigma": 0})), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -> 'b' must be a finite number > 0, got 0.0"),
        (lambda: instances.from_networkx(nx.Graph([("a", "b", {"sigma": -1.0})]), [1.0, 0.5]), "graph",
         "sigma of edge 'a' -- 'b' must be a finite number > 0, got -1.0"),
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
        (lambda: instances.from_networkx(_digraph(("a", "b")), [1.0, 0.5], sigma=0.0), "sigma",
         "sigma must be a finite number > 0, got 0.0"),
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
    adjacency = np.array(draw(st.lists(st.booleans(), min_size=num_arms**2, max_size=num_arms**2))).reshape(num_arms, -1)
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
    back.add_edges_from((int(i), int(j), {"sigma": built.sigma[i, j]}) for i, j in zip(*np.nonzero(np.isfinite(built.sigma))))
    assert instances.from_networkx(back, built.mu, self_loops=False) == built


# -- instance files in sweep configurations -----------------------------------------

MU = [1.0, 0.5, 0.25]
SIGMA = [[1.0, INF, 2.0], [INF, 0.5, INF], [1.0, 1.0, 1.0]]
TEXT_SIGMA = [[1.0, "inf", 2.0], ["inf", 0.5, "inf"], [1.0, 1.0, 1.0]]


def _write(directory: Path, suffix: str, mu=MU, sigma=SIGMA, **other) -> Path:
    path = directory / f"graph{suffix}"
    if suffix == ".npz":
        np.savez(path, mu=np.asarray(mu), sigma=np.asarray(sigma), **other)
    elif suffix == ".json":
        encoded = [["inf" if v == INF else v for v in row] for row in sigma]
        path.write_text(json.dumps({"mu": mu, "sigma": encoded, **other}))
    else:  # TOML's own inf, and the string
        rows = ", ".join("[" + ", ".join(("inf" if j else '"inf"') if v == INF else repr(v) for j, v in enumerate(row)) + "]"
                         for row in sigma)  # fmt: skip
        extra = "".join(f"{k} = {v!r}\n" for k, v in other.items())
        path.write_text(f"# an instance\nmu = {list(mu)}\nsigma = [{rows}]\n{extra}")
    return path


def _sweep(instance: dict) -> dict:
    return {"name": "files", "seed": 5, "runs": 4, "horizon": 50, "times": [10, 50], "chunk_size": 25,
            "instances": [{"name": "g", **instance}], "policies": [{"name": "ucb_n"}]}  # fmt: skip


def _toml(data: dict) -> str:
    """A configuration like :func:`_sweep`'s as TOML text."""
    (entry,) = data["instances"]
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if k not in ("instances", "policies")]
    lines += ["[[instances]]"] + [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    lines += ["[[policies]]", 'name = "ucb_n"']
    return "\n".join(lines) + "\n"


INLINE = _sweep({"mu": MU, "sigma": TEXT_SIGMA})
SUFFIXES = [".npz", ".json", ".toml"]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_is_the_instance_written_inline(tmp_path, monkeypatch, suffix):
    data = tmp_path / "data"
    data.mkdir()
    path = _write(data, suffix)
    inline = config.from_dict(INLINE).instances[0].instance
    # a configuration file reads it from its own directory, wherever it is run from
    cfg_path = data / "sweep.toml"
    cfg_path.write_text(_toml(_sweep({"type": "file", "path": path.name})))
    monkeypatch.chdir(tmp_path)
    from_file = config.load(cfg_path)
    assert from_file.instances[0].instance == inline
    assert from_file.instance_table()["g"]["file"] == {"path": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    # a dict, from the current directory
    assert config.from_dict(_sweep({"type": "file", "path": f"data/{path.name}"})).instances[0].instance == inline
    noisy = config.from_dict(_sweep({"type": "file", "path": f"data/{path.name}", "noise": "uniform"}))
    assert noisy.instances[0].instance == jb.Instance(MU, SIGMA, noise="uniform")
    assert config.from_dict(_sweep({"type": "file", "path": f"data/{path.name}"})).fingerprint() != config.from_dict(INLINE).fingerprint()


@pytest.fixture(scope="module")
def inline_results(tmp_path_factory):
    return sweep.run(INLINE, tmp_path_factory.mktemp("inline") / "out", progress=False)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_instance_sweeps_to_the_inline_results_bit_for_bit(tmp_path, inline_results, suffix):
    path = _write(tmp_path, suffix)
    results = sweep.run(_sweep({"type": "file", "path": str(path)}), tmp_path / "out", progress=False)
    assert results.instances == inline_results.instances  # jb.load reads the instance table
    for ours, theirs in zip(results.cells, inline_results.cells, strict=True):
        np.testing.assert_array_equal(ours.regret, theirs.regret)
        np.testing.assert_array_equal(ours.counts, theirs.counts)


def test_an_edited_file_is_refused_as_the_same_configuration_computed_otherwise(tmp_path):
    path = _write(tmp_path, ".json")
    cfg_path = tmp_path / "sweep.toml"
    cfg_path.write_text(_toml(_sweep({"type": "file", "path": "graph.json"})))
    out = tmp_path / "out"
    first = sweep.run(cfg_path, out, progress=False)
    assert sweep.run(cfg_path, out, progress=False).cells[0].regret.tolist() == first.cells[0].regret.tolist()  # resumed
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["instances"]["g"]["file"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    for edit in (lambda: _write(tmp_path, ".json", mu=[1.0, 0.5, 0.125]), lambda: path.write_text(path.read_text() + "\n")):
        edit()  # other values, or other bytes only: the digest is of the bytes
        with pytest.raises(sweep.SweepMismatchError, match=r"same configuration computed otherwise: instance 'g' is read from graph.json, whose contents changed"):
            sweep.run(cfg_path, out, progress=False)


@pytest.mark.parametrize(
    "write, reason",
    [
        (lambda d: _write(d, ".npz", extra=np.zeros(2)), "graph.npz: unknown key 'extra'; an instance file holds only mu and sigma"),
        (lambda d: _write(d, ".json", noise="bernoulli"), "graph.json: unknown key 'noise'"),
        (lambda d: _write(d, ".toml", name="g"), "graph.toml: unknown key 'name'"),
        (lambda d: (d / "graph.json").write_text('{"mu": [1, 0]}'), "graph.json: no 'sigma'; an instance file holds mu and sigma"),
        (lambda d: np.savez(d / "graph.npz", sigma=np.eye(2)), "graph.npz: no 'mu'"),
        (lambda d: (d / "graph.csv").write_text("1,0"), "graph.csv: unknown suffix '.csv'; an instance file is .npz, .json, .toml"),
        (lambda d: None, r"graph.json: cannot read .*graph.json: No such file or directory"),
        (lambda d: (d / "graph.json").mkdir(), r"graph.json: cannot read .*graph.json: Is a directory"),
        (lambda d: (d / "graph.npz").write_text("mu"), r"graph.npz: not a .npz file of numeric arrays"),
        (lambda d: np.savez(d / "graph.npz", mu=np.array([1, None]), sigma=np.eye(2)), r"graph.npz: not a .npz file of numeric arrays"),
        (lambda d: (d / "graph.json").write_text("{mu"), r"graph.json: invalid JSON"),
        (lambda d: (d / "graph.json").write_text("[1, 2]"), r"graph.json: must hold an object with keys mu and sigma, got list"),
        (lambda d: (d / "graph.toml").write_text("mu = ["), r"graph.toml: invalid TOML"),
        (lambda d: (d / "graph.toml").write_bytes(b"mu = '\xff'"), r"graph.toml: not UTF-8 text"),
        (lambda d: _write(d, ".npz", sigma=np.eye(2)), r"graph.npz: sigma must have shape \(3, 3\) to match mu of shape \(3,\), got shape \(2, 2\)"),
        (lambda d: _write(d, ".json", mu=[1.0, True, 0.5]), r"graph.json: mu must be a numeric array, got \[1.0, True, 0.5\]"),
        (lambda d: _write(d, ".toml", sigma=[[1.0, INF, INF]] * 3), r"graph.toml: arm 1 is observed by no row of sigma"),
        (lambda d: _write(d, ".json", mu=[1.0, 1.0, 0.5]), r"graph.json: mu has a tie for the best mean"),
        (lambda d: _write(d, ".npz", mu=[1.0, 1.0 + 1e-12, 0.5]), r"graph.npz: instance mu: arm 0 .* float32"),
    ],
)  # fmt: skip
def test_bad_instance_files_name_the_configuration_the_key_and_the_file(tmp_path, write, reason):
    write(tmp_path)
    name = next((p.name for p in tmp_path.iterdir()), "graph.json")
    cfg_path = tmp_path / "sweep.toml"
    cfg_path.write_text(_toml(_sweep({"type": "file", "path": name})))
    with pytest.raises(ConfigError, match=reason) as excinfo:
        config.load(cfg_path)
    assert excinfo.value.source == str(cfg_path) and excinfo.value.key == "instances[0].path"
    assert str(excinfo.value).startswith(f"{cfg_path}: key 'instances[0].path': ")


def test_a_file_entry_takes_only_its_keys():
    with pytest.raises(ConfigError, match="unknown key; allowed keys: name, noise, path, type") as excinfo:
        config.from_dict(_sweep({"type": "file", "path": "graph.npz", "mu": MU}))
    assert excinfo.value.key == "instances[0].mu"
    with pytest.raises(ConfigError, match="missing required key") as excinfo:
        config.from_dict(_sweep({"type": "file"}))
    assert excinfo.value.key == "instances[0].path"


# -- the paper study's shared graph --------------------------------------------------


def test_the_paper_study_configurations_share_the_graph20_file():
    spec = importlib.util.spec_from_file_location("paper_study_script", REPO / "scripts" / "paper_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    graph = study.graph20()
    paths = sorted((REPO / "scripts" / "configs").glob("paper_study_1e7_graph20*.toml"))
    assert len(paths) == 4
    for path in paths:
        with warnings.catch_warnings():  # alpha <= 4 on purpose
            warnings.simplefilter("ignore", TheoryWarning)
            (spec,) = config.load(path).instances
        assert spec.label == "graph20" and spec.file["path"] == "instances/graph20.toml"
        assert spec.instance.mu.tobytes() == graph.mu.tobytes() and spec.instance.sigma.tobytes() == graph.sigma.tobytes()
