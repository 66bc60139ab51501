"""A ProfileReport from a torch.profiler Chrome trace (``export_chrome_trace``), for cuda and cpu.

cuda: the hotspots are device activity — events with ``cat`` ``kernel`` (Triton kernels appear
under their Python function name), plus ``gpu_memcpy``/``gpu_memset`` as data movement — in
device time. cpu: Triton runs in its interpreter, so there is no device time; helix's
profile-bench wraps each kernel launch in a ``record_function("triton:<name>")`` annotation and
those annotations are the hotspots, in CPU time of the interpreter. Without such annotations
the top-level ``cpu_op`` events are used (nested ops are dropped so nothing is counted twice).
No hardware counters exist in these traces, so the bound is "unknown (no hardware counters)".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.profile import signals
from helix_engine.profile.ascend import RunningStat
from helix_engine.profile.report import CPU_TIME_LABEL, Hotspot, ProfileReport, fill_common, pick_target
from helix_engine.profile.routing import route
from helix_engine.workspace.reading import (
    decode_text,
    open_workspace_file,
    owning_workspace,
    read_bytes_safe,
    read_json_object,
)

MANIFEST = "profile-manifest.json"
#: The Chrome trace profile-bench writes on cuda and cpu (named in the manifest's trace_file).
TRACE_FILE = "trace.json"
KERNEL_CATS = {"kernel": "CUDA kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
ANNOTATION_PREFIX = "triton:"
MAX_TRACE_BYTES = 512 * 1024 * 1024
CPU_LABEL = CPU_TIME_LABEL


def read_manifest(profile_dir: Path, *, root: Path | None = None) -> dict[str, Any]:
    """helix's ``profile-manifest.json`` (backend, case, trace file); {} when absent or bad.
    ``root``: the folder reads stay inside (default: the workspace owning ``profile_dir``)."""
    path = Path(profile_dir) / MANIFEST
    data, _ = read_json_object(path, root if root is not None else owning_workspace(path),
                               what="profile manifest", fix="")
    return data or {}


def find_trace(profile_dir: Path) -> Path | None:
    """The manifest's trace file, else the newest ``*.json`` that looks like a Chrome trace."""
    profile_dir = Path(profile_dir)
    named = read_manifest(profile_dir).get("trace_file")
    if isinstance(named, str) and (profile_dir / named).is_file():
        return profile_dir / named
    candidates = [p for p in profile_dir.rglob("*.json") if p.name != MANIFEST and p.is_file()]
    traces = [p for p in candidates if p.name.endswith(".pt.trace.json") or _looks_like_trace(p)]
    return max(traces, key=lambda p: (p.stat().st_mtime, p.name)) if traces else None


def _looks_like_trace(path: Path) -> bool:
    try:
        with open_workspace_file(path, owning_workspace(path)) as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return b'"traceEvents"' in head


def load_events(trace: Path, *, root: Path | None = None) -> list[dict[str, Any]]:
    """The trace's event list (read through the safe reader, inside ``root``, default the
    workspace owning it); HelixError with a sentence when it is not a readable trace."""
    trace = Path(trace)
    data_bytes, problem = read_bytes_safe(trace, root if root is not None else owning_workspace(trace),
                                          max_bytes=MAX_TRACE_BYTES)
    if problem is not None and "over the" in problem.message:
        raise HelixError(f"{trace} {problem.message.split(';')[0]}; profile fewer repeats (the case's `repeats`).")
    if problem is not None:
        raise HelixError(f"{trace} cannot be read: it {problem.message}; re-run `helix profile-bench`.")
    text, problem = decode_text(data_bytes or b"", str(trace))
    try:
        if problem is not None:
            raise ValueError(problem.message)
        data = json.loads(text or "")
    except (ValueError, RecursionError) as exc:
        raise HelixError(f"{trace} is not a readable trace (truncated or garbled: {exc}); re-run "
                         "`helix profile-bench`.") from exc
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise HelixError(f"{trace} holds no traceEvents list; it is not a torch.profiler Chrome trace.")
    return [e for e in events if isinstance(e, dict)]


def _duration(event: dict[str, Any]) -> float | None:
    value = event.get("dur")
    if value is None:
        return None
    try:
        dur = float(value)
    except (TypeError, ValueError):
        return None
    return dur if dur >= 0 else None


