"""Sweep configuration: parsing, validation errors (file, key, reason), cell groups."""

import copy
import re
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import config, instances, noise
from jaxbandit.config import ConfigError
from jaxbandit.policies.lp_explore import TheoryWarning

REPO = Path(__file__).resolve().parents[1]

GOOD = """\
name = "t"
seed = 1
runs = 10
horizon = [100, 1000]
times = [1, 10, 50, 100]
precision = "float32"

[checkpoint]
every_chunks = 5

[[instances]]
type = "default"
name = "graph_star"

[[instances]]
type = "bandit"
name = "b3"
mu = [1.0, 0.5, 0.2]
sigma = 1.0

[[instances]]
name = "explicit"
mu = [0.9, 0.1]
sigma = [[1.0, "inf"], [0.5, 2.0]]

[[instances]]
type = "graph"
name = "g5"
mu = [1.0, 0.8, 0.7, 0.5, 0.2]
adjacency = [[0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0]]

[[policies]]
name = "ucb_n"
alpha = [0.25, 1, 4.01]

[[policies]]
name = "ts_n"
label = "TS-N"
"""


def test_valid_config_resolves_instances_policies_and_groups(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    cfg = config.load(path)
    assert cfg.source == str(path)
    assert [s.label for s in cfg.instances] == ["graph_star", "b3", "explicit", "g5"]
    assert cfg.instances[0].instance == instances.default_instances()["graph_star"]
    assert cfg.instances[1].instance == instances.bandit([1.0, 0.5, 0.2], 1.0)
    assert np.isinf(cfg.instances[2].instance.sigma[0, 1])
    assert cfg.horizons == (100, 1000)
    np.testing.assert_array_equal(cfg.times_for(100), [1, 10, 50, 100])
    np.testing.assert_array_equal(cfg.times_for(1000), [1, 10, 50, 100, 1000])
    assert cfg.checkpoint_every_chunks == 5 and cfg.checkpoint_every_seconds is None
    assert [p.grid for p in cfg.policies] == [({"alpha": 0.25}, {"alpha": 1}, {"alpha": 4.01}), ({},)]

    groups = cfg.plan()
    # per horizon and policy, one group per K: {5: graph_star, g5}, {3: b3}, {2: explicit}
    assert len(groups) == 2 * 2 * 3
    first = groups[0]
    assert (first.policy_name, first.num_arms, first.horizon) == ("ucb_n", 5, 100)
    assert [(c.instance, c.params["alpha"]) for c in first.cells] == [
        (name, a) for name in ("graph_star", "g5") for a in (0.25, 1, 4.01)
    ]
    # cells that share an instance share its noise stream
    assert [c.instance_index for c in first.cells] == [0, 0, 0, 3, 3, 3]
    assert len({g.id for g in groups}) == len(groups) == len({g.fingerprint for g in groups})


def test_fingerprint_tracks_results_not_checkpoint_cadence():
    cfg = config.loads(GOOD, "a")
    same = config.loads(GOOD.replace("every_chunks = 5", "every_chunks = 7"), "b")
    other = config.loads(GOOD.replace("runs = 10", "runs = 11"), "c")
    assert cfg.fingerprint() == same.fingerprint() != other.fingerprint()
    assert [g.fingerprint for g in cfg.plan()] == [g.fingerprint for g in same.plan()]


def test_dict_input_and_random_batches():
    cfg = config.load(
        {
            "runs": 2,
            "horizon": 10,
            "instances": [{"type": "random", "name": "r", "seed": 5, "num_arms": 3, "num_instances": 2}],
            "policies": [{"name": "ucb"}],
        }
    )
    assert cfg.source == "<dict>"
    assert [s.label for s in cfg.instances] == ["r/0", "r/1"]
    assert cfg.instances[1].instance == instances.random(5, 3, num_instances=2)[1]
    # a precision as the Python API's dtype takes it: numpy's and JAX's dtypes, by name
    small = {"runs": 2, "horizon": 10, "instances": [{"type": "default", "name": "bandit"}], "policies": [{"name": "ucb"}]}
    for precision in (np.float64, np.dtype("float64"), jnp.float64, float):
        assert config.load({**small, "precision": precision}).precision == "float64"
    with pytest.raises(ConfigError, match=r"key 'precision': .*'int64'"):
        config.load({**small, "precision": np.int64})
    with pytest.raises(ConfigError, match=r"key 'runs': unsupported value type type \(<class 'numpy.int64'>\)"):
        config.load({**small, "runs": np.int64})  # a type where a number belongs: named as given


def test_demo_config_and_examples_validate():
    demo = config.demo_config()
    assert [s.label for s in demo.instances] == list(instances.default_instances())
    assert {"ucb", "ucb_n", "ts_n", "lp_explore"} <= {p.name for p in demo.policies}
    examples = sorted((REPO / "scripts" / "configs").glob("*.toml"))
    assert len(examples) >= 2
    for path in examples:
        with warnings.catch_warnings():  # a config may run alpha <= 4 on purpose
            warnings.simplefilter("ignore", TheoryWarning)
            config.load(path)  # every example is valid


def _edit(text, old, new):
    assert old in text
    return text.replace(old, new, 1)


BAD = [
    # (edit of GOOD, key named, reason fragment)
    (("runs = 10", "runs = 10\nrun = 3"), "run", "unknown key"),
    # a misspelt required key: the unknown key, not the missing one, with the likely meaning
    (("runs = 10", "rusn = 10"), "rusn", "unknown key; did you mean 'runs'? allowed keys: checkpoint"),
    # the Python API's name of a key
    (("runs = 10", 'runs = 10\ndtype = "float64"'), "dtype", "unknown key; did you mean 'precision'? allowed keys: checkpoint"),
    (("runs = 10", 'runs = "10"'), "runs", "must be an integer >= 1, got string '10'"),
    (("runs = 10", "runs = 0"), "runs", "must be an integer >= 1"),
    # refused by check, not only by run (which writes the directory first)
    (("runs = 10", "runs = 1000000000000"), "runs", "must be at most 4294967296 (run indices are 32-bit), got 1000000000000"),
    (('name = "ucb_n"\nalpha = [0.25, 1, 4.01]', 'name = "eps_greedy"\nc = [0.25, 1e39]'), "policies[0].c", 'c = 1e+39 overflows float32; rescale it or use precision = "float64"'),
    # an exploration scale beyond the index policies' range, whatever the precision
    (("alpha = [0.25, 1, 4.01]", "alpha = [0.25, 1e39]"), "policies[0].alpha", "alpha must be at most 1e+30, got 1e+39: it scales log t"),
    (("seed = 1", "seed = true"), "seed", "got boolean"),
    (("horizon = [100, 1000]", "horizon = []"), "horizon", "non-empty"),
    (("horizon = [100, 1000]", "horizon = [100, 1.5]"), "horizon[1]", "got float"),
    (("horizon = [100, 1000]", "horizon = [100, 2147483646]"), "horizon[1]", "at most 1073741824, got 2147483646"),
    (("runs = 10", "runs = 10\nchunk_size = 2147483648"), "chunk_size", "at most 1073741824, got 2147483648"),
    (('precision = "float32"', 'precision = "float16"'), "precision", "float16"),
    (("times = [1, 10, 50, 100]", "times = [1, 50, 10]"), "times", "strictly increasing"),
    (("times = [1, 10, 50, 100]", "times = [1, 5000]"), "times", "<= the horizon 1000"),
    (("times = [1, 10, 50, 100]", 'times = "geometric"'), "times", "number of grid points"),
    # the grid is built in full: this many points would take 745 GiB, for 1000 rounds
    (("times = [1, 10, 50, 100]", "times = 100000000000"), "times", "at most 1000 grid points"),
    (("every_chunks = 5", "every_chunk = 5"), "checkpoint.every_chunk", "unknown key"),
    (("every_chunks = 5", "every_seconds = -1"), "checkpoint.every_seconds", "> 0"),
    (('type = "default"\nname = "graph_star"', 'type = "default"\nname = "graph_starr"'), "instances[0].name", "unknown default instance 'graph_starr'"),
    (('type = "default"\nname = "graph_star"', 'type = "deflt"\nname = "graph_star"'), "instances[0].type", "unknown instance type 'deflt'"),
    (('type = "default"\nname = "graph_star"', 'type = "default"\nname = "graph_star"\nmu = [1, 2]'), "instances[0].mu", "unknown key"),
    (("sigma = 1.0", "sigma = 1.0\nsigmas = 2.0"), "instances[1].sigmas", "unknown key"),
    (("mu = [1.0, 0.5, 0.2]", 'mu = [1.0, "inf", 0.2]'), "instances[1].mu", "finite"),
    (("mu = [1.0, 0.5, 0.2]", 'mu = [1.0, "x", 0.2]'), "instances[1].mu", "mu must be a list of K numbers, got [1.0, 'x', 0.2]"),
    (('sigma = [[1.0, "inf"], [0.5, 2.0]]', 'sigma = [[1.0, "inf", 1.0], [0.5, 2.0, 1.0]]'), "instances[2].sigma", "must have shape (2, 2)"),
    (('sigma = [[1.0, "inf"], [0.5, 2.0]]', 'sigma = [["inf", "inf"], ["inf", 2.0]]'), "instances[2].sigma", "observed by no row"),
    (('sigma = [[1.0, "inf"], [0.5, 2.0]]', 'sigma = [[1.0, -1.0], [0.5, 2.0]]'), "instances[2].sigma", ">= 0"),
    (('sigma = [[1.0, "inf"], [0.5, 2.0]]', 'sigma = [[1.0, "-inf"], [0.5, 2.0]]'), "instances[2].sigma", "must be a numeric array"),
    (('name = "explicit"\nmu = [0.9, 0.1]', 'name = "explicit"\nmu = [0.9, 0.1]\ntype = "explicit"\nextra = 1'), "instances[2].extra", "unknown key"),
    # what an explicit sigma may be, not a standard bandit's vector
    (('sigma = [[1.0, "inf"], [0.5, 2.0]]', 'sigma = "1"'), "instances[2].sigma", "sigma must be one number or a (K, K) matrix of numbers, got '1'"),
    (("adjacency = [[0, 1, 0, 0, 0], ", "adjacency = [[0, 1, 0, 0], "), "instances[3].adjacency", "must be a 5 x 5 array (rows of equal length)"),
    (("adjacency = [[0, 1, 0, 0, 0], [0, 0, 1, 0, 0], ", "adjacency = [[0, 1, 0, 0, 0], "), "instances[3].adjacency", "must be a 5 x 5 array (rows of equal length)"),
    (('name = "b3"', 'name = "graph_star"'), "instances[1].name", "duplicate instance name 'graph_star'; names must be unique"),
    # a name the entry did not write: its default, named as such at the entry
    (('name = "explicit"\nmu = [0.9, 0.1]\nsigma = [[1.0, "inf"], [0.5, 2.0]]\n\n[[instances]]\ntype = "graph"\nname = "g5"\n',
      'name = "graph_3"\nmu = [0.9, 0.1]\nsigma = [[1.0, "inf"], [0.5, 2.0]]\n\n[[instances]]\ntype = "graph"\n'),
     "instances[3]", "duplicate instance name 'graph_3' (its default name, from its type and place: give it a name); names must be unique"),
    # the default named again (under another noise family, say): how to write it
    (('type = "bandit"\nname = "b3"\nmu = [1.0, 0.5, 0.2]\nsigma = 1.0', 'type = "default"\nname = "graph_star"\nnoise = "uniform"'),
     "instances[1].name", 'duplicate instance name \'graph_star\'; names must be unique; a default instance is named by its own name: to run it again (under another noise family, say), write it as type = "explicit"'),
    (('name = "ucb_n"', 'name = "ucb_x"'), "policies[0].name", "unknown policy name 'ucb_x'"),
    (("alpha = [0.25, 1, 4.01]", "alpha = [0.25, -1]"), "policies[0].alpha", "alpha must be a finite number > 0"),
    (("alpha = [0.25, 1, 4.01]", "alpha = [0.25, 0.25]"), "policies[0].alpha", "repeated"),
    (("alpha = [0.25, 1, 4.01]", "alpha = []"), "policies[0].alpha", "empty grid"),
    (("alpha = [0.25, 1, 4.01]", "alpha = [0.25, 1, 1.0]"), "policies[0].alpha", "repeated values [0.25, 1, 1.0]"),
    # the built-in factory refuses these itself; the configuration's own check covers a
    # user's factory that would take them (test_bad_config_dicts_and_missing_files)
    (("alpha = [0.25, 1, 4.01]", "alpha = true"), "policies[0].alpha", "alpha must be a number > 0, got True"),
    (("alpha = [0.25, 1, 4.01]", 'alpha = [1, "4.5"]'), "policies[0].alpha", "alpha must be a number > 0, got '4.5'"),
    (("alpha = [0.25, 1, 4.01]", "alpha = [[1, 2]]"), "policies[0].alpha", "must be scalars"),
    # as float32 (the precision) holds them: two cells of one value, or a value of 0
    (("alpha = [0.25, 1, 4.01]", "alpha = [4.5, 4.5000001]"), "policies[0].alpha", 'alpha values 4.5 and 4.5000001 are one value in float32; use precision = "float64"'),
    (("alpha = [0.25, 1, 4.01]", "alpha = [1, 1e-46]"), "policies[0].alpha", 'alpha = 1e-46 is 0 in float32; rescale it or use precision = "float64"'),
    # no unique best arm: a study of it has no lower bound, and the LP policies fall back every round
    (("mu = [1.0, 0.5, 0.2]", "mu = [1.0, 1.0, 0.2]"), "instances[1]", "mu has a tie for the best mean: arms [0, 1] at 1.0"),
    # what the engine would refuse when the group runs, after sweep.json is written
    (("mu = [1.0, 0.5, 0.2]", "mu = [100000001.0, 100000000.0, 0.2]"), "instances[1]", "arm 1 (100000000.0) is below arm 0 (100000001.0), but not in float32"),
    (("sigma = 1.0\n", "sigma = 1e25\n"), "instances[1]", 'its precision 1 / sigma**2 is 0 in float32, or below its smallest normal number, which XLA flushes to 0 (the sample would be ignored); use inf for no information, or precision = "float64"'),
    (("alpha = [0.25, 1, 4.01]", "beta = 2"), "policies[0].beta", "unknown key"),
    (('label = "TS-N"', 'label = "TS-N"\noptional = true'), "policies[1].optional", "unknown key"),
    (('label = "TS-N"', 'label = "ucb_n"'), "policies[1].label", "duplicate policy label"),
    # a label the command line's --policies A,B could not name
    (('label = "TS-N"', 'label = "fast, greedy"'), "policies[1].label", "must have balanced parentheses, no comma outside them and no surrounding spaces"),
    (('label = "TS-N"', 'label = "TS-N("'), "policies[1].label", "must have balanced parentheses"),
    # a distinct entry label, but a cell label of policies[0]'s grid: two cells, one name in results and plots
    (('label = "TS-N"', 'label = "ucb_n(alpha=1)"'), "policies[1].label", "a cell labelled 'ucb_n(alpha=1)', as one of policies[0] is"),
    # the label a figure gives policies[0]'s cell (its parameters as resolved)
    (('label = "TS-N"', 'label = "ucb_n(alpha=1.0)"'), "policies[1].label", "a cell labelled 'ucb_n(alpha=1.0)', as one of policies[0] is"),
    # an entry label that names policies[0]'s cell: selecting that cell by a string would find two
    (('name = "ts_n"\nlabel = "TS-N"', 'name = "ucb"\nlabel = "ucb_n(alpha=4.01)"\nalpha = 2'), "policies[1].label", "'ucb_n(alpha=4.01)' labels a cell of policies[0] already"),
    # a cell label that is another entry's label
    (('name = "ucb_n"\nalpha = [0.25, 1, 4.01]\n\n[[policies]]\nname = "ts_n"\nlabel = "TS-N"', 'name = "ucb_n"\nlabel = "u(alpha=2)"\nalpha = [0.25, 1]\n\n[[policies]]\nname = "ucb_n"\nlabel = "u"\nalpha = 2'),
     "policies[1].label", "a cell labelled 'u(alpha=2)', the label of policies[0]"),
    # a factory's defaults in another order than the records' (ucb_lp returns c, alpha)
    (('name = "ucb_n"\nalpha = [0.25, 1, 4.01]\n\n[[policies]]\nname = "ts_n"\nlabel = "TS-N"', 'name = "ucb_lp"\n\n[[policies]]\nname = "ts_n"\nlabel = "ucb_lp(alpha=1.0, c=1.0)"'),
     "policies[1].label", "a cell labelled 'ucb_lp(alpha=1.0, c=1.0)', as one of policies[0] is"),
    (("[[policies]]\nname = \"ucb_n\"", "[[policies]]\nlabel = \"x\""), "policies[0].name", "missing"),
    (("runs = 10\n", ""), "runs", "missing required key"),
    (("seed = 1", "seed = 1979-05-27"), "seed", "unsupported value type"),
    (("seed = 1", "seed = nan"), "seed", 'NaN is not a value (for sigma\'s "no information", write "inf")'),
    (("seed = 1", "seed = = 1"), "", "invalid TOML"),
    # a literal beyond float64 is not read as another number (1e-400 would be a noise-free sample)
    (("sigma = 1.0\n", "sigma = 1e-400\n"), "", "invalid TOML: the number 1e-400 is beyond float64's range (it would be read as 0.0)"),
    (("sigma = 1.0\n", "sigma = 1e400\n"), "", "invalid TOML: the number 1e400 is beyond float64's range (it would be read as inf)"),
]


def test_number_literals_beyond_float64_are_refused_whatever_their_digits():
    from jaxbandit._numbers import decimal_literal

    for text in [*(f"{digit}e-400" for digit in range(1, 10)), "0.9e-400", "0.09E-999", "9e400", "-9e400"]:
        with pytest.raises(ValueError, match=re.escape(f"the number {text} is beyond float64's range")):
            decimal_literal(text)
    assert [decimal_literal(t) for t in ("0e-400", "-0.0e-400", "9e-300", "inf", "-inf")] == [0.0, 0.0, 9e-300, np.inf, -np.inf]


@pytest.mark.parametrize("edit, key, reason", BAD, ids=[f"{i}:{b[1]}" for i, b in enumerate(BAD)])
def test_bad_config_names_file_key_and_reason(tmp_path, edit, key, reason):
    path = tmp_path / "bad.toml"
    path.write_text(_edit(GOOD, *edit))
    with pytest.raises(ConfigError) as info:
        config.load(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.source, err.key) == (str(path), key)
    message = str(err)
    assert message.startswith(f"{path}: ")
    assert (f"key '{key}'" if key else "top level") in message
    assert reason in message


def test_an_instance_too_large_to_build_is_named(monkeypatch):
    """random(num_arms=1000000) needs a 7 TiB sigma: the MemoryError (whether numpy
    refuses the size at once depends on the host's memory overcommit, so the
    constructor raises it here) becomes an error naming the entry."""

    def too_large(seed, num_arms):
        raise MemoryError("Unable to allocate 7.28 TiB for an array with shape (1000000, 1000000)")

    monkeypatch.setitem(config.schema.CONSTRUCTORS, "random", too_large)
    huge = {"type": "random", "seed": 1, "num_arms": 1_000_000}
    with pytest.raises(ConfigError, match=r"key 'instances\[0\]': too large to build \(Unable to allocate 7.28 TiB"):
        config.load({"runs": 1, "horizon": 5, "instances": [huge], "policies": [{"name": "ucb"}]})


def test_cell_labels_are_compared_as_results_store_them():
    """Results store a cell's params sorted by name: a label written with them in
    another order is the same label."""
    grid = {"name": "lp_explore", "gamma": 0.5, "alpha": [4.5, 5.0]}
    clash = {"name": "ucb_n", "label": "lp_explore(alpha=5.0, gamma=0.5)"}
    base = {"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}]}
    with pytest.raises(ConfigError, match=r"key 'policies\[1\].label': a cell labelled 'lp_explore\(alpha=5.0, gamma=0.5\)'"):
        config.load({**base, "policies": [grid, clash]})
    config.load({**base, "policies": [grid, {**clash, "label": "lp_explore(gamma=0.5, alpha=5.0)"}]})
    # the label a figure gives a cell: its static options too, defaults included
    resolved = "lp_explore(alpha=5.0, gamma=0.5, case_c_rule=largest_deficit)"
    with pytest.raises(ConfigError, match=rf"key 'policies\[1\].label': a cell labelled {re.escape(repr(resolved))}"):
        config.load({**base, "policies": [grid, {**clash, "label": resolved}]})


def test_bad_config_dicts_and_missing_files(tmp_path):
    with pytest.raises(ConfigError, match=r"<dict>: key 'instances': must be a non-empty array of tables"):
        config.load({"runs": 1, "horizon": 5, "instances": [], "policies": [{"name": "ucb"}]})
    with pytest.raises(ConfigError, match=r"<dict>: key 'policies': must be a non-empty array of tables"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": []})
    # runs written after a [monitor] header: TOML's monitor.runs
    monitor = {"name": "estimator_deviation", "runs": 3}
    with pytest.raises(ConfigError, match=r"key 'runs': missing required key; found as monitor.runs: in TOML a key after a \[monitor\] header"):
        config.load({"horizon": 5, "monitor": monitor, "instances": [{"type": "default", "name": "bandit"}], "policies": [{"name": "ucb"}]})
    # ... after the last [[policies]] entry; an instance's key after its [instances.noise]
    found = {"horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [{"name": "ucb"}, {"name": "ts_n", "runs": 3}]}
    with pytest.raises(ConfigError, match=r"key 'runs': missing required key; found as policies\[1\].runs: in TOML a key after a "
                       r"\[\[policies\]\] header belongs to that table, so write it above the first table header"):
        config.load(found)
    found = {"runs": 1, "horizon": 5, "instances": [{"type": "default", "noise": {"family": "uniform", "name": "bandit"}}], "policies": [{"name": "ucb"}]}
    with pytest.raises(ConfigError, match=r"key 'instances\[0\].name': missing required key; found as instances\[0\].noise.name: "
                       r"in TOML a key after a \[instances.noise\] header belongs to that table, so write it above the \[instances.noise\] header"):
        config.load(found)
    # [instances] for [[instances]]: one table where an array of them belongs
    with pytest.raises(ConfigError, match=r"<dict>: key 'instances': must be a non-empty array of tables \(\[\[instances\]\]\), got table"):
        config.load({"runs": 1, "horizon": 5, "instances": {"type": "default", "name": "bandit"}, "policies": [{"name": "ucb"}]})
    # a registered name the label rule refuses, as the entry's label
    jb.policies.register("fast, greedy", jb.policies.REGISTRY["ucb"])
    try:
        entry = {"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [{"name": "fast, greedy"}]}
        with pytest.raises(ConfigError, match=r"key 'policies\[0\].name': label must have balanced parentheses, .*got 'fast, greedy' \(the label its name gives: give the entry a label\)"):
            config.load(entry)
        entry["policies"][0]["label"] = "fast_greedy"
        assert config.load(entry).policies[0].label == "fast_greedy"
    finally:
        jb.policies.REGISTRY.pop("fast, greedy")
    # a name no UTF-8 record can hold (os.fsdecode of a file name that is not UTF-8)
    with pytest.raises(ConfigError, match=r"key 'instances\[0\].name': must be text UTF-8 can hold, got '\\udcff'"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "\udcff"}], "policies": [{"name": "ucb"}]})
    with pytest.raises(ConfigError, match=r"missing.toml: top level: cannot read the file"):
        config.load(tmp_path / "missing.toml")
    (tmp_path / "latin1.toml").write_bytes(b'runs = 4\nname = "\xff"\n')
    with pytest.raises(ConfigError, match=r"latin1.toml: top level: not UTF-8 text \(invalid start byte at byte 17\)"):
        config.load(tmp_path / "latin1.toml")
    # not numbers, whatever float() makes of them (true is 1.0: a tie with the best arm)
    for entry, key in (({"type": "revealing_arm", "mu": [1.0, 0.5], "reveal_mean": True}, "reveal_mean"),
                       ({"type": "random", "seed": 1, "num_arms": 3, "inf_prob": "0.5"}, "inf_prob")):  # fmt: skip
        with pytest.raises(ConfigError, match=rf"key 'instances\[0\].{key}': {key} must be a number, got "):
            config.load({"runs": 1, "horizon": 5, "instances": [entry], "policies": [{"name": "ucb"}]})
    # float32 rounds 0.99999999 to 1.0, outside lp_explore's range: refused, not run as 1.0
    rounded = {"name": "lp_explore", "gamma": [0.5, 0.99999999]}
    with pytest.raises(ConfigError, match=r"key 'policies\[0\].gamma': params for policy 'lp_explore': gamma must be in \(0, 1\), got 1.0 \(gamma = 0.99999999 is 1.0 in float32; use precision = \"float64\"\)"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [rounded]})
    config.load({"runs": 1, "horizon": 5, "precision": "float64", "instances": [{"type": "default", "name": "bandit"}], "policies": [rounded]})
    reversed_range = {"type": "random", "seed": 1, "num_arms": 3, "mean_range": [1.0, 0.0]}
    with pytest.raises(ConfigError, match=r"key 'instances\[0\].mean_range': mean_range must be two numbers with low <= high, got \[1.0, 0.0\]"):
        config.load({"runs": 1, "horizon": 5, "instances": [reversed_range], "policies": [{"name": "ucb"}]})
    # a factory taking **params: the configuration passes every key, the factory names a wrong one
    keywords = {"name": "tests.user_policies:keyword_threshold", "eps": [0.2, 0.8]}
    cfg = config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [keywords]})
    assert cfg.policies[0].grid == ({"eps": 0.2}, {"eps": 0.8})
    with pytest.raises(ConfigError, match=r"key 'policies\[0\].epss': keyword_threshold got unknown parameter\(s\) \['epss'\]"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [{**keywords, "epss": 1.0}]})
    # a user's factory that checks nothing: true is still not a number for its params
    lax = {"name": "tests.user_policies:traced_threshold", "eps": [0.5, True]}
    with pytest.raises(ConfigError, match=r"key 'policies\[0\].eps': policy 'traced_threshold': Policy.params\['eps'\] must be one number, got boolean True \(the factory called with eps=True\)"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [lax]})
    # a parameter the policy keeps in its closure: 1 and 1.0 made two identical cells
    static = {"name": "tests.user_policies:fixed_arm", "arm": [1, 1.0]}
    with pytest.raises(ConfigError, match=r"key 'policies\[0\].arm': grid has repeated values \[1, 1.0\]"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [static]})
    # a factory that keeps its setting in a module global: the grid's cells would all play the last arm
    shared = {"name": "tests.user_policies:shared_setting", "arm": [0, 1]}
    with pytest.raises(ConfigError, match=r"key 'policies\[0\]': its policy at arm=0 computes otherwise once the later policies are built"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [shared]})
    good = config.loads(GOOD)
    raw = copy.deepcopy(good.raw)
    raw["instances"][1]["mu"] = "1, 2"
    with pytest.raises(ConfigError, match=r"key 'instances\[1\].mu': mu must be a list of K numbers, got '1, 2'"):
        config.load(raw)


