"""Peak memory of a sweep vs its horizon: memory must not grow with the horizon.

Each case runs a one-cell sweep (``--policy``, default ``ucb_n``, on the built-in K = 5 bandit instance,
``--runs`` runs, ~100 recorded times, checkpoints as configured by default) through
:func:`jaxbandit.sweep.run` in a fresh subprocess, and reports that process's peak
resident set size (``VmHWM`` from ``/proc/self/status``, falling back to
``ru_maxrss``) and, on accelerators, the device's peak bytes in use.

Usage:  python benchmarks/memory.py [--horizons 1e4,1e5,1e6] [--runs 1000] [--policy ucb_n]

Prints one JSON line per horizon: {"case", "horizon", "runs", "peak_rss_mib",
"device_peak_mib", "wall_s", "run_rounds_per_s" (compilation included),
"final_regret_mean", "config", "machine"}.  The time grows with the horizon; the memory
must not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[3])
import jax
from jaxbandit import sweep
horizon, runs, policy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[5]
config = {
    "name": "memory", "seed": 0, "runs": runs, "horizon": horizon, "times": 100,
    "instances": [{"type": "default", "name": "bandit"}],
    "policies": [{"name": policy}],
}
start = time.perf_counter()
results = sweep.run(config, sys.argv[4], progress=False)
wall = time.perf_counter() - start
peak_kib = None
try:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                peak_kib = int(line.split()[1])
except OSError:
    pass
if peak_kib is None:  # ru_maxrss is KiB on Linux, bytes on macOS
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_kib = peak_kib // 1024 if sys.platform == "darwin" else peak_kib
device = jax.devices()[0]
stats = device.memory_stats() if device.platform != "cpu" else None
print(json.dumps({
    "peak_rss_mib": peak_kib / 1024,
    "device_peak_mib": stats["peak_bytes_in_use"] / 2**20 if stats and "peak_bytes_in_use" in stats else None,
    "wall_s": wall,
    "final_regret_mean": float(results.cells[0].final_regret.mean()),
}))
"""


def horizon_list(parser, text: str) -> list:
    """``"1e4,20000"`` -> ``[10000, 20000]``: whole numbers >= 1, in either notation (empty
    items skipped); a parser error naming the value for anything else, or for no horizon."""
    horizons = []
    for item in filter(str.strip, text.split(",")):
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not (value.is_integer() and value >= 1):
            parser.error(f"--horizons: every value must be a whole number >= 1, got {text!r}")
        horizons.append(int(value))
    if not horizons:
        parser.error("--horizons: give at least one horizon")
    return horizons


def main(argv=None) -> None:
    sys.path.insert(0, REPO)
    from benchmarks._common import emit, machine

    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--horizons", default="1e4,1e5,1e6", help="comma-separated horizons")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--policy", default="ucb_n", help="a registered policy name")
    args = parser.parse_args(argv)
    horizons = horizon_list(parser, args.horizons)
    if args.runs < 1:
        parser.error(f"--runs: must be >= 1, got {args.runs}")
    # checked here, before a child process starts, as the sweep's configuration would
    import jaxbandit as jb
    from jaxbandit.engine import MAX_ROUNDS

    if args.policy not in jb.policies.names():
        parser.error(f"--policy: unknown policy name {args.policy!r}; known: {', '.join(jb.policies.names())}")
    if max(horizons) > MAX_ROUNDS:
        parser.error(f"--horizons: every value must be at most {MAX_ROUNDS}, got {args.horizons!r}")
    description = machine()
    for horizon in horizons:
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, str(horizon), str(args.runs), REPO, os.path.join(out, "sweep"), args.policy],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"horizon {horizon} failed:\n{proc.stderr}")
        measured = json.loads(proc.stdout.strip().splitlines()[-1])
        emit(
            {
                "case": "sweep_peak_memory",
                "horizon": horizon,
                "runs": args.runs,
                "peak_rss_mib": round(measured["peak_rss_mib"], 1),
                "device_peak_mib": measured["device_peak_mib"],
                "wall_s": round(measured["wall_s"], 2),
                "run_rounds_per_s": horizon * args.runs / measured["wall_s"],
                "final_regret_mean": measured["final_regret_mean"],
                "config": {"policy": args.policy, "instance": "default bandit (K=5)", "times": 100, "chunk_size": 1024},
                "machine": description,
            }
        )


if __name__ == "__main__":
    main()
