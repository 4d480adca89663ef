"""Results where researchers analyse them: pandas and xarray views checked label by label
against the stored arrays, summary.csv's columns, paired comparisons against a direct
numpy computation (and their refusal of unpaired cells), the compare command and the
paired-difference figures, and README's "Analysing results" snippets run as written."""

import csv
import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy import stats

import jaxbandit as jb
from jaxbandit import base, cli, comparison, fingerprint, frames, plotting, summary, sweep
from jaxbandit.config.schema import split_labels
from tests import sweep_fixtures as fx
from tests import user_policies

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def _test_policy():
    with fx.registered():
        yield


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """8 cells: 2 instances x (the test policy at 3 alphas, which reports case_* counters,
    and ts_n, which has no hyper-parameter and reports none)."""
    return sweep.run(fx.base_config(), tmp_path_factory.mktemp("analysis"), progress=False)


@pytest.fixture(scope="module")
def bounds(results):
    return {label: float(jb.lower_bound(inst).value) for label, inst in results.instances.items()}


def test_the_run_frame_holds_the_stored_values_label_by_label(results, bounds):
    frame = results.to_pandas()
    assert len(frame) == sum(c.runs for c in results.cells) == 8 * 6
    assert frame["final_regret"].dtype == np.float64 and frame["run"].dtype == np.int64
    for name in ("instance", "noise", "policy", "label", "policy_name", "precision", "directory"):
        assert isinstance(frame[name].dtype, pd.CategoricalDtype), name
    # the sweep each row came from: rows of two sweeps' cells in one frame stay apart
    assert set(frame["seed"]) == {results.config["seed"]} and frame["seed"].dtype == np.int64
    assert set(frame["precision"]) == {"float32"} and set(frame["directory"]) == {str(results.directory.resolve())}
    places = {label: index for index, label in enumerate(results.instances)}  # the instance's place: its noise
    assert (frame["noise_stream"] == frame["instance"].map(places).astype(np.int64)).all()
    for cell in results.cells:
        rows = frame[(frame["label"] == cell.label) & (frame["instance"] == cell.instance)]
        np.testing.assert_array_equal(rows["run"], np.arange(cell.runs))
        np.testing.assert_array_equal(rows["final_regret"], cell.final_regret)
        assert set(rows["horizon"]) == {cell.horizon} and set(rows["policy"]) == {cell.policy}
        np.testing.assert_allclose(rows["regret_over_log_T"], cell.final_regret / math.log(cell.horizon), rtol=1e-15)
        np.testing.assert_allclose(rows["lower_bound"], bounds[cell.instance], rtol=1e-12)
        np.testing.assert_allclose(rows["lower_bound_log_T"], bounds[cell.instance] * math.log(cell.horizon))
        if cell.policy_name == "ts_n":  # no alpha, no counters: missing, not zero
            assert rows["alpha"].isna().all() and rows["case_a"].isna().all()
        else:
            assert set(rows["alpha"]) == {cell.params["alpha"]}
            for name in ("case_a", "case_b", "case_c"):
                np.testing.assert_array_equal(rows[name].to_numpy(dtype=np.int64), cell.diagnostics[name])
    # a counter some cells lack stays an integer (a nullable one), not a float with NaN
    assert frame["case_a"].dtype == pd.Int32Dtype()
    ts_n = (frame["policy_name"] == "ts_n").to_numpy()
    np.testing.assert_array_equal(frame["initial_rounds"].isna(), ~ts_n)  # ts_n's counter alone
    assert not frame.drop(columns=["alpha", "case_a", "case_b", "case_c", "initial_rounds"]).isna().any().any()