def test_the_schema_takes_what_toml_and_python_users_write():
    """Booleans in an adjacency, TOML's own inf, numpy and JAX arrays in a dict, and a
    horizon written 2e4 (an exact integer)."""
    adjacency = [[False, True, False], [False, False, True], [True, False, False]]
    data = {
        "runs": 1, "horizon": 2e4,
        "instances": [{"type": "graph", "name": "g", "mu": np.array([1.0, 0.5, 0.2]), "adjacency": adjacency}],
        "policies": [{"name": "ucb_n", "alpha": np.array([1.0, 2.0])}],
    }  # fmt: skip
    cfg = config.load(data)
    assert cfg.horizons == (20000,) and [p.grid for p in cfg.policies] == [({"alpha": 1.0}, {"alpha": 2.0})]
    assert cfg.instances[0].instance == instances.graph([1.0, 0.5, 0.2], np.array(adjacency))
    jax_means = {**data["instances"][0], "mu": jnp.array([1.0, 0.5, 0.25])}  # float32: 0.25 as exact as 0.2 is not
    assert config.load({**data, "instances": [jax_means]}).raw["instances"][0]["mu"] == [1.0, 0.5, 0.25]
    text = GOOD.replace('sigma = [[1.0, "inf"], [0.5, 2.0]]', "sigma = [[1.0, inf], [0.5, 2.0]]")
    assert config.loads(text).instances[2].instance == config.loads(GOOD).instances[2].instance
    assert config.loads(text).fingerprint() == config.loads(GOOD).fingerprint()  # inf is inf, however written
    for bad, key in ((2e4 + 0.5, "horizon"), (float("nan"), "horizon"), (True, "horizon")):
        with pytest.raises(ConfigError) as info:
            config.load({**data, "horizon": bad})
        assert info.value.key == key


