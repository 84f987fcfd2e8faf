#!/usr/bin/env bash
# The GPU check: install icml26 without touching the machine's packages, run the kernel tests on CUDA
# (fp32, fp16, bf16), then `icml26 bench naevit`, `nudft` and `saisa` in quick mode. Made for a lent GPU
# machine with no internet whose python3 has torch, Triton, numpy, matplotlib, pytest and an older
# transformers but no trl or datasets: icml26 goes in with `--no-deps`, beside the wheels that travel in
# $ICML26_GPU_WHEELS (default .cache/gpu-wheels, gitignored). Build that folder here, with PyPI, once:
#
#   bash eval/gpu/check_all.sh --fetch-wheels      # transformers 5.24 (icml26 needs >= 5.24) and setuptools
#
# Run from anywhere (it works from the repository root), with $OUT an empty folder:
#
#   OUT=/some/dir bash eval/gpu/check_all.sh                # every step, at most 5 minutes in all
#   OUT=/some/dir bash eval/gpu/check_all.sh naevit saisa   # only these steps (install first if needed)
#   OUT=/some/dir bash eval/gpu/check_all.sh --dry-run      # the same steps on CPU (Triton's interpreter)
#
# Steps: install, env, tests, naevit, nudft, saisa. Each runs under its own `timeout` (its cap or the
# time left before the deadline, whichever is less); a failing step does not stop the later ones, and the
# script exits with the first non-zero status. What comes back (8 files at most):
#   $OUT/summary.json                   each step's exit status, seconds and timeout; the wall time
#   $OUT/check.log                      everything printed
#   $OUT/eval/results/NAME-DEVICE.json  each benchmark's results.json (copy them into eval/results/)
#   $OUT/eval/results/NAME-DEVICE.png   its GPU figure (the CPU one where it has no GPU figure)
# The benchmarks' whole run folders stay in $ICML26_GPU_WORK (default /tmp/icml26-gpu-check).
#
# --dry-run (or ICML26_GPU_DRY_RUN=1) runs every step on CPU: the kernel tests with `--device cpu` in the
# interpreter, the benchmarks with ICML26_BENCH_DRY_RUN=1 (tiny sizes, the GPU suites on CPU tensors where
# a benchmark has them). Its caps are three times the GPU ones: the interpreter is slow.
# ICML26_GPU_DEADLINE (seconds, default 290) moves the deadline.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

ALL_STEPS=(install env tests naevit nudft saisa)
declare -A CAP=([install]=60 [env]=20 [tests]=120 [naevit]=150 [nudft]=60 [saisa]=90)
DEADLINE="${ICML26_GPU_DEADLINE:-290}"  # seconds after the start: the whole script stays under 5 minutes
PYTHON="${PYTHON:-python3}"
WHEELS="${ICML26_GPU_WHEELS:-.cache/gpu-wheels}"
WORK="${ICML26_GPU_WORK:-/tmp/icml26-gpu-check}"
DRY="${ICML26_GPU_DRY_RUN:-0}"
STEPS=()
for arg in "$@"; do
    case "$arg" in
        --dry-run) DRY=1 ;;
        --fetch-wheels)
            exec "$PYTHON" -m pip download --no-deps --only-binary=:all: -d "$WHEELS" \
                "transformers==5.24.0" "setuptools==84.2.1" ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *)
            if [[ " ${ALL_STEPS[*]} " != *" $arg "* ]]; then
                echo "check_all.sh: step: expected one of ${ALL_STEPS[*]} (or --dry-run, --fetch-wheels), got '$arg'" >&2
                exit 2
            fi
            STEPS+=("$arg") ;;
    esac
