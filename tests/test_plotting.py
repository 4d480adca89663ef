"""Figures of a sweep: every figure written, non-empty, in PNG and PDF; the pieces."""

import dataclasses
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

import jaxbandit as jb
from jaxbandit import plotting, summary, sweep
from tests import sweep_fixtures as fx


@pytest.fixture(scope="module", autouse=True)
def _test_policy():
    with fx.registered():
        yield

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return sweep.run(fx.base_config(), tmp_path_factory.mktemp("plots"), progress=False)


def _check_images(paths, stems):
    by_suffix = {(p.stem, p.suffix) for p in paths}
    for stem in stems:
        assert (stem, ".png") in by_suffix and (stem, ".pdf") in by_suffix, stem
    for path in paths:
        data = path.read_bytes()
        if path.suffix == ".csv":
            assert data.startswith(b"instance,noise,policy,")
            continue
        assert len(data) > 2000, path
        assert data.startswith(PNG_MAGIC if path.suffix == ".png" else b"%PDF"), path


def test_plot_sweep_writes_every_figure(results, monkeypatch):
    unsolved = lambda instances: {label: summary.InstanceBound(None, "bound") for label in instances}  # noqa: E731
    monkeypatch.setattr(summary, "lower_bounds", unsolved)  # no bound line
    paths = plotting.plot_sweep(results.directory)
    kinds = ("regret", "regret_log", "final", "case_mix", "paired")
    stems = [f"{kind}_{inst}" for inst in ("bandit", "graph_star") for kind in kinds]
    assert sorted({p.stem for p in paths if p.suffix != ".csv"}) == sorted(stems)
    assert all(p.parent == results.directory / "plots" for p in paths if p.suffix != ".csv")
    assert paths[0] == results.directory / "summary.csv"
    _check_images(paths, stems)


def test_violin_logx_and_formats(results, tmp_path, monkeypatch):
    drawn_bounds, draw = [], plotting.regret_over_log
    monkeypatch.setattr(plotting, "regret_over_log", lambda ax, cells, **kw: drawn_bounds.append(kw["bound"]) or draw(ax, cells, **kw))
    paths = plotting.plot_sweep(results, tmp_path, logx=True, distribution="violin", formats=("png",), bound=False)
    assert {p.suffix for p in paths} == {".png", ".csv"}
    assert len([p for p in paths if p.suffix == ".png"]) == 10
    plotting.plot_sweep(results, tmp_path, formats=("png",))
    bounds = results.lower_bounds()
    assert drawn_bounds == [None, None, bounds["bandit"].value, bounds["graph_star"].value]  # solved, drawn if asked
    assert None not in drawn_bounds[2:]
    with pytest.raises(ValueError, match="distribution must be 'box' or 'violin'"):
        plotting.plot_sweep(results, tmp_path, distribution="bar")
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match=r"out_dir '.*a_file' exists and is not a directory"):
        plotting.plot_sweep(results, tmp_path / "a_file")
    with pytest.raises(ValueError, match=r"formats must name each format once, got \['png', 'png'\]"):
        plotting.plot_sweep(results, tmp_path, formats=["png", "png"])
    for flag in ("logx", "logy", "bound"):  # "no" would read as True
        with pytest.raises(ValueError, match=rf"{flag} must be True or False, got string 'no'"):
            plotting.plot_sweep(results, tmp_path, **{flag: "no"})


def test_axes_functions_name_what_is_wrong(results):
    """Errors naming the argument, not matplotlib's or a format's."""
    ax = Figure().subplots()
    cell = results.cells[0]
    for draw in (plotting.regret_curves, plotting.regret_over_log, plotting.final_distribution):
        with pytest.raises(ValueError, match="cells must hold at least one cell"):
            draw(ax, [])
        with pytest.raises(ValueError, match=rf"colors must give a color for every cell label; missing \['{re.escape(cell.label)}'\]"):
            draw(ax, [cell], colors={"another": "red"})
    for bound in ("1.5", float("nan"), True, -1.0, summary.InstanceBound(1.5, "bound")):  # not a legend of "nan" or a line at 1
        with pytest.raises(jb.ArgumentError, match=rf"bound must be a (finite )?number >= 0, got {re.escape(repr(bound))}"):
            plotting.regret_over_log(ax, [cell], bound=bound)
    without = dataclasses.replace(cell, diagnostic_history={})
    with pytest.raises(ValueError, match="recorded no case_\\* counters"):
        plotting.case_mix(ax, without)
    # a sweep, one cell or something else where the cells belong: named, with what to give
    for wrong, got in ((results, r"the SweepResults of .*: give results.cells, or results.select\(...\) for some of them"),
                       (cell, r"one cell \(cases\(alpha=0.5\) on 'bandit'\): give a list of it, \[cell\]"),
                       ("ts_n", r"string 'ts_n' \(a sweep's cells are results.cells\)"),
                       ([cell, 3], r"cells\[1\] = 3 \(a sweep's cells are results.cells\)")):  # fmt: skip
        for draw in (plotting.regret_curves, plotting.regret_over_log, plotting.final_distribution):
            with pytest.raises(jb.ArgumentError, match=rf"cells must be a list of jaxbandit.io.CellResult, got {got}\."):
                draw(ax, wrong)
    with pytest.raises(jb.ArgumentError, match=r"cell must be one jaxbandit.io.CellResult, got a tuple of 1: give one of its entries\."):
        plotting.case_mix(ax, results.cells[:1])