def test_a_selection_by_what_no_cell_has_is_refused(results):
    """``alpha`` is a column of the frame, not an attribute of a cell: named, with what is."""
    for select in (results.select, results.to_pandas, results.to_xarray):
        with pytest.raises(jb.ArgumentError, match=r"select got \['alpha'\], which no cell has; a cell has instance, policy") as caught:
            select(alpha=0.5)
        assert caught.value.argument == "alpha"
    assert results.select(params={"alpha": 0.5}) == [c for c in results.cells if c.params == {"alpha": 0.5}] != []
    # a value of another type than the cell's attribute would pick nothing, silently
    for criteria, message in (
        ({"noise": 3}, r"noise must be one of 'gaussian'.* got 3"),
        ({"noise": "student_t(df=1)"}, r"noise 'student_t\(df=1\)': df must be a finite number > 2"),
        ({"horizon": "1500"}, r"horizon must be an integer, got string '1500'"),
        ({"runs": True}, r"runs must be an integer, got boolean True"),
        ({"times": np.arange(3)}, r"select: a cell's times holds arrays; select cells by another attribute"),
        ({"params": "alpha=0.5"}, r"select: a cell's params is a dict, so params='alpha=0.5' picks no cell"),
    ):
        with pytest.raises(jb.ArgumentError, match=message):
            results.select(**criteria)
    # a figure's label (the parameters as resolved, defaults included) picks its cell too
    cell = dataclasses.replace(results.cells[0], resolved_params={**results.cells[0].params, "gamma": 0.5})
    assert cell.resolved_label != cell.label and cell.matches(cell.resolved_label) and cell.matches(cell.label)
    assert split_labels("lp_explore(alpha=4.5, gamma=0.5), ts_n,") == ["lp_explore(alpha=4.5, gamma=0.5)", "ts_n"]
    for horizon in (np.int64(1500), 1500.0, 1.5e3):  # the integer rule: a whole float is one
        assert results.select(noise="gaussian", horizon=horizon, precision="float32") == list(results.cells)
    # the dtype rule: a precision is float32 or float64, however it is written
    assert results.select(precision=np.float32) == list(results.cells) and results.select(precision="float64") == []
    with pytest.raises(jb.ArgumentError, match=r"precision must be float32 or float64, got 'float128'\."):
        results.select(precision="float128")
    # a family is compared by its label, however it is written
    assert results.select(noise=jb.noise.gaussian()) == list(results.cells)
    student = [dataclasses.replace(c, noise="student_t(df=3)") for c in results.cells[:2]]
    assert [c for c in student if c.matches({"noise": "student_t(df=3.0)"})] == student
    # in a figure's selection too
    assert plotting._drawn(results, None, {"policy": "ts_n", "noise": jb.noise.gaussian()}) == list(results.cells)
    # the views' flags are True or False: "no" would read as True
    for view, flag in ((results.to_pandas, "curves"), (results.to_pandas, "bounds"), (results.to_xarray, "bounds")):
        with pytest.raises(jb.ArgumentError, match=f"{flag} must be True or False, got string 'no'"):
            view(**{flag: "no"})


def test_the_curve_frame_has_a_row_per_recording_time(results):
    frame = results.to_pandas(curves=True, instance="graph_star")
    cells = results.select(instance="graph_star")
    assert len(frame) == sum(c.runs * len(c.times) for c in cells)
    for cell in cells:
        rows = frame[frame["label"] == cell.label]
        np.testing.assert_array_equal(rows["regret"], cell.regret.ravel())
        np.testing.assert_array_equal(rows["time"], np.tile(cell.times, cell.runs))
        np.testing.assert_array_equal(rows["run"], np.repeat(np.arange(cell.runs), len(cell.times)))


def test_a_report_named_as_a_counter_has_one_column_name_in_both_frames(results):
    """A monitor report named as one of the policy's counters is ``monitor_<name>`` in
    the curve frame too, where no counter is a column: one name, one meaning."""
    cell = next(c for c in results.cells if "initial_rounds" in c.diagnostics)
    reporting = dataclasses.replace(cell, monitor={"initial_rounds": np.zeros_like(cell.regret)})
    runs, curves = frames.cells_frame([reporting]), frames.cells_frame([reporting], curves=True)
    assert {"initial_rounds", "monitor_initial_rounds"} <= set(runs.columns)
    assert "monitor_initial_rounds" in curves.columns and "initial_rounds" not in curves.columns


def test_the_curve_frame_has_the_lower_bound_at_each_time(results, bounds):
    frame = results.to_pandas(curves=True, policy="ts_n")
    for cell in results.select(policy="ts_n"):
        rows = frame[frame["instance"] == cell.instance]
        assert set(rows["lower_bound"]) == {bounds[cell.instance]} and set(rows["lower_bound_kind"]) == {"bound"}
        np.testing.assert_allclose(rows["lower_bound_log_T"], bounds[cell.instance] * math.log(cell.horizon))
        np.testing.assert_allclose(rows["lower_bound_log_t"], bounds[cell.instance] * np.log(rows["time"]), rtol=1e-12)
    assert "lower_bound" not in results.to_pandas(curves=True, bounds=False, policy="ts_n")


def test_the_dataset_has_cell_run_and_time_dimensions(results, bounds):
    data = results.to_xarray()
    assert dict(data.sizes) == {"cell": 8, "run": 6, "time": len(results.cells[0].times), "arm": 5}
    np.testing.assert_array_equal(data["regret"].values, np.stack([c.regret for c in results.cells]))
    np.testing.assert_array_equal(data["counts"].values, np.stack([c.counts for c in results.cells]))
    np.testing.assert_array_equal(data["time"].values, results.cells[0].times)
    assert list(data["label"].values) == [c.label for c in results.cells]
    assert set(data["seed"].values) == {results.config["seed"]} and set(data["directory"].values) == {str(results.directory.resolve())}
    assert list(data["lower_bound"].values) == pytest.approx([bounds[c.instance] for c in results.cells])
    assert data["regret"].dtype == np.float64 and data["counts"].dtype == np.int64
    alpha = data["alpha"].values  # ts_n has no alpha: NaN there, the resolved value elsewhere
    assert np.isnan(alpha[[c.policy_name == "ts_n" for c in results.cells]]).all()
    case_a = data["case_a"]  # a counter only some cells report: float with NaN, its stored dtype said
    assert case_a.attrs["stored_dtype"] == "int32"
    assert np.isnan(case_a.values[[c.policy_name == "ts_n" for c in results.cells]]).all()
    picked = results.to_xarray(policy="ts_n")
    assert "case_a" not in picked and picked.sizes["cell"] == 2
    fewer_arms = [results.cells[0], dataclasses.replace(results.cells[1], counts=results.cells[1].counts[:, :3])]
    mixed = jb.frames.cells_dataset(fewer_arms)  # no counts, and the dataset says why
    assert "counts" not in mixed and mixed.attrs["note"] == "no counts: the cells have 3, 5 arms (select cells of one instance size)"


