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
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: The interpreter is ~1000× slower than a device: cap the profiled steps on cpu.
CPU_MAX_WARMUP = 1
CPU_MAX_REPEATS = 5


def child_setup(request: dict[str, Any]) -> Any:
    """Environment as the eval worker sets it, then the backend adapter (imports torch)."""
    os.environ.setdefault("TRITON_ALWAYS_COMPILE", "1")
    if os.environ.get("TRITON_ALL_BLOCKS_PARALLEL") == "1":
        os.environ["TRITON_ALL_BLOCKS_PARALLEL"] = "0"
    name = request.get("backend") or "cpu"
    os.environ["HELIX_DEVICE"] = request.get("device_str") or name
    if name == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    if name == "npu":
        os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    compat = Path(__file__).resolve().parents[1] / "eval" / "compat"
    if compat.is_dir() and str(compat) not in sys.path:
        sys.path.append(str(compat))
    from helix_engine.eval.backends import get_backend

    backend = get_backend(name)
    backend.import_torch()
    return backend


def load_case(request: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(harness, case, closure) for the requested case id (the first case when none)."""
    from helix_engine.errors import HelixError
    from helix_engine.eval.loader import load_bench_harness

    harness = load_bench_harness(Path(request["bench_file"]), Path(request["operator_file"]))
    wanted = request.get("case_id")
    case = harness.cases[0] if not wanted else next((c for c in harness.cases if c.id == wanted), None)
    if case is None:
        ids = ", ".join(c.id for c in harness.cases)
        raise HelixError(f"case {wanted!r} is not in {harness.bench_file.name}; the cases are: {ids}")
    return harness, case, harness.build_fn(case)


@contextlib.contextmanager
def annotate_interpreted_launches() -> Any:
    """Wrap every Triton-interpreter launch in ``record_function("triton:<kernel>")``."""
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(f"triton:{self.fn.__name__}"):
            return original(self, *args, **kwargs)

    InterpretedFunction.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        InterpretedFunction.run = original  # type: ignore[method-assign]


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
    trace = run_dir / "trace.json"
    sched = schedule(wait=0, warmup=warmup, active=repeats, repeat=1, skip_first=1)
    guard = annotate_interpreted_launches() if backend.name == "cpu" else contextlib.nullcontext()
    with guard, profile(activities=activities, schedule=sched,
                        on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        _steps(fn, prof, backend.synchronize, 1 + warmup + repeats, events)
    return trace.name


def profile_npu(backend: Any, fn: Any, warmup: int, repeats: int, run_dir: Path, events: Any) -> None:
    """torch_npu.profiler as upstream (spec §A "Profiler setup"); aic_metrics left at default."""
    import torch_npu

    npu_prof = torch_npu.profiler
    config = npu_prof._ExperimentalConfig(  # noqa: SLF001 - torch_npu's public-by-convention config
        profiler_level=npu_prof.ProfilerLevel.Level1, l2_cache=False, data_simplification=False)
    with npu_prof.profile(
        activities=[npu_prof.ProfilerActivity.NPU, npu_prof.ProfilerActivity.CPU],
        schedule=npu_prof.schedule(wait=0, warmup=warmup, active=repeats, repeat=1, skip_first=1),
        on_trace_ready=npu_prof.tensorboard_trace_handler(str(run_dir)),
        record_shapes=False, profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
        experimental_config=config,
    ) as prof:
        _steps(fn, prof, backend.synchronize, 1 + warmup + repeats, events)


class Events:
    """The job's EventWriter, or a no-op when the worker runs by hand."""

    def __init__(self) -> None:
        from helix_engine.jobs.events import EventWriter

        self.writer = EventWriter.from_env()

    def __getattr__(self, name: str) -> Any:
        if self.writer is None:
            return lambda *a, **k: None
        return getattr(self.writer, name)


def run(request: dict[str, Any]) -> dict[str, Any]:
    events = Events()
    backend = child_setup(request)
    harness, case, fn = load_case(request)
    warmup, repeats = case.warmup, case.repeats
    if backend.name == "cpu":
        warmup, repeats = min(warmup, CPU_MAX_WARMUP), min(repeats, CPU_MAX_REPEATS)
    run_dir = Path(request["run_dir"])
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
    (run_dir / "profile-manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    events.case_finished(case.id, {"case_label": case.id, "profile_dir": str(run_dir)})
    return {"return_code": 0, "profile_dir": str(run_dir), "error": None}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m helix_engine.profile.worker REQUEST.json", file=sys.stderr)
        return 2
    request = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    try:
        result = run(request)
    except Exception as exc:  # noqa: BLE001 - user code: report, never hide
        traceback.print_exc()
        result = {"return_code": 1, "profile_dir": request.get("run_dir"), "error": f"{type(exc).__name__}: {exc}"}
    Path(request["result_path"]).write_text(json.dumps(result) + "\n", encoding="utf-8")
    return int(result["return_code"])


if __name__ == "__main__":
    sys.exit(main())
