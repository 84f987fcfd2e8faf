#!/usr/bin/env bash
# GPU check of NAEViT attention, for a lent GPU machine with this repo checked out (no internet;
# pip sees the same wheel cache). Runs the kernel tests on CUDA, then `icml26 bench naevit`, and
# copies the results to $OUT/eval/results/naevit-<gpu-name>.json. Whole script: under 5 minutes.
#
#   OUT=/some/dir bash eval/gpu/naevit_check.sh          # quick benchmark (default)
#   NAEVIT_MODE=full OUT=/some/dir bash eval/gpu/naevit_check.sh
#
# A failing step does not stop the later ones (a failed test still leaves a benchmark to read);
# the script exits with the first non-zero status.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-runs/gpu-check}"
MODE="${NAEVIT_MODE:-quick}"
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
step "pytest tests/test_naevit.py" 90 python -m pytest tests/test_naevit.py -q -x
step "icml26 bench naevit --$MODE" 600 icml26 bench naevit "--$MODE" --no-progress --out "$OUT/naevit"

slug=$(timeout 30 python -c "import re, torch; print(re.sub(r'[^a-z0-9]+', '-', torch.cuda.get_device_name().lower()).strip('-') if torch.cuda.is_available() else 'cpu')" || echo unknown-gpu)
if [[ -f "$OUT/naevit/results.json" ]]; then
    cp "$OUT/naevit/results.json" "$OUT/eval/results/naevit-$slug.json"
    echo "results: $OUT/eval/results/naevit-$slug.json"
fi
if [[ -f "$OUT/naevit/naevit/rows.partial.json" ]]; then  # what was measured even if the run was cut short
    cp "$OUT/naevit/naevit/rows.partial.json" "$OUT/eval/results/naevit-$slug.rows.json"
fi
echo "=== done in ${SECONDS}s, status $status"
exit "$status"