def test_a_dataset_of_cells_with_other_recording_times_is_refused_naming_them(results):
    cell = results.cells[0]
    shorter = dataclasses.replace(cell, instance="other", times=cell.times[:-1], regret=cell.regret[:, :-1], horizon=int(cell.times[-2]))
    with pytest.raises(jb.ArgumentError, match=rf"{re.escape(cell.label)} on other \(T={shorter.horizon}\) differ from .*to_xarray\(horizon=") as caught:
        frames.cells_dataset([cell, shorter])
    assert caught.value.argument == "horizon"
    # a selection that matches nothing: the criteria and the values the cells have
    with pytest.raises(jb.ArgumentError, match=r"to_xarray\(policy='nothing'\) matches no cell; the cells have policy 'cases', 'ts_n'\.$"):
        results.to_xarray(policy="nothing")
    with pytest.raises(jb.ArgumentError, match=r"to_pandas\(instance='Bandit', horizon=1500\) matches no cell; the cells have instance 'bandit', 'graph_star'; horizon 1500\.$"):
        results.to_pandas(instance="Bandit", horizon=1500)


def test_views_of_a_batched_and_a_single_result():
    batch = jb.instances.stack([jb.instances.bandit([1.0, 0.5, 0.2]), jb.instances.bandit([1.0, 0.7, 0.2])])
    with_option = jb.policies.make("ucb_n")._replace(options={"rule": "first"})  # a static option is a column too
    run = jb.SimulationRun(with_option, batch, 60, 3, times=[10, 30], params={"alpha": [1.0, 2.0]})  # one value per instance
    run.advance()
    result = run.result()
    data = result.to_xarray()
    assert dict(data.sizes) == {"instance": 2, "run": 3, "time": 3, "arm": 3}
    np.testing.assert_array_equal(data["regret"].values, result.regret)
    assert list(data["instance"].values) == [0, 1] and list(data["alpha"].values) == [1.0, 2.0] and list(data["rule"].values) == ["first"] * 2
    frame = result.to_pandas()
    assert list(frame.columns[:9]) == ["instance", "noise", "policy", "horizon", "seed", "precision", "alpha", "rule", "run"]
    assert set(frame["seed"]) == {0} and set(frame["precision"]) == {"float32"}
    np.testing.assert_array_equal(frame["final_regret"], result.final_regret.ravel())
    np.testing.assert_array_equal(frame["instance"], np.repeat([0, 1], 3))
    np.testing.assert_array_equal(frame["alpha"], np.repeat([1.0, 2.0], 3))  # each instance's own value
    single = jb.simulate(jb.policies.make("ucb_n"), jb.instances.bandit([1.0, 0.5, 0.2]), horizon=60, runs=3, times=[10, 30])
    assert dict(single.to_xarray()["regret"].sizes) == {"run": 3, "time": 3}
    assert len(single.to_pandas(curves=True)) == 3 * 3
    # runs simulated apart keep their indices in the seed's stream: runs 2..4 of 0..4
    later = jb.simulate(jb.policies.make("ucb_n"), jb.instances.bandit([1.0, 0.5, 0.2]), horizon=60, runs=3, times=[10, 30], first_run=2)
    assert later.first_run == 2 and single.first_run == 0
    assert later.to_pandas()["run"].tolist() == [2, 3, 4] and later.to_xarray()["run"].values.tolist() == [2, 3, 4]
    assert later.to_pandas(curves=True)["run"].tolist() == [2, 2, 2, 3, 3, 3, 4, 4, 4]
    whole = jb.simulate(jb.policies.make("ucb_n"), jb.instances.bandit([1.0, 0.5, 0.2]), horizon=60, runs=5, times=[10, 30])
    np.testing.assert_array_equal(later.regret, whole.regret[2:])


def test_a_view_without_pandas_or_xarray_says_what_to_install(results, monkeypatch):
    for module, view in (("pandas", results.to_pandas), ("xarray", results.to_xarray)):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
        with pytest.raises(ImportError, match=rf'needs {module}, which is not installed: pip install "jaxbandit\[analysis\]"'):
            view()
        monkeypatch.undo()


