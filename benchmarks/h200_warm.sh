#!/usr/bin/env bash
# One H200 call (device tool) for issue 10's probe figure with the warm worker (eval/warm.py):
# where a cold eval child's start-up goes, then bench_verdicts.py figure (c) only (calibrate,
# then canonical run-bench of both sides / adaptive probe cold / adaptive probe warm / paired
# probe cold and warm, interleaved 3 times). Run from the repository root with the pure-Python
# wheels carried in .whl/ (pydantic and its deps for the device's Python).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PWD:/tmp/site || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,utilization.gpu --format=csv | tee "$OUT/gpu.txt"
python3 - <<'PY' 2>&1 | tee "$OUT/startup.txt"
# fresh processes, each statement timed from outside (median of 3): what a cold child pays
import os, statistics, subprocess, sys, time
steps = {"python": "pass", "import torch": "import torch", "+ triton": "import torch, triton",
         "+ CUDA context": "import torch, triton; torch.zeros(1, device='cuda'); torch.cuda.synchronize()",
         "+ helix eval worker": "import torch, triton; torch.zeros(1, device='cuda'); torch.cuda.synchronize(); "
                                "import helix_engine.eval.worker"}
for name, stmt in steps.items():
    runs = []
    for _ in range(3):
        t = time.monotonic(); subprocess.run([sys.executable, "-c", stmt], check=True); runs.append(time.monotonic() - t)
    print(f"{name:22s} {statistics.median(runs):.3f} s ({min(runs):.3f}-{max(runs):.3f})")
# a fork of a process that imported torch and triton (no device): fork to a CUDA tensor
import torch, triton  # noqa: E401
runs = []
for _ in range(3):
    r, w = os.pipe(); t = time.monotonic(); pid = os.fork()
    if pid == 0:
        torch.zeros(1, device="cuda"); torch.cuda.synchronize(); os.write(w, b"x"); os._exit(0)
    os.read(r, 1); runs.append(time.monotonic() - t); os.waitpid(pid, 0)
print(f"{'fork -> CUDA context':22s} {statistics.median(runs):.3f} s ({min(runs):.3f}-{max(runs):.3f})")
PY
timeout "${VERDICTS_S:-420}" python3 benchmarks/bench_verdicts.py --backend cuda --only-probe --probe-repeats "${REPEATS:-3}" \
  --out "$OUT/verdicts" 2>&1 | tee "$OUT/verdicts.log" | tail -30
