"""Jobs on a Ray cluster (issue 15): throughput with 1 vs 2 device resources, and the overhead
of a cluster job over the same job run locally.

A local Ray head is started in this process (``num_cpus`` = this machine's cores, a custom
``NPU`` resource of 1, then of 2); 16 CPU-backend run-bench jobs of examples/softmax are
submitted at once through helix's own dispatch (``run_worker`` with a cluster address: the
same code as ``helix run-bench --cluster``), each asking for one ``NPU``. Figure: jobs per hour
(16 / wall time of the batch); the goal is a ratio >= 1.8 for 2 vs 1 device. The overhead
figure interleaves the same one-job bench run locally (``run_job``) and on the cluster and
compares medians of wall time (submit → result back here).

    python3 benchmarks/bench_cluster.py [--jobs 16] [--overhead-runs 3]

Job children get OMP_NUM_THREADS=1 so one job uses one core (the interpreter is single-threaded
Python anyway); on a machine with two cores the 2-device figure is bounded by those two cores
and by whatever else runs there.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXAMPLE = ROOT / "examples" / "softmax"


def _workspace(root: Path) -> Path:
    ws = root / "softmax"
    ws.mkdir(parents=True)
    for name in ("softmax.py", "bench_softmax.py"):
        shutil.copy(EXAMPLE / name, ws / name)
    return ws


def _bench_job(ws: Path) -> Any:
    """One run-bench job (every case of the example), as run-bench starts it."""
    from helix_engine.eval.backends import get_backend
    from helix_engine.eval.jobrun import run_worker

    request = {"action": "bench", "operator_file": str(ws / "softmax.py"), "bench_file": str(ws / "bench_softmax.py"),
               "bench_mode": "perf-counter"}
    run = run_worker(ws, "run-bench", request, backend=get_backend("cpu"), cwd=ws, timeout_s=600)
    if run.job.status != "passed":
        raise RuntimeError(f"job {run.job.id} ended {run.job.status}: {run.job.message}")
    return run


def _start(devices: int) -> str:
    import ray

    ray.init(address="local", num_cpus=os.cpu_count() or 2, resources={"NPU": devices}, include_dashboard=False,
             log_to_driver=False, logging_level="ERROR")
    return ray.get_runtime_context().gcs_address


def _batch(ws: Path, jobs: int) -> tuple[float, list[str]]:
    """Submit ``jobs`` bench jobs at once; (wall seconds, the devices they ran on)."""
    errors: list[str] = []
    runs: list[Any] = []

    def one() -> None:
        try:
            runs.append(_bench_job(ws))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(str(exc))

    start = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} of {jobs} jobs failed: {errors[0]}")
    return wall, sorted({str(r.job.device) for r in runs})


def throughput(jobs: int) -> list[dict[str, Any]]:
    import ray

    from helix_engine.cluster import use_cluster

    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["HELIX_CLUSTER_RESOURCE"] = "NPU"
    per_hour: dict[int, float] = {}
    notes: dict[int, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = _workspace(Path(tmp))
        for devices in (1, 2):
            use_cluster(_start(devices))
            try:
                _bench_job(ws)  # warm-up: Ray's worker pool and the Triton cache
                load0 = os.getloadavg()[0]
                wall, used = _batch(ws, jobs)
                per_hour[devices] = jobs / wall * 3600
                notes[devices] = (f"{jobs} jobs in {wall:.1f} s on devices {','.join(used)}; load average "
                                  f"{load0:.1f} at the start")
            finally:
                use_cluster(None)
                ray.shutdown()
    return [
        {"benchmark": "cluster", "figure": f"jobs per hour, 1 NPU resource ({jobs} CPU bench jobs)",
         "value": round(per_hour[1], 1), "unit": "jobs/h", "compare_to": None, "ratio": None, "note": notes[1]},
        {"benchmark": "cluster", "figure": f"jobs per hour, 2 NPU resources ({jobs} CPU bench jobs)",
         "value": round(per_hour[2], 1), "unit": "jobs/h", "compare_to": "1 NPU resource",
         "ratio": round(per_hour[2] / per_hour[1], 2), "note": notes[2] + "; goal: ratio >= 1.8"},
    ]


def overhead(runs: int) -> list[dict[str, Any]]:
    import ray

    from helix_engine.cluster import use_cluster

    os.environ["HELIX_CLUSTER_RESOURCE"] = "NPU"
    local: list[float] = []
    remote: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = _workspace(Path(tmp))
        address = _start(1)
        try:
            _bench_job(ws)  # warm-up (local)
            use_cluster(address)
            _bench_job(ws)  # warm-up (cluster)
            for _ in range(runs):  # interleaved: drift hits both
                for side, sink in (("local", local), ("cluster", remote)):
                    use_cluster(address if side == "cluster" else None)
                    start = time.perf_counter()
                    _bench_job(ws)
                    sink.append(time.perf_counter() - start)
        finally:
            use_cluster(None)
            ray.shutdown()
    lo, re = statistics.median(local), statistics.median(remote)
    return [{"benchmark": "cluster", "figure": "one bench job: cluster vs local (wall, submit to result here)",
             "value": round(re, 2), "unit": "s", "compare_to": f"local {lo:.2f} s", "ratio": round(re / lo, 2),
             "note": (f"median of {runs} interleaved pairs; overhead {re - lo:+.2f} s; local "
                      f"{', '.join(f'{v:.2f}' for v in local)} s, cluster {', '.join(f'{v:.2f}' for v in remote)} s")}]


def run(jobs: int = 16, overhead_runs: int = 3) -> list[dict[str, Any]]:
    try:
        import ray  # noqa: F401
    except ImportError:
        return [{"benchmark": "cluster", "figure": "no figures on this machine", "value": None, "unit": None,
                 "compare_to": None, "ratio": None, "note": "Ray is not installed: pip install -e '.[cluster]'"}]
    return throughput(jobs) + overhead(overhead_runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--overhead-runs", type=int, default=3)
    args = parser.parse_args()
    for row in run(args.jobs, args.overhead_runs):
        ratio = f"  ratio {row['ratio']}" if row["ratio"] is not None else ""
        print(f"{row['figure']}: {row['value']} {row['unit'] or ''}{ratio}  ({row['note']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
