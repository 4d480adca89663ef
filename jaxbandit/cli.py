"""The ``jaxbandit`` command line: ``run``, ``plot``, ``compare``, ``demo``, ``bound``, ``check``.

Every command is a thin wrapper around a function of the Python API
(:func:`jaxbandit.sweep.run`, :func:`jaxbandit.plotting.plot_sweep`, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxbandit import comparison, compile_cache, distributed, io, shards, stopping, sweep
from jaxbandit import config as config_module
from jaxbandit._numbers import decimal_literal
from jaxbandit.bound import _raise_for_status, lower_bound
from jaxbandit.bound_lp import LowerBoundStatus
from jaxbandit.config import ConfigError, instance_file
from jaxbandit.config.schema import split_labels
from jaxbandit.instances import Instance, check_unique_best, explicit
from jaxbandit.sweep import SweepMismatchError

__all__ = ["console", "main"]

EXIT_ERROR = 1  # a run or plot that failed on its input or files (message on stderr)
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
DEFAULT_DISTRIBUTION = "box"  # --distribution's default; the parser's None says it was not given


def _error(message, status: int = EXIT_USAGE) -> int:
    print(f"jaxbandit: error: {message}", file=sys.stderr)
    return status


def _configure_logging(quiet: bool) -> None:
    # --quiet: no progress bar, timestamped log lines instead (for batch jobs and logs).
    package_logger = logging.getLogger("jaxbandit")
    if quiet and not package_logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        process = distributed.process_label()  # "" in a single process
        handler.setFormatter(logging.Formatter(f"%(asctime)s {process}%(name)s: %(message)s"))
        package_logger.addHandler(handler)
        package_logger.setLevel(logging.INFO)


def _cmd_run(args) -> int:
    """``run``, and ``demo`` of the built-in configuration."""
    from jaxbandit import plotting  # matplotlib: only where a figure is drawn

    if args.command == "demo":
        cfg = args.config = config_module.demo_config()
        print(f"demo: {len(cfg.instances)} instances x {', '.join(p.name for p in cfg.policies)}; "
              f"{cfg.runs} runs, horizon {cfg.horizons[0]}")  # fmt: skip
    out = Path(args.out)
    if not args.plot and (args.logx or args.distribution is not None):  # they would be ignored
        return _error("--logx and --distribution shape the figures of --plot; give --plot too.")
    start = time.perf_counter()
    results = sweep.run(args.config, out, shard=args.shard, progress=not args.quiet)
    elapsed = time.perf_counter() - start
    if not distributed.is_writer():  # process 0 reports for every process
        return 0
    what = "sweep" if args.shard is None else f"shard {args.shard}"
    # the directory's count: a shard's own cells are only some of them
    print(f"{what} finished in {elapsed:.1f} s; {out} holds {len(results.cells)} finished cells")
    if results.missing:
        print(f"not finished yet ({len(results.missing)} of {len(results.plan)} groups): "
              f"{'; '.join(results.describe_missing())}")  # fmt: skip
    print(f"summary: {out / 'summary.csv'}")
    if args.plot:
        paths = plotting.plot_sweep(results, distribution=args.distribution or DEFAULT_DISTRIBUTION, logx=args.logx)
        figures = sorted({p.stem for p in paths if p.suffix != ".csv"})
        print(f"plots ({len(figures)} figures, PNG and PDF): {paths[-1].parent}")
    return 0


def _shard_option(text: str):
    try:
        return shards.parse(text)
    except ValueError as err:  # argparse shows this message, not its own "invalid value"
        raise argparse.ArgumentTypeError(str(err)) from None


def _cmd_plot(args) -> int:
    from jaxbandit import plotting  # matplotlib: only where a figure is drawn

    formats = split_labels(args.format)
    supported = plotting.supported_formats()
    if not formats or any(f not in supported for f in formats):
        return _error(f"--format must list formats among {', '.join(supported)}, got {args.format!r}.")
    paths = plotting.plot_sweep(
        args.dir, args.out, logx=args.logx, logy=args.logy, distribution=args.distribution or DEFAULT_DISTRIBUTION,
        formats=formats,
        bound=not args.no_bound, policies=args.policies, reference=args.reference,
    )  # fmt: skip
    for path in paths:
        print(path)
    return 0


def _json_number(value) -> float | None:
    """A float for strict JSON: one that is not finite (no optimum) is null."""
    return float(value) if np.isfinite(value) else None


def _cmd_compare(args) -> int:
    rows = comparison.compare(io.load(args.dir), args.a, args.b)
    if args.json:
        for row in rows:  # strict JSON: a value that does not exist (one run's stderr) is null
            record = {k: _json_number(v) if isinstance(v, float) else v for k, v in dataclasses.asdict(row).items()}
            print(json.dumps(record, allow_nan=False))
    else:
        print(comparison.format_table(rows))
    return 0


def _cmd_check(args) -> int:
    cfg = config_module.load(args.config)
    groups = cfg.plan()
    cells = sum(len(g.cells) for g in groups)
    print(f"{args.config}: valid. {len(cfg.instances)} instances, {len(cfg.policies)} policies, "
          f"{cells} cells in {len(groups)} compiled groups, {cfg.runs} runs each.")  # fmt: skip
    for g in groups:
        noise = g.instance.noise.label
        print(f"  {g.id}: {g.policy_name} {g.static or ''} K={g.num_arms} T={g.horizon} {noise}: {len(g.cells)} cells")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxbandit",
        description="Regret sweeps of Gaussian bandits with side observations, in JAX.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def cache_option(p):
        p.add_argument("--compile-cache", default=None, metavar="DIR", help=(
            "keep compiled programs in DIR (or a URL such as gs://bucket/xla) for later "
            "runs ('off': do not; default: "
            "$JAXBANDIT_COMPILE_CACHE, else $JAX_COMPILATION_CACHE_DIR, else "
            "$XDG_CACHE_HOME/jaxbandit/xla, i.e. ~/.cache/jaxbandit/xla)"))  # fmt: skip

    def plot_options(p):
        p.add_argument("--logx", action="store_true", help="log scale for the time axis of regret curves")
        p.add_argument("--distribution", choices=("box", "violin"), default=None,
                       help=f"final-regret plot kind (default: {DEFAULT_DISTRIBUTION})")

    p = commands.add_parser("run", help="run (or resume) a sweep configuration", description=(
        "Run every cell of a TOML sweep configuration, saving results and checkpoints in "
        "DIR. Re-running the same command resumes an interrupted sweep."))  # fmt: skip
    p.add_argument("config", help="sweep configuration (TOML)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress bar; timestamped log lines instead")
    p.add_argument("--plot", action="store_true", help="write the figures when done")
    p.add_argument("--shard", type=_shard_option, default=None, metavar="I/N", help=(
        "run only shard I of N of the cell groups (0-based: I in 0..N-1, as SLURM_ARRAY_TASK_ID "
        "with --array=0-(N-1)); N jobs fill one DIR"))  # fmt: skip
    cache_option(p)
    plot_options(p)
    distributed.add_cli_options(p)
    p.set_defaults(handler=_cmd_run)

    p = commands.add_parser("plot", help="figures and summary.csv of a sweep directory")
    p.add_argument("dir", help="sweep directory")
    p.add_argument("--out", default=None, metavar="PLOTDIR", help="where to write (default DIR/plots)")
    p.add_argument("--format", default="png,pdf", help="comma-separated formats (default png,pdf)")
    p.add_argument("--no-bound", action="store_true", help="omit the LP lower bound line")
    p.add_argument("--logy", action="store_true", help="log scale for the regret axis of regret and regret / log t")
    p.add_argument("--policies", type=split_labels, default=None, metavar="A,B,...",
                   help="cell or policy labels to draw (default: all)")  # fmt: skip
    p.add_argument("--reference", default=None, metavar="NAME", help=(
        "cell or policy label that the paired-difference figures compare every other against "
        "(default: the first policy)"))  # fmt: skip
    cache_option(p)
    plot_options(p)
    p.set_defaults(handler=_cmd_plot)

    p = commands.add_parser("compare", help="paired difference of two policies' final regret", description=(
        "The paired difference A - B of final regret per instance and horizon, run by run on the "
        "sweep's common noise: mean, standard error, 95% interval, and how often A had less regret."))  # fmt: skip
    p.add_argument("dir", help="sweep directory")
    p.add_argument("a", metavar="A", help="cell label (e.g. 'ucb_n(alpha=0.5)') or policy label")
    p.add_argument("b", metavar="B", help="cell label or policy label")
    p.add_argument("--json", action="store_true", help="one JSON object per row")
    cache_option(p)
    p.set_defaults(handler=_cmd_compare)

    p = commands.add_parser("demo", help="run the small built-in sweep and plot it")
    p.add_argument("--out", default="jaxbandit-demo", metavar="DIR", help="output directory (default ./jaxbandit-demo)")
    cache_option(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar; timestamped log lines instead")
    plot_options(p)
    p.set_defaults(handler=_cmd_run, plot=True, shard=None)

    p = commands.add_parser("check", help="validate a configuration and show its cell groups")
    p.add_argument("config", help="sweep configuration (TOML)")
    p.set_defaults(handler=_cmd_check)

    # listed for --help only: _main passes every argument after 'bound' to bound_main
    commands.add_parser("bound", help="LP lower bound of an instance", add_help=False)
    return parser


def _checked_options(check, *args) -> int:
    """``check(*args)``, which checks command-line options; :data:`EXIT_USAGE` after
    printing its ValueError, else 0."""
    try:
        check(*args)
    except ValueError as err:
        return _error(err)
    return 0


def _raised_by_jaxbandit(error: BaseException) -> bool:
    """True if ``error`` was raised in this package's code (its innermost frame)."""
    frames = list(traceback.walk_tb(error.__traceback__))
    package = Path(__file__).resolve().parent
    return bool(frames) and package in Path(frames[-1][0].f_code.co_filename).resolve().parents