def test_summary_csv_has_resolved_parameters_as_columns_and_the_bound(results, bounds, tmp_path):
    with (results.directory / "summary.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:6] == ["instance", "noise", "policy", "label", "policy_name", "alpha"]
    for row, cell in zip(rows, results.cells):
        assert row["label"] == cell.label and row["instance"] == cell.instance
        assert row["alpha"] == ("" if cell.policy_name == "ts_n" else repr(float(cell.params["alpha"])))
        assert float(row["mean"]) == pytest.approx(cell.final_regret.mean(), rel=1e-15)
        assert float(row["regret_over_log_T"]) == pytest.approx(cell.final_regret.mean() / math.log(cell.horizon))
        assert float(row["lower_bound"]) == pytest.approx(bounds[cell.instance])
        assert float(row["lower_bound_log_T"]) == pytest.approx(bounds[cell.instance] * math.log(cell.horizon))
        assert row["lower_bound_kind"] == "bound"
        for name in ("case_a", "initial_rounds"):  # a counter's mean; empty where the policy has none
            value = cell.diagnostics.get(name)
            assert row[f"mean_{name}"] == ("" if value is None else repr(float(np.mean(value))))
    assert any(row["mean_case_a"] for row in rows) and any(row["mean_initial_rounds"] for row in rows)
    # one run: no standard error, an empty field (not "nan")
    one_run = dataclasses.replace(results, cells=tuple(dataclasses.replace(c, regret=c.regret[:1]) for c in results.cells))
    path = summary.write_summary_csv(one_run, tmp_path / "one_run.csv")
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["stderr"] for row in rows] == [""] * len(results.cells)
    assert [float(row["mean"]) for row in rows] == [float(c.regret[0, -1]) for c in results.cells]


def test_views_and_the_summary_name_a_wrong_argument(results, tmp_path):
    """What the views and summary.csv take, refused by name where something else is given."""
    cells, bounds = list(results.cells), results.lower_bounds()
    assert {c.instance_digest for c in cells} == {b.instance_digest for b in bounds.values()} and len(bounds) == 2
    # a sweep elsewhere that gave the label 'bandit' to other means, noise levels or
    # noise family: its cells beside these, with these bounds, would take a bound that
    # is not theirs
    bandit = results.instances["bandit"]
    for other in (
        jb.Instance(bandit.mu + 0.1, bandit.sigma),
        jb.Instance(bandit.mu, bandit.sigma * 3),
        jb.Instance(bandit.mu, bandit.sigma, noise="uniform"),
    ):
        elsewhere = dataclasses.replace(cells[0], directory=tmp_path, instance_digest=fingerprint.instance_digest(other))
        assert elsewhere.instance == "bandit"
        for view in (frames.cells_frame, frames.cells_dataset, lambda cells, bounds: summary.summary_rows(cells, bounds)):
            with pytest.raises(jb.ArgumentError, match=rf"bounds\['bandit'\] is the bound of another instance than the one .* ran on in {re.escape(str(tmp_path))} "):
                view([cells[0], elsewhere], bounds=bounds)
    for view in (frames.cells_frame, frames.cells_dataset):
        with pytest.raises(jb.ArgumentError, match=r"bounds must be a dict \{instance label: InstanceBound\} \(results.lower_bounds\(\)\), got boolean True\."):
            view(cells, bounds=True)
        with pytest.raises(jb.ArgumentError, match=r"bounds has no bound of instance 'graph_star'; it has 'bandit' \(results.lower_bounds\(\) has each"):
            view(cells, bounds={"bandit": bounds["bandit"]})
        with pytest.raises(jb.ArgumentError, match=r"bounds\['bandit'\] must be an InstanceBound \(results.lower_bounds\(\)\), got float 23.1\."):
            view(cells, bounds={"bandit": 23.1, "graph_star": bounds["graph_star"]})
        with pytest.raises(jb.ArgumentError, match=r"cells must be a list of jaxbandit.io.CellResult, got the SweepResults"):
            view(results)
    # a SweepResults (not its directory: io imports summary), and a file, not a directory
    written = summary.write_summary_csv(results, tmp_path / "elsewhere.csv")
    assert written.read_text() == (results.directory / "summary.csv").read_text()
    for value in (3, str(results.directory)):
        with pytest.raises(jb.ArgumentError, match=r"results must be a SweepResults \(jaxbandit.load\(directory\) gives one\), got "):
            summary.write_summary_csv(value, tmp_path / "x.csv")
    for path, where in ((tmp_path, "is a directory"), (tmp_path / "none" / "x.csv", "is in '.*none', which is not an existing directory")):
        with pytest.raises(jb.ArgumentError, match=rf"path '.*' {where}; summary.csv is written to a file\."):
            summary.write_summary_csv(results, path)