def _top_level_cpu_ops(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """cpu_op events not nested inside another cpu_op of the same thread."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X" and _duration(e) is not None]
    ops.sort(key=lambda e: (str(e.get("pid")), str(e.get("tid")), float(e.get("ts", 0)), -float(e.get("dur", 0))))
    out: list[dict[str, Any]] = []
    end_by_thread: dict[tuple[str, str], float] = {}
    for e in ops:
        key = (str(e.get("pid")), str(e.get("tid")))
        start = float(e.get("ts", 0))
        if start < end_by_thread.get(key, float("-inf")):
            continue
        end_by_thread[key] = start + float(e["dur"])
        out.append(e)
    return out


def select_events(events: list[dict[str, Any]], backend: str) -> tuple[list[tuple[str, str, float]], str]:
    """(name, core_type, dur_us) rows and what they measure, for the backend's view."""
    device = [(str(e.get("name")), KERNEL_CATS[e["cat"]], d) for e in events
              if e.get("cat") in KERNEL_CATS and (d := _duration(e)) is not None]
    if backend == "cuda" or (backend != "cpu" and device):
        return device, "device time"
    marked = [(str(e.get("name"))[len(ANNOTATION_PREFIX):], "interpreter", d) for e in events
              if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(ANNOTATION_PREFIX)
              and (d := _duration(e)) is not None]
    if marked:
        return marked, CPU_LABEL
    return [(str(e.get("name")), "cpu_op", float(e["dur"])) for e in _top_level_cpu_ops(events)], CPU_LABEL


def build_trace_report(profile_dir: Path, trace: Path, target_op: str | None, top: int) -> ProfileReport:
    """Hotspots per kernel (count, total, avg, min, max, share) from one Chrome trace."""
    manifest = read_manifest(profile_dir)
    events = load_events(trace)
    backend = str(manifest.get("backend") or ("cuda" if any(e.get("cat") == "kernel" for e in events) else "cpu"))
    rows, label = select_events(events, backend)
    stats: dict[tuple[str, str], RunningStat] = {}
    for name, core, dur in rows:
        stats.setdefault((name, core), RunningStat()).add(dur)
    grand = sum(s.total for s in stats.values())
    hotspots = sorted(
        (Hotspot(op_type=name, core_type=core, count=s.count, total_us=round(s.total, 6), avg_us=s.avg,
                 ratio_pct=round(s.total / grand * 100, 3) if grand else None, min_us=s.min, max_us=s.max)
         for (name, core), s in stats.items()),
        key=lambda h: h.total_us, reverse=True)
    report = ProfileReport(source=f"torch-profiler-{backend}", backend=backend, time_label=label,
                           profile_dir=str(profile_dir), files={"trace": str(trace)})
    fill_common(report, hotspots, top)
    steps = len({str(e.get("name")) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
    if backend == "cpu":
        report.notes.append("cpu backend: Triton ran in its interpreter; times are Python/CPU time, useful only "
                            "to see which kernel dominates, never as device performance")
    if steps:
        report.notes.append(f"{steps} profiler steps in the trace")
        report.launch_signals["steps"] = steps
    target, report.selection = pick_target(hotspots, target_op)
    report.bound_analysis = {"classification": signals.NO_COUNTERS, "scores": {},
                             "reasoning": ["torch.profiler traces carry no pipeline counters; use Nsight "
                                           "Compute (ncu) on cuda for a roofline"]}
    report.operator_type_guess = {"kind": "unknown", "signals": {}, "source": "none"}
    if target is not None:
        report.target_operator = target.op_type
        report.target_row = target.upstream_row()
        report.op_summary = {"count": target.count, "sum_us": target.total_us, "avg_us": target.avg_us,
                             "min_us": target.min_us, "max_us": target.max_us,
                             "per_step_avg_us": round(target.total_us / steps, 6) if steps else None}
    share = (sum(h["total_time_us"] for h in report.data_movement_hotspots) / report.total_time_us * 100
             if report.total_time_us > 0 else None)
    report.symptoms = signals.detect_symptoms({}, report.bound, share)
    report.suggested_patterns = route([s["symptom"] for s in report.symptoms])
    report.msprof_timeline_signals = {"stream_like_tracks": len({str(e.get("tid")) for e in events if "tid" in e})}
    return report
