"""Record every registered policy's results on fixed seeds, to check that a change
leaves them bit-identical.

    python scripts/record_results.py --out before.npz          # at one commit
    python scripts/record_results.py --compare before.npz      # at another

Each case is one policy (default parameters) on one built-in instance, simulated in
float32, with regret recorded at every round of the short horizons so that a single
changed decision shows.  ``lp_explore`` also runs on a random general K = 10
instance long enough to use every LP stage (re-use, check, full solve).  The output
holds the regret, the counts and the diagnostics of each case; ``--compare`` reports
each array that differs and exits with status 1 if any does.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's jaxbandit

import numpy as np  # noqa: E402

import jaxbandit as jb  # noqa: E402
from jaxbandit import files  # noqa: E402

CASES_SEED = 20261128


def _cases():
    defaults = jb.instances.default_instances()
    general10 = jb.instances.random(3, 10)
    for policy in jb.policies.names():
        for name in ("bandit", "graph_star", "general"):
            yield f"{policy}/{name}", policy, defaults[name], 600, 16
    yield "lp_explore/general10", "lp_explore", general10, 6000, 64
    yield "lp_explore_a1/general10", ("lp_explore", {"alpha": 1.0}), general10, 6000, 64
    yield "ossb/general10", "ossb", general10, 6000, 64


def record() -> dict:
    arrays = {}
    for label, policy, instance, horizon, runs in _cases():
        name, params = (policy, {}) if isinstance(policy, str) else policy
        times = np.arange(1, horizon + 1) if horizon <= 1000 else None
        result = jb.simulate(jb.policies.make(name, **params), instance, horizon, runs, seed=CASES_SEED, times=times)
        arrays[f"{label}/regret"] = result.regret
        arrays[f"{label}/counts"] = result.counts
        for key, value in result.diagnostics.items():
            arrays[f"{label}/diagnostics/{key}"] = np.asarray(value)
        print(f"{label}: mean final regret {result.final_regret.mean():.6g}", file=sys.stderr)
    return arrays


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the recording to this .npz file")
    group.add_argument("--compare", help="compare with a recording made earlier")
    args = parser.parse_args(argv)
    # Both files are checked before the recording, which takes minutes.
    if args.out is not None:
        if not os.path.basename(args.out) or not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
            parser.error(f"--out: expected a file name in an existing directory, got {args.out!r}")
        # np.savez_compressed would add the suffix itself: the path printed is the one written.
        out = args.out if args.out.endswith(".npz") else args.out + ".npz"
        if os.path.exists(out):
            parser.error(f"--out: {out!r} exists; give another file (a recording is not overwritten)")
    else:
        try:
            before = files.read_npz(args.compare)
        except OSError as err:
            parser.error(f"--compare: cannot read {args.compare!r} ({err.strerror})")
        except ValueError as err:  # not an .npz of arrays: said by the package's reader
            parser.error(f"--compare: {args.compare!r} is not a recording of this script: {err}")
    arrays = record()
    if args.out is not None:
        np.savez_compressed(out, **arrays)
        print(f"{len(arrays)} arrays written to {out}")
        return 0
    differ = [k for k in sorted(set(before) | set(arrays)) if k not in before or k not in arrays or not np.array_equal(before[k], arrays[k])]
    for key in differ:
        print(f"differs: {key}")
    print(f"{len(arrays)} arrays compared, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