def test_resolved_parameters_include_the_defaults(results, monkeypatch):
    """A policy at its defaults records them (its written params are empty), its static
    options too (not the contract's feedback declaration); the load gives the seed and
    each instance's noise stream."""
    with_option = lambda rule="largest": fx.cases_policy(1.0)._replace(options={"rule": rule})
    monkeypatch.setitem(jb.policies.REGISTRY, "test_rule", with_option)
    config = fx.base_config(policies=[{"name": "ucb_n"}, {"name": "test_rule"}], instances=fx.BASE["instances"][:1])
    ucb = sweep.run(config, results.directory.parent / "ucb", progress=False)
    assert ucb.cells[0].params == {} and ucb.cells[0].resolved_params == {"alpha": 1.0}
    rule = ucb.cells[1]
    assert rule.params == {} and rule.resolved_params == {"alpha": 1.0, "rule": "largest"}
    assert rule.resolved_label == "test_rule(alpha=1.0, rule=largest)" and rule.matches("test_rule(alpha=1.0, rule=largest)")
    frame = ucb.to_pandas()
    assert frame["alpha"].tolist() == [1.0] * 12 and frame["rule"].fillna("").tolist() == [""] * 6 + ["largest"] * 6
    values = ucb.to_xarray()["rule"].values
    assert pd.isna(values[0]) and values[1] == "largest"
    with (ucb.directory / "summary.csv").open() as handle:
        assert [row["rule"] for row in csv.DictReader(handle)] == ["", "largest"]
    assert base.option_params(jb.policies.make("ucb").options) == {}  # ucb learns from its own arm only
    # a list or a table is one value of a column: its JSON text
    listed = {"window": [7, 9], "table": {"b": 1, "a": 2}, "rule": "x"}
    assert base.option_params(listed) == {"window": "[7, 9]", "table": '{"a": 2, "b": 1}', "rule": "x"}
    bandit = jb.instances.default_instances()["bandit"]
    windowed = jb.simulate(jb.policies.make("ucb_n")._replace(options={"window": [7, 9]}), bandit, 20, 2)
    assert windowed.to_pandas()["window"].tolist() == ["[7, 9]"] * 2 and windowed.to_xarray()["window"].values.tolist() == "[7, 9]"
    ax = Figure().subplots()  # figures show the parameters as resolved
    plotting.regret_curves(ax, ucb.cells)
    assert [line.get_label() for line in ax.get_lines()] == ["ucb_n(alpha=1.0)", rule.resolved_label] and ucb.cells[0].label == "ucb_n"
    ax = Figure().subplots()  # test_rule plays as ucb_n(alpha=1.0): on common noise, every run ties
    plotting.paired_differences(ax, jb.compare(ucb, "test_rule", "ucb_n"))
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{plotting._wrapped(rule.resolved_label)}\n(0% of runs better, 100% tied)"]
    # a long resolved label in lines of at most 30 characters, leaving the axes room
    assert len(rule.resolved_label) > 30 and max(map(len, plotting._wrapped(rule.resolved_label).split("\n"))) <= 30
    assert ax.get_xlabel().startswith("final regret minus ucb_n(alpha=1.0)'s")
    assert {(c.instance, c.seed, c.noise_stream) for c in results.cells} == {("bandit", 3, 0), ("graph_star", 3, 1)}


def test_t_quantile_against_scipy():
    for df in [*range(1, 120), 200, 1000, 10**6]:
        assert comparison.t_quantile_975(df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9), df
    assert comparison.half_width_95(2.0, 20) == pytest.approx(2 * stats.t.ppf(0.975, 19), rel=1e-9)
    with pytest.raises(jb.ArgumentError, match=r"runs must be an integer >= 1, got string '20'"):
        comparison.half_width_95(1.0, "20")


def test_paired_comparison_against_numpy(results):
    rows = jb.compare(results, "cases(alpha=0.5)", "ts_n")
    assert [(r.instance, r.horizon) for r in rows] == [("bandit", 1500), ("graph_star", 1500)]
    for row in rows:
        a = results.select(instance=row.instance, label="cases(alpha=0.5)")[0].final_regret
        b = results.select(instance=row.instance, policy="ts_n")[0].final_regret
        difference = a - b
        half = stats.t.ppf(0.975, difference.size - 1) * difference.std(ddof=1) / np.sqrt(difference.size)
        assert row.runs == 6 and row.mean == pytest.approx(difference.mean(), rel=1e-12)
        assert row.stderr == pytest.approx(difference.std(ddof=1) / np.sqrt(6), rel=1e-12)
        assert (row.low, row.high) == (pytest.approx(difference.mean() - half), pytest.approx(difference.mean() + half))
        assert row.a_better == np.mean(a < b) and row.ties == np.mean(a == b)
    by_criteria = jb.compare(results, {"policy": "cases", "params": {"alpha": 0.5}}, {"policy_name": "ts_n"})
    assert by_criteria == rows


