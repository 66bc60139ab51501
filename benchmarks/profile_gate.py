"""Where a paired run-bench through the gate spends its time: the softmax example's round 1
against its baseline, the worker's ``paired`` request run under cProfile in the supervisor,
the job's events timed (start-up, each case). The operator processes are not profiled; the time
the supervisor waits on them shows as ``wire.recv`` under the call that asked (slot, fetch, load).

    python3 benchmarks/profile_gate.py [--backend cpu] [--top 35] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--out", type=Path, default=None, help="keep the profile (gate.prof) here")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="helix-gate-prof-"))
    env = dict(os.environ, HELIX_BACKEND=args.backend,
               PYTHONPATH=os.pathsep.join([str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]))
    try:
        ws = scratch / "ws"
        shutil.copytree(ROOT / "examples" / "softmax", ws)
        prep = subprocess.run([sys.executable, "-m", "helix_engine", "prepare-baseline", "."], cwd=ws, env=env,
                              capture_output=True, text=True, check=False)
        if prep.returncode:
            print(f"prepare-baseline failed:\n{prep.stdout[-3000:]}{prep.stderr[-3000:]}")
            return 1
        (ws / "opt-round-1").mkdir()
        shutil.copy(ws / "candidates" / "round-1.py", ws / "opt-round-1" / "opt_softmax.py")
        from helix_engine.eval.backends import get_backend

        backend = get_backend(args.backend)
        mode = "device-event" if args.backend == "cuda" else "perf-counter"
        request = {"action": "paired", "operator_file": str(ws / "opt-round-1" / "opt_softmax.py"),
                   "reference_operator_file": str(ws / "baseline" / "softmax.py"), "bench_file": str(ws / "bench_softmax.py"),
                   "bench_mode": mode, "case_ids": None, "backend": backend.name, "device_str": backend.device_str,
                   "result_path": str(scratch / "result.json")}
        (scratch / "request.json").write_text(json.dumps(request))
        prof = (args.out or scratch) / "gate.prof"
        prof.parent.mkdir(parents=True, exist_ok=True)
        from helix_engine.jobs.events import EVENTS_NAME, JOB_DIR_ENV

        job = scratch / "job"
        job.mkdir()
        events = job / EVENTS_NAME
        start = time.time()
        proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "helix_engine.eval.worker",
                               str(scratch / "request.json")], cwd=ws, env=dict(env, **{JOB_DIR_ENV: str(job)}),
                              capture_output=True, text=True, check=False)
        wall = time.time() - start
        print(f"worker: exit {proc.returncode}, {wall:.2f} s wall")
        if proc.returncode:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return 1
        _events(events, start)
        stats = pstats.Stats(str(prof))
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def _events(path: Path, start: float) -> None:
    if not path.exists():
        print("(no events file: the worker writes its events to stdout here)")
        return
    for line in path.read_text().splitlines():
        event = json.loads(line)
        print(f"  {event['ts'] - start:7.2f} s  {event['event']:14} {event.get('case_id', '')}")


if __name__ == "__main__":
    sys.exit(main())
