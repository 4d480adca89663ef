#!/usr/bin/env bash
# The GPU checks in one time-boxed script, for a short turn on a machine with an NVIDIA
# GPU and JAX's CUDA plugin (no install needed: run from the repository root).
#
#   bash benchmarks/gpu_session.sh OUTDIR
#
# Writes logs and JSON lines under OUTDIR and prints a summary last.  Each step has its
# own time limit, so one slow step cannot eat the rest.  TESTS overrides the test files;
# DIVISION=1 adds a float32 run with IEEE division (a comparison for the solver's own
# refined division).
set -u
out=${1:?usage: bash benchmarks/gpu_session.sh OUTDIR}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JAXBANDIT_COMPILE_CACHE=off
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # several test processes share the GPU
tests=${TESTS:-tests/test_lp.py tests/test_lower_bound.py tests/test_lp_explore.py tests/test_exact_lp.py tests/test_runner.py tests/test_compaction.py tests/test_rng.py}
step() { echo "== $(date +%T) $1"; }

nvidia-smi -L
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"

step "tests ($tests)"
# -p no:benchmark: pytest-benchmark, if installed, warns under xdist and the suite
# turns warnings into errors.
# The bigger LP sweep is left out: it does not fit in the step's time limit on a GPU.
timeout 330 python3 -m pytest -p no:cacheprovider -p no:benchmark -n 8 --dist load -v -rfE \
    --durations=10 --deselect tests/test_lower_bound.py::test_bigger_sweep_both_precisions $tests >"$out/pytest.log" 2>&1
echo "pytest exit status $?"

step "LP solver, K = 10, batch 10^4"
# (--large: the host API case is left out, it does not fit in the step's time limit)
timeout 120 python3 benchmarks/lp.py --arms 10 --batches 10000 --reference-size 100 --repeat 3 --large 100000 \
    >"$out/lp.jsonl" 2>"$out/lp.err"

step "lp_explore, 10^4 runs, rounds 4097-6144 (every run in Case C)"
timeout 90 python3 benchmarks/lp_explore.py --arms "" --late 10000,4096,2048 \
    >"$out/lp_explore.jsonl" 2>"$out/lp_explore.err"

if [ "${DIVISION:-0}" != 0 ]; then
    # XLA lowers float32 division to PTX div.full.f32 (2 ulp); this asks for IEEE
    # division instead, against which lp._divide's refinement can be compared.
    step "float32 solves with IEEE division"
    XLA_FLAGS="${XLA_FLAGS:-} --xla_backend_extra_options=-nvptx-prec-divf32=2" timeout 90 \
        python3 benchmarks/lp.py --arms 10 --batches 10000 --reference-size 100 --repeat 3 \
        --dtypes float32 --no-warm >"$out/lp_ieee_division.jsonl" 2>"$out/lp_ieee_division.err"
fi

step "summary"
grep -E "^FAILED|^ERROR| passed| failed" "$out/pytest.log" | tail -20
python3 - "$out" <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.jsonl")):
    for line in path.read_text().splitlines():
        record = json.loads(line)
        record.pop("machine", None)
        print(path.stem, json.dumps(record))
PY