def test_unpaired_or_ambiguous_cells_are_refused_saying_why(results):
    with pytest.raises(jb.ArgumentError, match=r"a = 'cases' matches 3 cells on instance 'bandit' at T = 1500: cases\(alpha=0.5\), ") as caught:
        jb.compare(results, "cases", "ts_n")
    assert caught.value.argument == "a"
    with pytest.raises(jb.ArgumentError, match=r"b = 'ucb' matches no cell; the cells are labelled cases\(alpha=0.5\), ") as caught:
        jb.compare(results, "ts_n", "ucb")
    assert caught.value.argument == "b"
    with pytest.raises(jb.ArgumentError, match=r"a must be a cell or policy label, or a dict of select\(\) criteria, got 3\."):
        jb.compare(results, 3, "ts_n")
    with pytest.raises(jb.ArgumentError, match="pick the same cell ts_n"):
        jb.compare(results, "ts_n", {"policy": "ts_n"})
    other_seed = dataclasses.replace(results, cells=tuple(dataclasses.replace(c, seed=4) for c in results.cells))
    with pytest.raises(ValueError, match=r"cannot pair .* ran with seed 3, ts_n with 4, so they did not run on the same noise"):
        jb.compare([results, other_seed], {"label": "cases(alpha=0.5)", "seed": 3}, {"policy": "ts_n", "seed": 4})
    elsewhere = dataclasses.replace(other_seed, directory=results.directory.parent / "other")
    told = re.escape(f"ts_n of {results.directory} ran with seed 3, ts_n of {elsewhere.directory} with 4")
    with pytest.raises(ValueError, match=told):  # one label twice: the sweeps named
        jb.compare([results, elsewhere], {"policy": "ts_n", "seed": 3}, {"policy": "ts_n", "seed": 4})
    # one label in two sweeps: the message says what tells the cells apart
    with pytest.raises(ValueError, match=r"b = 'ts_n' matches 2 cells .*: ts_n, ts_n; pick one by a dict of select\(\) criteria, .*: seed \[3, 4\]\.$"):
        jb.compare([results, other_seed], {"label": "cases(alpha=0.5)", "seed": 3}, "ts_n")
    with pytest.raises(ValueError, match=r"nothing tells them apart \(one sweep given twice\?\): give each sweep once\.$"):
        jb.compare([results, results], "cases(alpha=0.5)", "ts_n")
    fewer = dataclasses.replace(results, cells=tuple(dataclasses.replace(c, regret=c.regret[:4], group="fewer") for c in results.cells))
    with pytest.raises(ValueError, match="ran with run count 6, ts_n with 4"):
        jb.compare([results, fewer], {"label": "cases(alpha=0.5)", "runs": 6}, {"policy": "ts_n", "runs": 4})
    moved = jb.Instance(results.instances["bandit"].mu + 0.1, results.instances["bandit"].sigma)
    shifted = dataclasses.replace(
        results, instances={**results.instances, "bandit": moved},
        cells=tuple(dataclasses.replace(c, group=f"other-{c.group}") for c in results.cells),
    )  # fmt: skip
    a = {"label": "cases(alpha=0.5)", "group": results.select(label="cases(alpha=0.5)")[0].group}
    b = {"policy": "ts_n", "group": f"other-{results.select(policy='ts_n')[0].group}"}
    with pytest.raises(ValueError, match="instance 'bandit' has other means or noise levels in the two sweeps"):
        jb.compare([results, shifted], a, b)
    assert jb.compare([results, dataclasses.replace(shifted, instances=results.instances)], a, b) == jb.compare(results, a, "ts_n")
    # another precision: the noise itself was rounded otherwise
    double = dataclasses.replace(results, cells=tuple(dataclasses.replace(c, precision="float64") for c in results.cells))
    with pytest.raises(ValueError, match="ran with precision float32, ts_n with float64, so they did not run on the same noise"):
        jb.compare([results, double], {"label": "cases(alpha=0.5)", "precision": "float32"}, {"policy": "ts_n", "precision": "float64"})
    # another noise family: other observations from the same draws
    uniform = dataclasses.replace(results, cells=tuple(dataclasses.replace(c, noise="uniform") for c in results.cells))
    with pytest.raises(ValueError, match="ran with noise family gaussian, ts_n with uniform, so they did not run on the same noise"):
        jb.compare([results, uniform], {"label": "cases(alpha=0.5)", "noise": "gaussian"}, {"policy": "ts_n", "noise": "uniform"})
    # a sweep directory is loaded; anything else is refused naming results
    assert jb.compare(str(results.directory), "cases(alpha=0.5)", "ts_n") == jb.compare(results, "cases(alpha=0.5)", "ts_n")
    with pytest.raises(jb.ArgumentError, match="results must be a SweepResults .* or a sweep directory, got 3"):
        jb.compare([results, 3], "cases(alpha=0.5)", "ts_n")
    with pytest.raises(jb.ArgumentError, match="results must hold at least one sweep, got an empty list"):
        jb.compare([], "cases(alpha=0.5)", "ts_n")


