#!/usr/bin/env bash
# One H200 call (device tool) for issue 27's CUDA figures: the gate's pack on the CUDA backend
# (the cheats that apply there, and the honest round), then the gate's cost on a paired run-bench
# against helix before the gate (.old_helix: `git archive a62d19c | tar -x -C .old_helix`).
# Run from the repository root with the pure-Python wheels carried in .whl/.  PART: any of "selftest cost profile examples" (space-separated, in that order)
set -u -o pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PWD:/tmp/site || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,utilization.gpu --format=csv | tee "$OUT/gpu.txt"
for part in ${PART:-selftest}; do
  case "$part" in
    profile) timeout "${PROFILE_TIMEOUT:-240}" python3 benchmarks/profile_gate.py --backend cuda --top "${TOP:-45}" 2>&1 \
               | tee "$OUT/gate-profile-cuda.log" || exit 1 ;;
    selftest) timeout "${SELFTEST_TIMEOUT:-540}" python3 -m helix_engine selftest --backend cuda --jobs "${SELFTEST_JOBS:-1}" \
                --only cached-output --only lazy-tensor --only work-on-a-thread --only side-stream \
                --only test-shapes-only --only every-20th-call-wrong ${SELFTEST_MORE:-} 2>&1 | tee "$OUT/selftest-cuda.log" ;;
    cost) timeout "${COST_TIMEOUT:-540}" python3 benchmarks/bench_gate_cost.py --backend cuda --pairs "${PAIRS:-3}" \
            --old-tree .old_helix 2>&1 | tee "$OUT/gate-cost-cuda.log" ;;
    examples) for ex in softmax layernorm matmul; do  # honest rounds through the gate: round 1 promoted
                timeout "${EXAMPLE_TIMEOUT:-200}" python3 -m helix_engine demo --example "$ex" --backend cuda --no-tui \
                  "/tmp/demo-$ex" > "$OUT/demo-$ex.log" 2>&1; echo "demo $ex: exit $?"; tail -n 25 "$OUT/demo-$ex.log"
              done ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