def _one_line_for_jaxbandit(format_warning):
    """``warnings.formatwarning`` that shows jaxbandit's own warnings (a
    hyper-parameter outside the theory) as one line naming the warning, without the
    library's file and source line; others as ``format_warning`` does.  Only the text
    changes: a caller that records warnings (``catch_warnings(record=True)``) still
    gets them."""

    def format_(message, category, filename, lineno, line=None) -> str:
        if not category.__module__.startswith("jaxbandit"):
            return format_warning(message, category, filename, lineno, line)
        return f"jaxbandit: {category.__name__}: {message}\n"

    return format_


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxbandit`` console script; returns the exit status."""
    format_warning = warnings.formatwarning  # the caller's, restored on the way out
    try:
        warnings.formatwarning = _one_line_for_jaxbandit(format_warning)
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe could not be caught
        return status
    except BrokenPipeError:
        # The reader of stdout left early (``jaxbandit check CFG | head -1``): stop
        # quietly, as command-line tools do; stdout goes to devnull so that Python's own
        # flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    finally:
        warnings.formatwarning = format_warning


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bound"]:  # every argument, options included, belongs to 'bound'
        # No --compile-cache here: the environment variable or the default says where
        # the solver's compiled program is kept.
        return _checked_options(compile_cache.enable, None) or bound_main(argv[1:])
    args = _parser().parse_args(_values_attached(argv, ("--shard",)))  # --shard -1/2: refused by the shard rule
    # first: joining other processes must precede any other JAX call
    if args.command == "run" and _checked_options(distributed.initialize_from_cli, args):
        return EXIT_USAGE
    _configure_logging(getattr(args, "quiet", False))
    if hasattr(args, "compile_cache") and _checked_options(compile_cache.enable, args.compile_cache):
        return EXIT_USAGE

    try:
        return args.handler(args)
    except (ConfigError, SweepMismatchError, distributed.DistributedMismatchError, FileNotFoundError) as err:
        # raised alike in every process of a multi-process run: all leave together
        return _error(err)
    except (Exception, KeyboardInterrupt) as err:
        if distributed.is_initialized():  # perhaps raised in this process only: the others may wait for it
            distributed.exit_after_failure(err)  # does not return
        if isinstance(err, KeyboardInterrupt):
            return stopping.interrupted(err, "jaxbandit")
        # Bad input found by jaxbandit (a policy that breaks the contract or plays an
        # invalid arm, nothing to plot) or a file that cannot be written: a message.
        # A ValueError from deeper down (numpy, jax) may be a bug: its traceback stays.
        # A closed stdout is raised for main() to end quietly.
        ours = isinstance(err, ValueError) and _raised_by_jaxbandit(err)
        if ours or (isinstance(err, OSError) and not isinstance(err, BrokenPipeError)):
            return _error(err, EXIT_ERROR)
        raise


# -- jaxbandit bound ---------------------------------------------------------------


def _parse_vector(text: str, name: str) -> np.ndarray:
    """Comma-separated decimal numbers (``inf`` among them); an empty field ("1,,0.5")
    is an error, not a dropped arm, and so are Python's ``1_0`` and a literal beyond
    float64 (``1e400``, ``1e-400``), which ``float`` would read as 10, ``inf`` and 0."""
    values = []
    for item in text.replace(" ", "").split(","):
        try:
            value = decimal_literal(item) if "_" not in item else None
        except ValueError:  # not a number, or one beyond float64
            value = None
        if value is None:
            raise ValueError(f"{name} must be comma-separated numbers, got {text!r}.")
        values.append(value)  # NaN too: the instance's rule refuses it, naming the entry
    return np.array(values, dtype=np.float64)


def _parse_sigma(text: str):
    """``--sigma``: a matrix, or one number (a standard bandit's)."""
    rows = text.replace(" ", "").split(";")
    if "" in rows:
        raise ValueError(f"sigma must be rows of numbers separated by ';', got {text!r} (an empty row).")
    if len(rows) == 1 and "," not in rows[0]:
        return _parse_vector(rows[0], "sigma")[0]
    matrix = [_parse_vector(r, "sigma") for r in rows]
    if len({len(r) for r in matrix}) != 1:
        raise ValueError(f"sigma rows must have equal lengths, got {[len(r) for r in matrix]}.")
    return np.array(matrix)


def _bound_instance(args) -> Instance:
    """The instance of ``--mu``/``--sigma`` (one number for a standard bandit) or of
    ``--file``, read as a sweep reads it (:mod:`jaxbandit.config.instance_file`)."""
    if args.file is None:
        if args.mu is None or args.sigma is None:
            raise ValueError("give --mu and --sigma (or --file).")
        mu, sigma = _parse_vector(args.mu, "mu"), _parse_sigma(args.sigma)
        return explicit(mu, sigma, noise=args.noise)
    if args.mu is not None or args.sigma is not None:
        raise ValueError("give either --file or --mu/--sigma, not both.")
    found = instance_file.read(args.file, os.getcwd())
    instance = found.instance(args.noise)
    if instance.is_batch:
        raise ValueError(f"{args.file}: bound takes one instance, got mu of shape {instance.mu.shape}.")
    try:
        check_unique_best(instance.mu)
    except ValueError as err:
        raise ValueError(f"{args.file}: {err}") from None
    return instance


def _values_attached(argv: list, options: tuple) -> list:
    """``--mu -0.5,-1`` as ``--mu=-0.5,-1`` (and ``--shard -1/2`` as ``--shard=-1/2``):
    argparse takes a value that starts with ``-`` for an option unless it is a single
    number."""
    joined = []
    for item in argv:
        if joined and joined[-1] in options and re.match(r"-(\d|\.\d|inf)", item):
            joined[-1] = f"{joined[-1]}={item}"
        else:
            joined.append(item)
    return joined


def bound_main(argv: list[str] | None = None) -> int:
    """``jaxbandit bound``: print the lower bound of one instance.

    Returns:
        0 on success, 1 if the LP is not solved, 2 on bad input (message on stderr).
    """
    parser = argparse.ArgumentParser(
        prog="jaxbandit bound",
        description=(
            "Asymptotic regret lower bound (paper §4): the LP optimum c* and "
            "value = sum_i c*_i Delta_i, so that R_T >~ value * log T."
        ),
    )
    parser.add_argument("--mu", help="means, e.g. 1,0.5,0.2")
    parser.add_argument(
        "--sigma",
        help="noise matrix, rows separated by ';' (e.g. '1,inf;inf,1'), or one number for a standard bandit",
    )
    parser.add_argument("--file", help="JSON/TOML with keys mu and sigma ('inf' allowed), or .npz")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--noise", default="gaussian", help=(
        "noise family: gaussian (default), bernoulli, uniform, rademacher or 'student_t(df=N)'"))  # fmt: skip
    parser.add_argument("--gaussian-reference", action="store_true", help=(
        "the Gaussian LP at sigma, labelled a reference: for a family without a known bound"))  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    try:
        args = parser.parse_args(_values_attached(list(sys.argv[1:] if argv is None else argv), ("--mu", "--sigma")))
    except SystemExit as exit_:  # argparse already printed the message
        return int(exit_.code or 0) and EXIT_USAGE
    try:
        instance = _bound_instance(args)
        reference = "gaussian" if args.gaussian_reference else None
        result = lower_bound(instance, dtype=np.dtype(args.dtype), throw=False, reference=reference)
        if int(result.status) == LowerBoundStatus.TIED_BEST_ARM:  # bad input, not a failure
            _raise_for_status(np.atleast_1d(result.status), instance.mu[None], instance.precision[None])
    except (ValueError, OSError) as err:
        print(f"jaxbandit bound: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    status = int(result.status)
    if args.json:
        record = {
            "mu": instance.mu.tolist(),
            "best_arm": int(result.best_arm),
            "c": [_json_number(c) for c in np.asarray(result.c, np.float64)],
            "value": _json_number(result.value),
            "status": status,
            "status_name": LowerBoundStatus.NAMES[status],
            "dtype": args.dtype,
            "noise": result.family,
            "kind": result.kind,
        }
        print(json.dumps(record, allow_nan=False))
    else:
        print(f"noise: {result.family}; {result.kind}")
        print(f"status: {status} ({LowerBoundStatus.NAMES[status]})")
        print(f"best arm: {int(result.best_arm)}")
        meaning = "regret >~ value * log T" if result.kind == "bound" else "a yardstick, not a bound on the regret"
        print(f"value: {float(result.value):.10g}   ({meaning})")
        for arm, (c, gap) in enumerate(zip(result.c, result.gaps)):
            print(f"  arm {arm}: c* = {float(c):.10g}   Delta = {float(gap):.6g}")
    return 0 if status == LowerBoundStatus.OPTIMAL else 1


def console() -> None:
    """The ``jaxbandit`` command: :func:`main`, then the process's exit.  After an
    interruption the exit skips the interpreter's teardown: XLA may still be compiling
    on a thread of its own, and destroying its client under that thread crashes the
    process.  What the command wrote is complete by then (every write is atomic)."""
    status = main()
    if status in (EXIT_INTERRUPTED, 128 + signal.SIGTERM):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    console()