done
(( ${#STEPS[@]} )) || STEPS=("${ALL_STEPS[@]}")

OUT="${OUT:-runs/gpu-check}"
mkdir -p "$OUT/eval/results" "$WORK" || exit 2
exec > >(tee -a "$OUT/check.log") 2>&1
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore MPLBACKEND=Agg
if [[ "$DRY" == 1 ]]; then
    DEVICE=cpu
    export TRITON_INTERPRET=1 ICML26_BENCH_DRY_RUN=1
    DEADLINE=$(( 3 * DEADLINE ))
    for s in "${!CAP[@]}"; do CAP[$s]=$(( 3 * CAP[$s] )); done
else
    DEVICE=cuda
    unset TRITON_INTERPRET ICML26_BENCH_DRY_RUN  # compiled kernels on the GPU, never the interpreter
    export TRITON_PRINT_AUTOTUNING=1  # the log names the tile each kernel picked at each shape
fi

# A rerun of some steps on a fresh machine installs first.
if [[ " ${STEPS[*]} " != *" install "* ]] && ! "$PYTHON" -c "import icml26" 2>/dev/null; then
    STEPS=(install "${STEPS[@]}")
fi

status=0
records=()
write_summary() {
    local IFS=,
    printf '{"dry_run": %s, "device": "%s", "wall_s": %d, "deadline_s": %d, "status": %d, "steps": [%s]}\n' \
        "$([[ "$DRY" == 1 ]] && echo true || echo false)" "$DEVICE" "$SECONDS" "$DEADLINE" "$status" \
        "${records[*]}" > "$OUT/summary.json"
}

run_step() {  # run_step NAME COMMAND...: under `timeout` of min(cap, time left)
    local name=$1; shift
    local left=$(( DEADLINE - SECONDS )) cap=${CAP[$name]}
    local limit=$(( left < cap ? left : cap ))
    (( limit < 5 )) && limit=5
    local start=$SECONDS rc=0
    echo "=== $name (timeout ${limit}s, t=${SECONDS}s)"
    timeout -k 10 "$limit" bash -c '"$@"' "$name" "$@" || rc=$?  # the steps are exported functions
    local took=$(( SECONDS - start ))
    echo "=== $name: exit $rc in ${took}s$( (( rc == 124 || rc == 137 )) && echo ' (timed out)')"
    (( rc != 0 && status == 0 )) && status=$rc
    records+=("{\"name\": \"$name\", \"rc\": $rc, \"seconds\": $took, \"timeout_s\": $limit}")
    write_summary
}

install() {
    [[ -d "$WHEELS" ]] || { echo "no wheel folder $WHEELS: build it with bash eval/gpu/check_all.sh --fetch-wheels"; return 2; }
    # No index: what is missing comes from $WHEELS, and a requirement already met is left alone.
    # setuptools >= 77 builds the editable install without build isolation (which would need an index).
    "$PYTHON" -m pip install -q --no-index --no-deps --find-links "$WHEELS" "setuptools>=77" "transformers==5.24.*" \
        && "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation -e . \
        && "$PYTHON" -c "import icml26, transformers; print('icml26 from', icml26.__file__, '| transformers', transformers.__version__)"
}

environment() {
    "$PYTHON" -m icml26 env
    if [[ "$DEVICE" == cuda ]] && command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
    fi
}

kernel_tests() {
    "$PYTHON" -m pytest -p no:cacheprovider -q -rfEs --device "$DEVICE" \
        tests/test_naevit.py tests/test_nudft.py tests/test_kernels_backend.py
}

bench() {  # bench NAME: icml26 bench NAME --quick, then its JSON and figure into $OUT/eval/results
    local name=$1 dir="$WORK/bench-$1" rc=0
    rm -rf "$dir"
    "$PYTHON" -m icml26 bench "$name" --quick --device "$DEVICE" --no-progress --out "$dir" || rc=$?
    [[ -f "$dir/results.json" ]] || { echo "no $dir/results.json"; (( rc == 0 )) && rc=1; }
    [[ -f "$dir/results.json" ]] && cp "$dir/results.json" "$OUT/eval/results/$name-$SLUG.json"
    local png
    for png in "$dir/$name/"*gpu*.png "$dir/$name/"*cpu*.png; do
        if [[ -f "$png" ]]; then cp "$png" "$OUT/eval/results/$name-$SLUG.png"; break; fi
    done
    return "$rc"
}

# The device's name in the result files: nvidia-h200, or cpu-dry-run.
SLUG=$("$PYTHON" -c "import re, torch; print(re.sub(r'[^a-z0-9]+', '-', torch.cuda.get_device_name().lower()).strip('-') if torch.cuda.is_available() else 'cpu')" 2>/dev/null || echo unknown-device)
[[ "$DRY" == 1 ]] && SLUG="$SLUG-dry-run"
export PYTHON WHEELS WORK OUT DEVICE SLUG
export -f install environment kernel_tests bench

for step in "${STEPS[@]}"; do
    case "$step" in
        install) run_step install install ;;
        env) run_step env environment ;;
        tests) run_step tests kernel_tests ;;
        *) run_step "$step" bench "$step" ;;
    esac
done
echo "=== done in ${SECONDS}s, status $status (summary: $OUT/summary.json)"
write_summary
exit "$status"