def test_a_horizon_of_one_round_plots(results, tmp_path):
    """Regret / log t has no point t >= 2 to draw: the figure says so instead of
    failing to draw a log axis of nothing (a sweep with horizon = 1 could not be plotted)."""
    cell = results.cells[0]
    one_round = dataclasses.replace(cell, times=cell.times[:1] * 0 + 1, regret=cell.regret[:, :1], horizon=1)
    fig = Figure()
    plotting.regret_over_log(fig.subplots(), [one_round])
    fig.savefig(tmp_path / "one_round.png")
    assert fig.axes[0].texts[0].get_text() == "no recorded round t >= 2"


def _renamed(results, directory, renamed: dict, **changes):
    """``results``' ts_n cells of each source instance under a new instance name
    (``{name: source}``), with ``changes`` to every cell, as a sweep in ``directory``."""
    cells = [
        dataclasses.replace(cell, instance=label, **changes)
        for label, source in renamed.items()
        for cell in results.select(instance=source, policy="ts_n")
    ]
    return dataclasses.replace(
        results, directory=directory, cells=tuple(cells),
        instances={label: results.instances[source] for label, source in renamed.items()},
    )  # fmt: skip


def test_figures_keep_their_names_as_groups_finish_and_stale_ones_go(results, tmp_path):
    """Figure names come from the sweep's plan (its horizons and instances), not from
    the cells finished so far, and a plot removes the figures of these names it does not
    draw this time: an earlier plot's figure (of fewer horizons, or of more cells)
    never sits beside this plot's as if it were current."""
    longer = {"g_long": {**next(iter(results.plan.values())), "horizon": 3000}}  # planned, not finished
    planned = dataclasses.replace(results, plan={**results.plan, **longer}, missing=("g_long",))
    partial = dataclasses.replace(planned, cells=tuple(results.select(instance="bandit")))
    out = tmp_path / "plots"

    def listed(paths):
        assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths if p.suffix == ".png")
        return {p.name for p in paths}

    assert "regret_bandit_T1500.png" in listed(plotting.plot_sweep(partial, out, formats=("png",)))
    names = listed(plotting.plot_sweep(planned, out, formats=("png",)))
    assert {"regret_graph_star_T1500.png", "paired_bandit_T1500.png", "case_mix_bandit_T1500.png"} <= names
    names = listed(plotting.plot_sweep(planned, out, formats=("png",), policies=["ts_n"]))  # no pairs, no cases
    assert not any(n.startswith(("paired_", "case_mix_")) for n in names) and "final_bandit_T1500.png" in names
    (out / "paired_bandit_T1500.pdf").write_bytes(b"%PDF")  # another format than this call's: left alone
    plotting.plot_sweep(planned, out, formats=("png",), policies=["ts_n"])
    assert (out / "paired_bandit_T1500.pdf").exists()


def test_instance_names_that_share_a_file_name_get_distinct_files(results, tmp_path):
    """Labels with dots (``sigma0.5``, ``sigma0.7``) keep their end, and labels the file
    names map to one (``a b``, ``a_b``), or that run together with a figure's stem
    (``regret_`` + ``log_x`` is ``regret_log_`` + ``x``), get distinct files: no figure
    overwrites another."""
    renamed = {"sigma0.5": "bandit", "sigma0.7": "graph_star", "a b": "bandit", "a_b": "graph_star",
               "x": "bandit", "log_x": "graph_star"}  # fmt: skip
    relabelled = _renamed(results, tmp_path, renamed)
    paths = plotting.plot_sweep(relabelled, tmp_path / "plots", formats=("png",), bound=False)
    figures = [p for p in paths if p.suffix == ".png"]
    assert len(figures) == len(set(figures)) == 3 * 6
    names = {p.name for p in figures}
    assert {"regret_sigma0.5.png", "regret_sigma0.7.png", "final_a_b.png", "final_a_b_3.png"} <= names
    assert {"regret_x.png", "regret_log_x.png", "regret_log_x_5.png", "regret_log_log_x_5.png"} <= names
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(names)


