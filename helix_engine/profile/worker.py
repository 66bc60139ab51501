"""Child process of a profile job: ``python -m helix_engine.profile.worker REQUEST.json``.

Imports the user's operator and bench harness (only here, never in the helix process), runs
one case under the backend's profiler and writes ``result.json``:
- npu: torch_npu.profiler exactly as upstream run-bench/profile-bench configure it (NPU+CPU,
  Level1, l2_cache off, data_simplification off, schedule wait 0 / warmup W / active R /
  skip_first 1, tensorboard_trace_handler) → ``ASCEND_PROFILER_OUTPUT/`` under the run folder;
- cuda: torch.profiler with CPU+CUDA activity, same schedule → ``trace.json`` (Chrome trace);
- cpu: torch.profiler (CPU) around the Triton interpreter, each kernel launch wrapped in
  ``record_function("triton:<kernel>")`` so the trace names the kernels → ``trace.json``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from helix_engine.eval.childlib import JobEvents, child_main, load_case, setup_backend
from helix_engine.profile.torch_trace import MANIFEST, TRACE_FILE

#: The interpreter is ~1000× slower than a device: cap the profiled steps on cpu.
CPU_MAX_WARMUP = 1
CPU_MAX_REPEATS = 5


@contextlib.contextmanager
def annotate_interpreted_launches() -> Any:
    """Wrap every Triton-interpreter launch in ``record_function("triton:<kernel>")``."""
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(f"triton:{self.fn.__name__}"):
            return original(self, *args, **kwargs)

    InterpretedFunction.run = run
    try:
        yield
    finally:
        InterpretedFunction.run = original


def _steps(fn: Any, prof: Any, sync: Any, total: int, events: Any) -> None:
    for i in range(total):
        fn()
        sync()
        prof.step()
        events.progress(i + 1, total)


def profile_torch(backend: Any, fn: Any, warmup: int, repeats: int, run_dir: Path, events: Any) -> str:
    """cuda / cpu: torch.profiler with the upstream schedule; returns the trace file name."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if backend.name == "cuda" else [])
    trace = run_dir / TRACE_FILE
    sched = schedule(wait=0, warmup=warmup, active=repeats, repeat=1, skip_first=1)
    guard = annotate_interpreted_launches() if backend.name == "cpu" else contextlib.nullcontext()
    with guard, profile(activities=activities, schedule=sched,
                        on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        _steps(fn, prof, backend.synchronize, 1 + warmup + repeats, events)
    return trace.name


def profile_npu(backend: Any, fn: Any, warmup: int, repeats: int, run_dir: Path, events: Any) -> None:
    """torch_npu.profiler as upstream (spec §A "Profiler setup"); aic_metrics left at default."""
    from helix_engine.eval.backends.npu import upstream_profiler

    with upstream_profiler(run_dir, warmup, repeats) as prof:
        _steps(fn, prof, backend.synchronize, 1 + warmup + repeats, events)


def run(request: dict[str, Any]) -> dict[str, Any]:
    events = JobEvents()
    backend = setup_backend(request)
    harness, case, fn = load_case(request)
    warmup, repeats = case.warmup, case.repeats
    if backend.name == "cpu":
        warmup, repeats = min(warmup, CPU_MAX_WARMUP), min(repeats, CPU_MAX_REPEATS)
    run_dir = Path(request["run_dir"])  # a staging folder: the parent renames it when the job passed
    shown_dir = request.get("final_dir") or str(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    events.case_started(case.id, 0, 1)
    fn()  # one untimed call (compile / first-touch), as upstream
    backend.synchronize()
    trace_name = None
    if backend.name == "npu":
        profile_npu(backend, fn, warmup, repeats, run_dir, events)
    else:
        trace_name = profile_torch(backend, fn, warmup, repeats, run_dir, events)
    manifest = {
        "backend": backend.name, "device": backend.device_name(), "case_id": case.id, "warmup": warmup,
        "repeats": repeats, "trace_file": trace_name, "kernel_names": list(harness.kernel_names),
        "operator_file": str(harness.operator_file), "bench_file": str(harness.bench_file),
        "time_label": "CPU time of the Triton interpreter" if backend.name == "cpu" else "device time",
        "created_at": time.time(),
    }
    if getattr(case, "work", None) is not None:  # the case's declared bytes/flops: profile-report's roofline
        manifest["work"] = case.work.to_json()
    (run_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    events.case_finished(case.id, {"case_label": case.id, "profile_dir": shown_dir})
    return {"return_code": 0, "profile_dir": shown_dir, "error": None}


def _failed(request: dict[str, Any], error: str) -> dict[str, Any]:
    return {"return_code": 1, "profile_dir": None, "error": error}


def main(argv: list[str] | None = None) -> int:
    return child_main(argv, "python -m helix_engine.profile.worker REQUEST.json", run, _failed)


if __name__ == "__main__":
    sys.exit(main())