def test_one_label_in_two_sweeps_is_picked_by_its_directory(results, tmp_path):
    """A second sweep in another directory with ts_n only: 'ts_n' matches a cell of each,
    the message names their directories, and a directory criterion picks one."""
    assert {c.directory for c in results.cells} == {results.directory.resolve()}
    assert results.select(directory=str(results.directory)) == list(results.cells)
    with pytest.raises(jb.ArgumentError, match=r"directory must be a path .* got 3"):
        results.select(directory=3)
    other = tmp_path.resolve()
    ts_only = dataclasses.replace(
        results, directory=other, cells=tuple(dataclasses.replace(c, directory=other) for c in results.select(policy="ts_n"))
    )
    told = re.escape(f"directory {[str(results.directory.resolve()), str(other)]}")
    with pytest.raises(ValueError, match=rf"a = 'ts_n' matches 2 cells on instance 'bandit' at T = 1500: ts_n, ts_n; .*: {told}\.$"):
        jb.compare([results, ts_only], "ts_n", "cases(alpha=0.5)")
    expected = jb.compare(results, "ts_n", "cases(alpha=0.5)")
    assert jb.compare([results, ts_only], {"label": "ts_n", "directory": other}, "cases(alpha=0.5)") == expected
    # two groups of one sweep: the message names group, which picks one
    ts_n = results.select(policy="ts_n")
    regrouped = dataclasses.replace(results, cells=results.cells + tuple(dataclasses.replace(c, group="g099") for c in ts_n))
    with pytest.raises(ValueError, match=rf"what tells them apart: group \['{ts_n[0].group}', 'g099'\]\.$"):
        jb.compare(regrouped, "ts_n", "cases(alpha=0.5)")
    assert jb.compare(regrouped, {"label": "ts_n", "group": "g099"}, "cases(alpha=0.5)") == expected


def test_a_comparison_of_an_unfinished_sweep_says_what_is_not_there(results, caplog):
    """Shards still running: a policy not finished yet is named as such, not unknown,
    and the groups left out are logged."""
    ts_group = results.select(policy="ts_n")[0].group
    partial = dataclasses.replace(results, cells=tuple(c for c in results.cells if c.group != ts_group), missing=(ts_group,))
    with pytest.raises(ValueError, match=rf"b = 'ts_n' matches no cell; .* \(groups not finished yet: .*{ts_group} \(ts_n"):
        jb.compare(partial, "cases(alpha=0.5)", "ts_n")
    assert f"left out of the comparison: {results.directory}: {ts_group} (ts_n on bandit, graph_star" in caplog.text
    with pytest.raises(ValueError, match=rf"share no instance and horizon: nothing to pair \(groups not finished yet: .*{ts_group} \(ts_n"):
        jb.compare(partial, {"label": "cases(alpha=0.5)", "instance": "bandit"}, {"label": "cases(alpha=1.0)", "instance": "graph_star"})