def test_long_names_and_dollar_signs_are_file_names_and_text(results, tmp_path):
    """A 300-character instance name gets a file name within the filesystem's limit
    (two that share their first characters, two files); a "$" in a name or a label is
    shown as written, not read as mathtext (which fails on ``\\badcmd``)."""
    renamed = {"L" * 300: "bandit", "L" * 299 + "M": "graph_star", "cost $5 vs $6": "bandit"}
    relabelled = _renamed(results, tmp_path, renamed, policy="UCB $\\badcmd$")
    cells = relabelled.cells
    paths = plotting.plot_sweep(relabelled, tmp_path / "plots", formats=("png",), bound=False)
    figures = [p for p in paths if p.suffix == ".png"]
    assert len(figures) == len(set(figures)) == 3 * 3 and max(len(p.name) for p in figures) < 255
    assert "final_cost_5_vs_6.png" in {p.name for p in figures}
    # the names escaped where drawn; the log axis' own mathtext ticks still parsed
    fig = Figure()
    ax = fig.subplots()
    plotting.regret_curves(ax, [c for c in cells if c.instance == "cost $5 vs $6"])
    fig.savefig(tmp_path / "drawn.png")
    assert ax.get_legend_handles_labels()[1] == ["UCB \\$\\badcmd\\$"]
    assert all(t.get_parse_math() for t in ax.get_xticklabels()) and "mathdefault" in ax.get_xticklabels()[1].get_text()
    # a label matplotlib's legend would hide (a leading "_") is kept
    fig = Figure()
    ax = fig.subplots()
    plotting.regret_curves(ax, [dataclasses.replace(c, policy="_base") for c in cells if c.instance == "cost $5 vs $6"])
    assert ax.get_legend_handles_labels()[1] == ["\u200b_base"]


def test_lower_bound_line_only_where_the_bound_is_solved(results, monkeypatch, caplog):
    class Bound:
        value, status, kind = np.array([7.5]), np.array([0]), "bound"

    monkeypatch.setattr(summary, "lower_bound", lambda instance, throw, reference: Bound())
    bandit = {"bandit": results.instances["bandit"]}
    assert summary.lower_bounds(bandit) == {"bandit": summary.InstanceBound(7.5, "bound")}
    Bound.status = np.array([1])  # not optimal: no line rather than a wrong one
    assert summary.lower_bounds(bandit) == {"bandit": summary.InstanceBound(None, "bound")}

    def failing(instance, throw, reference):
        raise ValueError("mu has a tie for the best mean")

    monkeypatch.setattr(summary, "lower_bound", failing)  # a bound that raises: no line, and why
    assert summary.lower_bounds(bandit) == {"bandit": summary.InstanceBound(None, "bound")}
    assert "mu has a tie for the best mean" in caplog.text

    ax = Figure().subplots()
    plotting.regret_over_log(ax, results.select(instance="bandit"), bound=7.5)
    assert "LP lower bound (7.5)" in [line.get_label() for line in ax.get_lines()]
    assert len(ax.get_lines()) == 5  # 4 cells + the bound


def test_a_family_without_a_bound_gets_the_gaussian_reference_labelled_so(results):
    uniform = jb.Instance(results.instances["bandit"].mu, results.instances["bandit"].sigma, noise="uniform")
    found = summary.lower_bounds({"uniform": uniform, "bandit": results.instances["bandit"]})
    assert found["uniform"].value == pytest.approx(float(jb.lower_bound(results.instances["bandit"]).value))
    assert found["uniform"].kind == "gaussian reference" and found["bandit"].kind == "bound"


def test_case_mix_shares_sum_to_one(results):
    cell = results.select(instance="graph_star", params={"alpha": 1.0})[0]
    assert plotting.case_counters(cell) == ["case_a", "case_b", "case_c"]
    ax = Figure().subplots()
    plotting.case_mix(ax, cell)
    stacked = np.stack([np.asarray(c.get_paths()[0].vertices) for c in ax.collections])
    assert len(ax.collections) == 3 and np.nanmax(stacked[..., 1]) == pytest.approx(1.0)
    # each interval's band spans it, the first from round 1: a horizon recorded once too
    times = np.asarray(cell.diagnostic_times)
    assert np.nanmin(stacked[..., 0]) == 1 and np.nanmax(stacked[..., 0]) == times[-1]
    last = {k: np.asarray(v)[..., -1:] for k, v in cell.diagnostic_history.items()}
    once = dataclasses.replace(cell, diagnostic_times=times[-1:], diagnostic_history=last)
    ax = Figure().subplots()
    plotting.case_mix(ax, once)
    top = np.stack([np.asarray(c.get_paths()[0].vertices) for c in ax.collections])
    assert np.nanmin(top[..., 0]) == 1 and np.nanmax(top[..., 0]) == times[-1]
    assert np.nanmax(top[..., 1]) == pytest.approx(1.0)
    ts_cell = results.select(policy="ts_n")[0]
    assert plotting.case_counters(ts_cell) == []