def test_check_runs_the_policy_contract():
    """A policy that breaks the contract is refused when the configuration resolves (by
    ``jaxbandit check``, and before a run writes anything)."""
    entry = {"name": "tests.user_policies:float_arm"}
    with pytest.raises(ConfigError, match=r"key 'policies\[0\]': select_fn returned Decision.arm = float32\[\]; expected an integer scalar"):
        config.load({"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [entry]})


def test_instances_take_a_noise_family():
    """``noise`` on an instance entry: a name or a table; instances of two families are
    two programs, and the family is part of what the configuration determines."""
    entries = [
        {"type": "default", "name": "bandit"},
        {"type": "default", "name": "graph_star", "noise": "bernoulli"},
        {"type": "bandit", "name": "t", "mu": [0.9, 0.5], "noise": {"family": "student_t", "df": 3}},
    ]
    base = {"runs": 1, "horizon": 5, "policies": [{"name": "ucb_n"}]}
    cfg = config.load({**base, "instances": entries})
    assert [s.instance.noise.label for s in cfg.instances] == ["gaussian", "bernoulli", "student_t(df=3)"]
    assert [g.num_arms for g in cfg.plan()] == [5, 5, 2]
    assert cfg.instance_table()["graph_star"]["noise"] == "bernoulli" and "noise" not in cfg.instance_table()["bandit"]
    gaussian = config.load({**base, "instances": [entries[0], {**entries[1], "noise": "gaussian"}, entries[2]]})
    assert gaussian.fingerprint() != cfg.fingerprint()
    # a family object in a dict configuration is its label, as a file writes it
    families = [{**entries[1], "noise": noise.bernoulli()}, {**entries[2], "noise": noise.student_t(3)}]
    same = config.load({**base, "instances": [entries[0], *families]})
    assert [s.instance for s in same.instances] == [s.instance for s in cfg.instances]
    bad = [
        ({**entries[1], "noise": "poisson"}, "instances[1].noise", "must be one of"),
        ({**entries[2], "noise": {"family": "student_t", "df": 2}}, "instances[2].noise", "df must be a finite number > 2"),
        ({**entries[2], "noise": {"family": "bernoulli", "df": 3}}, "instances[2].noise", 'df goes with family "student_t"'),
        ({**entries[2], "noise": {"family": "student_t(df=3)", "df": 4}}, "instances[2].noise", "got family 'student_t(df=3)' with df = 4.0"),
        ({**entries[2], "noise": {"family": "student_t"}}, "instances[2].noise", "'student_t' needs its degrees of freedom"),
        ({**entries[2], "noise": {"family": "uniform", "scale": 3}}, "instances[2].noise.scale", "unknown key; allowed keys: df, family"),
        ({**entries[1], "noise": {"family": "student_t", "dof": 3}}, "instances[1].noise.dof", "unknown key; did you mean 'df'? allowed keys: df, family"),
        ({**entries[2], "mu": [1.5, 0.5], "noise": "bernoulli"}, "instances[2].mu", "under Bernoulli noise a mean is the probability of a 1"),
    ]  # fmt: skip
    for entry, key, reason in bad:
        index = int(key[len("instances[")])
        with pytest.raises(ConfigError) as info:
            config.load({**base, "instances": [entries[i] if i != index else entry for i in range(3)]})
        assert info.value.key == key and reason in info.value.reason, info.value