def test_compare_command_prints_the_table_and_json(results, capsys):
    rows = jb.compare(results, "cases(alpha=0.5)", "ts_n")
    assert cli.main(["compare", str(results.directory), "cases(alpha=0.5)", "ts_n"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["instance", "T", "a", "b"] and len(lines) == 1 + len(rows)
    assert lines[1].split()[:6] == ["bandit", "1500", "cases(alpha=0.5)", "ts_n", "6", f"{rows[0].mean:.6g}"]
    assert cli.main(["compare", str(results.directory), "cases(alpha=0.5)", "ts_n", "--json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [dataclasses.asdict(r) for r in rows]
    assert cli.main(["compare", str(results.directory), "cases", "ts_n"]) == cli.EXIT_ERROR
    assert "a = 'cases' matches 3 cells on instance 'bandit'" in capsys.readouterr().err


def test_plot_draws_paired_differences_against_the_reference(results, tmp_path):
    paths = plotting.plot_sweep(results, tmp_path, formats=("png",), logy=True, policies=["ts_n", "cases(alpha=1.0)"], reference="ts_n")
    stems = {p.stem for p in paths if p.suffix == ".png"}
    assert stems == {f"{kind}_{inst}" for inst in ("bandit", "graph_star") for kind in ("regret", "regret_log", "final", "case_mix", "paired")}
    with pytest.raises(jb.ArgumentError, match=r"policies names \['ucb'\], which no cell has; the labels are 'cases\(alpha=0.5\)', "):
        plotting.plot_sweep(results, tmp_path, policies=["ucb"])
    with pytest.raises(ValueError, match=r"reference 'cases' is not among the cells drawn \(add it to the policies drawn\); those are ts_n\.$"):
        plotting.plot_sweep(results, tmp_path, policies=["ts_n"], reference="cases")
    # a policy label that picks one cell among those drawn: paired among those drawn
    paths = plotting.plot_sweep(results, tmp_path / "one", formats=("png",), policies=["cases(alpha=0.5)", "ts_n"], reference="cases")
    assert {p.stem for p in paths if p.stem.startswith("paired_")} == {"paired_bandit", "paired_graph_star"}
    # a policy label of several cells, refused before anything is drawn, naming reference
    with pytest.raises(ValueError, match="reference = 'cases' matches 3 cells on instance 'bandit'"):
        plotting.plot_sweep(results, tmp_path / "not_drawn", reference="cases")
    assert not (tmp_path / "not_drawn").exists()
    ax = Figure().subplots()
    rows = jb.compare(results, "cases(alpha=1.0)", "ts_n")
    plotting.paired_differences(ax, rows)
    assert ax.get_xlabel() == "final regret minus ts_n's, run by run\n(mean, 95% interval)"
    # rows of two instances: each tick says which
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"cases(alpha=1.0) ({r.instance})\n({r.a_better:.0%} of runs better)" for r in rows]


def test_readme_analysis_snippets_run_as_written(tmp_path, monkeypatch, capsys):
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Analysing results"):]
    section = section[: section.index("\n## ")]
    snippets = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(snippets) == 3
    demo = fx.base_config(
        policies=[{"name": "ucb_n", "alpha": [0.5, 1.0]}, {"name": "ts_n"}],
    )  # the demo's labels on two of its instances, at test size
    monkeypatch.chdir(tmp_path)
    sweep.run(demo, "jaxbandit-demo", progress=False)
    namespace: dict = {}
    for snippet in snippets:
        exec(compile(snippet, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert namespace["table"].shape == (6, 2) and dict(namespace["mean_curves"].sizes) == {"cell": 3, "time": 12}
    assert "bandit: " in out and "graph_star: " in out and "ts_n better in" in out


def test_hyper_parameters_named_as_the_dataset_s_own_names_are_prefixed():
    """A user's policy with parameters ``counts`` and ``arm``: neither takes the place of
    the dataset's variable or dimension of that name."""
    policy = user_policies.named_as_the_views(counts=0.25)
    result = jb.simulate(policy, jb.instances.bandit([1.0, 0.5]), horizon=20, runs=2, times=[10])
    data = result.to_xarray()
    assert data["counts"].dims == ("run", "arm") and "arm" not in data.coords
    assert (float(data["param_counts"]), float(data["param_arm"])) == (0.25, 0.0)
    frame = result.to_pandas()  # the frame names them alike
    assert set(frame["param_counts"]) == {0.25} and set(frame["param_arm"]) == {0.0}


def test_a_name_the_view_uses_itself_is_prefixed(results):
    """A hyper-parameter called ``run`` or a counter called ``alpha`` keeps its value
    under a prefixed column instead of overwriting (or being overwritten by) another."""
    cell = results.select(label="cases(alpha=0.5)")[0]
    odd = dataclasses.replace(cell, resolved_params={"run": 7.0, "alpha": 0.5}, diagnostics={"alpha": cell.diagnostics["case_a"]})
    frame = frames.cells_frame([odd])
    assert frame["run"].tolist() == list(range(6)) and set(frame["param_run"]) == {7.0}
    np.testing.assert_array_equal(frame["diagnostic_alpha"], cell.diagnostics["case_a"])
    assert set(frame["alpha"]) == {0.5}
    # summary.csv: a hyper-parameter named as a counter's mean column keeps its value
    counted = dataclasses.replace(cell, resolved_params={"mean_case_a": 9.5, "alpha": 0.5})
    row = summary.summary_rows([counted], results.lower_bounds())[0]
    assert row["param_mean_case_a"] == 9.5 and row["mean_case_a"] == float(np.mean(cell.diagnostics["case_a"]))
    data = frames.cells_dataset([odd])  # the dataset names them as the frame does
    np.testing.assert_array_equal(data["diagnostic_alpha"].values[0], cell.diagnostics["case_a"])
    assert data["param_run"].values.tolist() == [7.0] and data["alpha"].values.tolist() == [0.5]


def test_results_compare_by_identity(results):
    """Arrays have no one truth value: a result equals itself only, and hashes."""
    cell = results.cells[0]
    assert cell == cell and cell != dataclasses.replace(cell) and len({cell, results.cells[1]}) == 2
    assert results.cells.index(cell) == 0 and results == results != jb.load(results.directory)
    single = jb.simulate(jb.policies.make("ts_n"), jb.instances.bandit([1.0, 0.5]), horizon=4, runs=2)
    assert single == single != dataclasses.replace(single) and hash(single) == hash(single)


def test_seeds_beyond_int64_and_bounds_none_has_solved_keep_their_columns(results):
    """Seeds above 2**63 (a configuration takes any 64-bit seed) beside small ones stay
    distinct integers in both views, not floats that merge two sweeps' seeds; a view
    whose instances have no solved bound has NaN bounds, as where some have one."""
    cell = results.select(policy="ts_n")[0]
    seeds = [2**64 - 1, 2**64 - 2, 1]
    cells = [dataclasses.replace(cell, seed=seed, directory=Path(f"/sweep{i}")) for i, seed in enumerate(seeds)]
    frame = jb.frames.cells_frame(cells)
    assert frame["seed"].dtype == np.uint64
    assert frame.groupby("seed").size().to_dict() == {seed: cell.runs for seed in seeds}
    data = jb.frames.cells_dataset(cells)
    assert data["seed"].dtype == np.uint64 and list(data["seed"].values) == seeds
    unsolved = {cell.instance: summary.InstanceBound(None, "bound")}
    for curves in (False, True):
        frame = jb.frames.cells_frame([cell], curves=curves, bounds=unsolved)
        assert frame["lower_bound"].isna().all() and frame["lower_bound_log_T"].isna().all()
        assert frame["lower_bound"].dtype == np.float64