def test_bands_are_students_t_intervals_as_compare_gives(results):
    """A cell's band at its last recorded round spans mean +- t_{0.975, runs - 1} standard
    errors, the interval jb.compare gives (not the normal 1.96, too narrow for few runs)."""
    cell = results.cells[0]
    half = jb.comparison.t_quantile_975(cell.runs - 1) * cell.standard_error()[-1]
    for draw, scale in ((plotting.regret_curves, 1.0), (plotting.regret_over_log, np.log(cell.times[-1]))):
        ax = Figure().subplots()
        draw(ax, [cell])
        (band,) = ax.collections
        edge = np.asarray(band.get_paths()[0].vertices)
        at_end = edge[edge[:, 0] == cell.times[-1], 1]
        mean = cell.mean_regret()[-1] / scale
        np.testing.assert_allclose([at_end.min(), at_end.max()], [mean - half / scale, mean + half / scale], rtol=1e-12)


def test_figure_titles_name_the_noise_and_count_runs(results):
    cell = results.cells[0]
    one = dataclasses.replace(cell, regret=cell.regret[:1], noise="bernoulli")
    assert plotting._title([one]) == f"{cell.instance}, bernoulli noise, T = {cell.horizon}, 1 run"
    assert plotting._title([cell], "\n") == f"{cell.instance},\nT = {cell.horizon}, {cell.runs} runs"
    ax = Figure().subplots()
    plotting.final_distribution(ax, [cell, one])
    assert ax.get_ylabel() == f"regret at T = {cell.horizon}\n(box: quartiles, line: median, triangle: mean)"


def test_cells_that_share_a_label_get_their_own_color_and_name(results, tmp_path):
    """ts_n on two instances, at two horizons, or of two sweeps: a color per cell and a
    legend or tick that says what differs; distinct labels keep the sweep figures' colors."""
    ts_n = results.select(label="ts_n")
    for draw in (plotting.regret_curves, plotting.regret_over_log):
        ax = Figure().subplots()
        draw(ax, ts_n)
        assert [line.get_label() for line in ax.get_lines()] == ["ts_n (bandit)", "ts_n (graph_star)"]
        assert len({line.get_color() for line in ax.get_lines()}) == 2
    bandit, labels = results.select(instance="bandit"), results.policy_labels
    ax = Figure().subplots()
    plotting.regret_curves(ax, bandit)
    assert [line.get_label() for line in ax.get_lines()] == [c.resolved_label for c in bandit]
    assert [line.get_color() for line in ax.get_lines()] == [plotting._palette(len(labels))[labels.index(c.label)] for c in bandit]
    longer = dataclasses.replace(ts_n[0], horizon=3000)  # a T of its own: each tick says its T
    ax = Figure().subplots()
    plotting.final_distribution(ax, [ts_n[0], longer])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ts_n (T = 1500)", "ts_n (T = 3000)"]
    assert ax.get_ylabel().startswith("regret at each cell's horizon T\n")
    assert len({tuple(box.get_facecolor()) for box in ax.patches}) == 2
    swept = [dataclasses.replace(ts_n[0], directory=tmp_path / name / "out") for name in ("a", "b")]
    for cells, names in (([dataclasses.replace(ts_n[0], directory=tmp_path / name) for name in ("a", "b")], ["a", "b"]),
                         (swept, [str(tmp_path / name / "out") for name in ("a", "b")])):  # fmt: skip
        ax = Figure().subplots()
        plotting.regret_curves(ax, cells)
        assert [line.get_label() for line in ax.get_lines()] == [f"ts_n ({name})" for name in names]
    # colors by label cannot tell them apart: one per cell instead
    with pytest.raises(jb.ArgumentError, match=r"cells share a label: ts_n \(bandit\), ts_n \(graph_star\); give a list"):
        plotting.regret_curves(Figure().subplots(), ts_n, colors={"ts_n": "red"})
    ax = Figure().subplots()
    plotting.regret_curves(ax, ts_n, colors=["red", "blue"])
    assert [line.get_color() for line in ax.get_lines()] == ["red", "blue"]
    ax = Figure().subplots()  # a colormap's (N, 4) array: a row per cell
    plotting.regret_curves(ax, ts_n, colors=np.array([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0]]))
    assert [tuple(line.get_color()) for line in ax.get_lines()] == [(1.0, 0.0, 0.0, 1.0), (0.0, 0.0, 1.0, 1.0)]
    for colors, message in ((["red"], r"a list of 2 colors, one per cell, got array \['red'\]"), (["red", "nope"], "'nope', which is not")):
        with pytest.raises(jb.ArgumentError, match=message):
            plotting.regret_curves(Figure().subplots(), ts_n, colors=colors)
