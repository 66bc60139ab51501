#!/usr/bin/env bash
# One H200 call (device tool) for the figures of 2026-12-01, second session: the roofline on the
# softmax example (calibrate --peak, run-bench of baseline and round 1, compare-perf) and the
# verdict benchmark. Run from the repository root with the pure-Python wheels carried in .whl/.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PWD:/tmp/site || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
helix() { python3 -P -m helix_engine "$@"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,utilization.gpu --format=csv | tee "$OUT/gpu.txt"
W=/tmp/roof; rm -rf "$W"; mkdir -p "$W"; cp -r examples/softmax/. "$W/"
( cd "$W" && {
  time helix calibrate --peak --backend cuda .
  helix run-bench --operator-file softmax.py --bench-file bench_softmax.py --output "$W/base_perf.txt" --backend cuda
  helix run-bench --operator-file candidates/round-1.py --bench-file bench_softmax.py --output "$W/r1_perf.txt" --backend cuda
  helix compare-perf --baseline base_perf.txt --compare r1_perf.txt
  cat .helix/peaks.json
} ) > "$OUT/roofline.log" 2>&1
tail -30 "$OUT/roofline.log"
timeout "${VERDICTS_S:-330}" python3 benchmarks/bench_verdicts.py --backend cuda --out "$OUT/verdicts" 2>&1 | tee "$OUT/verdicts.log" | tail -40
