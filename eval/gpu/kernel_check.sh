#!/usr/bin/env bash
# GPU check of one kernel (naevit or nudft), for a lent GPU machine with this repo checked out (no
# internet; pip sees the same wheel cache). Runs the kernel's tests on CUDA, then `icml26 bench NAME`,
# and copies the results to $OUT/eval/results/NAME-<gpu-name>.json. Whole script: under 5 minutes.
#
#   OUT=/some/dir bash eval/gpu/kernel_check.sh naevit          # quick benchmark (default)
#   MODE=full OUT=/some/dir bash eval/gpu/kernel_check.sh nudft
#
# A failing step does not stop the later ones (a failed test still leaves a benchmark to read);
# the script exits with the first non-zero status.
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME="${1:?usage: kernel_check.sh naevit|nudft}"
[[ -f "tests/test_$NAME.py" ]] || { echo "unknown kernel '$NAME' (expected naevit or nudft)"; exit 2; }
OUT="${OUT:-runs/gpu-check}"
MODE="${MODE:-quick}"
DEADLINE=285  # seconds after start; each step gets at most what is left
mkdir -p "$OUT/eval/results"
unset TRITON_INTERPRET  # compiled kernels on the GPU, never the interpreter
status=0

left() { local s=$(( DEADLINE - SECONDS )); echo $(( s > 5 ? s : 5 )); }
step() {  # step NAME CAP_SECONDS COMMAND...: run with a timeout of min(CAP, time left)
    local name=$1 cap=$2; shift 2
    local t; t=$(left); (( t > cap )) && t=$cap
    echo "=== $name (timeout ${t}s, t=${SECONDS}s)"
    local rc=0
    timeout -k 10 "$t" "$@" || rc=$?
    if (( rc != 0 )); then
        echo "=== $name: exit $rc$( (( rc == 124 )) && echo ' (timed out)')"
        (( status == 0 )) && status=$rc
    fi
    return 0
}

if ! python -c "import icml26" 2>/dev/null; then
    step "pip install -e ." 90 pip install -q --no-build-isolation -e .
fi
step "icml26 env" 30 icml26 env
step "pytest tests/test_$NAME.py" 90 python -m pytest "tests/test_$NAME.py" -q -x
step "icml26 bench $NAME --$MODE" 600 icml26 bench "$NAME" "--$MODE" --no-progress --out "$OUT/$NAME"

slug=$(timeout 30 python -c "import re, torch; print(re.sub(r'[^a-z0-9]+', '-', torch.cuda.get_device_name().lower()).strip('-') if torch.cuda.is_available() else 'cpu')" || echo unknown-gpu)
if [[ -f "$OUT/$NAME/results.json" ]]; then
    cp "$OUT/$NAME/results.json" "$OUT/eval/results/$NAME-$slug.json"
    echo "results: $OUT/eval/results/$NAME-$slug.json"
fi
if [[ -f "$OUT/$NAME/$NAME/rows.partial.json" ]]; then  # what was measured even if the run was cut short
    cp "$OUT/$NAME/$NAME/rows.partial.json" "$OUT/eval/results/$NAME-$slug.rows.json"
fi
echo "=== done in ${SECONDS}s, status $status"
exit "$status"
