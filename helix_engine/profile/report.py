"""`build_report`: one ProfileReport from an Ascend profile (either layout) or a torch.profiler
trace directory (cuda/cpu). The JSON carries every upstream key (spec §A "JSON keys") plus
ours: source, backend, time_label, total_time_us, symptoms, suggested_patterns, kernels,
notes, problems. The cockpit's hotspots pane renders this model directly.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from helix_engine.errors import HelixError
from helix_engine.profile import ascend, signals
from helix_engine.profile.routing import route

#: torch_trace's label for the interpreter's CPU time (not device time: no short-kernel reading).
CPU_TIME_LABEL = "CPU time of the Triton interpreter (not device time)"
DATA_MOVEMENT_RE = re.compile(r"copy|memcpy|transdata|dma|load|store|move", re.IGNORECASE)


class Hotspot(BaseModel):
    """One row of the hotspot table (an op type on Ascend, a kernel name in a torch trace)."""

    op_type: str
    core_type: str
    count: int
    total_us: float
    avg_us: float | None
    ratio_pct: float | None
    min_us: float | None = None
    max_us: float | None = None

    def upstream_row(self) -> dict[str, Any]:
        return {"OP Type": self.op_type, "Core Type": self.core_type, "Count": self.count,
                "Total Time(us)": self.total_us, "Avg Time(us)": self.avg_us, "Ratio(%)": self.ratio_pct}


class ProfileReport(BaseModel):
    """Everything one profile says about the hot operator (see module docstring)."""

    source: str
    backend: str
    time_label: str = "device time"
    profile_dir: str
    files: dict[str, str | None] = Field(default_factory=dict)
    target_operator: str | None = None
    selection: str | None = None
    target_row: dict[str, Any] | None = None
    op_summary: dict[str, Any] | None = None
    hotspots: list[Hotspot] = Field(default_factory=list)
    op_count: int = 0
    total_time_us: float = 0.0
    core_type_totals: dict[str, dict[str, float]] = Field(default_factory=dict)
    data_movement_hotspots: list[dict[str, Any]] = Field(default_factory=list)
    operator_type_guess: dict[str, Any] = Field(default_factory=dict)
    bound_analysis: dict[str, Any] = Field(default_factory=dict)
    pipeline_signals: dict[str, Any] = Field(default_factory=dict)
    task_timeline_signals: dict[str, Any] = Field(default_factory=dict)
    host_api_signals: dict[str, Any] = Field(default_factory=dict)
    msprof_timeline_signals: dict[str, Any] = Field(default_factory=dict)
    binary_signals: dict[str, Any] = Field(default_factory=dict)
    symptoms: list[dict[str, Any]] = Field(default_factory=list)
    suggested_patterns: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    problems: list[dict[str, Any]] = Field(default_factory=list)
    #: achieved GB/s / TFLOP/s of the profiled case against the device's peak (perf/roofline.py)
    roofline: dict[str, Any] = Field(default_factory=dict)
    #: launches per profiled call and per op (signals.launch_symptoms reads them)
    launch_signals: dict[str, Any] = Field(default_factory=dict)

    @property
    def bound(self) -> str:
        return str(self.bound_analysis.get("classification", signals.NO_COUNTERS))

    def to_json(self) -> dict[str, Any]:
        """Upstream keys first (same names), then helix's."""
        f = self.files
        return {
            "profile_dir": self.profile_dir,
            "op_statistic_file": f.get("op_statistic"), "op_summary_file": f.get("op_summary"),
            "task_time_file": f.get("task_time"), "api_statistic_file": f.get("api_statistic"),
            "msprof_json_file": f.get("timeline_json"),
            "target_operator": self.target_operator, "selection": self.selection, "target_row": self.target_row,
            "op_summary": self.op_summary, "core_type_totals": self.core_type_totals,
            "data_movement_hotspots": self.data_movement_hotspots,
            "top_ops": [h.upstream_row() for h in self.hotspots],
            "operator_type_guess": self.operator_type_guess, "bound_analysis": self.bound_analysis,
            "pipeline_signals": self.pipeline_signals, "task_timeline_signals": self.task_timeline_signals,
            "host_api_signals": self.host_api_signals, "msprof_timeline_signals": self.msprof_timeline_signals,
            "binary_signals": self.binary_signals,
            "source": self.source, "backend": self.backend, "time_label": self.time_label,
            "op_count": self.op_count, "total_time_us": round(self.total_time_us, 6), "files": self.files,
            "hotspots": [h.model_dump() for h in self.hotspots],
            "symptoms": self.symptoms, "suggested_patterns": self.suggested_patterns,
            "notes": self.notes, "problems": self.problems, "roofline": self.roofline,
            "launch_signals": self.launch_signals,
        }

    def to_markdown(self, width: int | None = None) -> str:
        from helix_engine.profile.render import render_markdown

        return render_markdown(self, width)


def core_bucket(core_type: str) -> str:
    """scalar → scalar; vector → vector; cube/aicore/ai_core → cube; else other (upstream order)."""
    low = core_type.lower()
    if "scalar" in low:
        return "scalar"
    if "vector" in low:
        return "vector"
    if "cube" in low or "aicore" in low or "ai_core" in low:
        return "cube"
    return "other"


def fill_common(report: ProfileReport, rows: list[Hotspot], top: int) -> None:
    """Hotspots, core buckets, data-movement hotspots and totals from the full op list."""
    report.op_count = len(rows)
    report.total_time_us = sum(r.total_us for r in rows)
    report.hotspots = rows[: max(top, 0)]
    buckets: dict[str, dict[str, float]] = {}
    for r in rows:
        b = buckets.setdefault(core_bucket(r.core_type), {"total_time_us": 0.0, "ratio_pct": 0.0})
        b["total_time_us"] = round(b["total_time_us"] + r.total_us, 6)
        b["ratio_pct"] = round(b["ratio_pct"] + (r.ratio_pct or 0.0), 6)
    report.core_type_totals = buckets
    report.data_movement_hotspots = [
        {"op_type": r.op_type, "total_time_us": r.total_us, "ratio_pct": r.ratio_pct, "count": r.count}
        for r in rows if DATA_MOVEMENT_RE.search(r.op_type)
    ]
    report.launch_signals = {"launches": sum(r.count for r in rows),
                             "ops": [[r.op_type, r.count, r.avg_us] for r in rows]}


def pick_target(rows: list[Hotspot], target_op: str | None) -> tuple[Hotspot | None, str | None]:
    """Exact match, else an error listing the ops; default = largest total ("inferred")."""
    if target_op is not None:
        for r in rows:
            if r.op_type == target_op:
                return r, "explicit"
        names = ", ".join(r.op_type for r in rows[:20]) or "(none)"
        raise HelixError(f"target operator {target_op!r} is not in this profile; the ops are: {names}. "
                         "Pass one of them to --target-op (exact name).")
    return (rows[0], "inferred") if rows else (None, None)


def build_report(profile_dir: Path, target_op: str | None = None, top: int = 5, *,
                 root: Path | None = None) -> ProfileReport:
    """Build the report for ``profile_dir``: an Ascend layout if one is found, else a
    torch.profiler Chrome trace. Raises HelixError when neither is there. Every Ascend file is
    read through the safe reader and must stay inside ``root`` (default: its workspace)."""
    profile_dir = Path(profile_dir)
    if not profile_dir.is_dir():
        raise HelixError(f"profile directory {profile_dir} does not exist; run `helix profile-bench` first "
                         "or pass the folder that holds the profiler output.")
    layout = ascend.find_layout(profile_dir)
    if layout is not None:
        report = _ascend_report(profile_dir, layout, target_op, top, root)
        return attach_launches(attach_roofline(report, profile_dir), profile_dir)
    from helix_engine.profile import torch_trace

    trace = torch_trace.find_trace(profile_dir)
    if trace is not None:
        report = torch_trace.build_trace_report(profile_dir, trace, target_op, top)
        return attach_launches(attach_roofline(report, profile_dir), profile_dir)
    raise HelixError(f"no profiler output under {profile_dir}: expected ASCEND_PROFILER_OUTPUT/, "
                     "mindstudio_profiler_output/ or a torch.profiler trace (*.json). Run `helix profile-bench`.")


def _ascend_report(profile_dir: Path, layout: ascend.AscendFiles, target_op: str | None, top: int,
                   root: Path | None) -> ProfileReport:
    files = {k: (str(getattr(layout, k)) if getattr(layout, k) else None) for k in
             ("op_statistic", "op_summary", "task_time", "api_statistic", "timeline_json")}
    report = ProfileReport(source=layout.mode, backend="npu", profile_dir=str(profile_dir), files=files)
    if layout.op_statistic is None:
        raise HelixError(f"{layout.root} has no op_statistic CSV, the one file a report needs; re-run the "
                         "profiler (a run killed early leaves the folder incomplete).")
    stats, stat_report = ascend.read_op_statistic(layout.op_statistic, root=root)
    errors = [p for p in stat_report.problems if p.severity == "error"]
    if errors:
        raise HelixError(f"{errors[0]}")
    report.problems += [p.to_json() for p in stat_report.problems]
    rows = [Hotspot(op_type=s.op_type, core_type=s.core_type, count=s.count, total_us=s.total_us, avg_us=s.avg_us,
                    ratio_pct=s.ratio_pct, min_us=s.min_us, max_us=s.max_us) for s in stats]
    fill_common(report, rows, top)
    target, report.selection = pick_target(rows, target_op)
    if target is None:
        report.notes.append("op_statistic has no rows: the profiled run launched no device op")
        return report
    report.target_operator = target.op_type
    report.target_row = next(s.to_json() for s in stats if s.op_type == target.op_type)
    pct: dict[str, float] = {}
    cube_util: float | None = None
    if layout.op_summary is not None:
        inv = ascend.summarize_invocations(layout.op_summary, layout.mode, target.op_type, root=root)
        report.problems += [p.to_json() for p in inv.report.problems] if inv.report else []
        d = inv.durations
        report.op_summary = {"count": d.count, "sum_us": round(d.total, 6), "avg_us": round(d.avg, 6) if d.avg else None,
                             "min_us": d.min if d.count else None, "max_us": d.max if d.count else None,
                             "matches_op_statistic": bool(d.count)
                             and abs(d.total - target.total_us) <= 1e-3 * max(target.total_us, 1.0)}
        pct, scale = signals.percent_ratios(inv.ratios)
        cube_util = inv.cube_util.avg
        report.pipeline_signals = {
            "ratios": {k: v.to_json() for k, v in inv.ratios.items()}, "ratio_scale_in_file": scale,
            "ratios_pct": {k: round(v, 3) for k, v in pct.items()},
            "task_wait_time_us": inv.wait.to_json(), "cube_utilization_percent": inv.cube_util.to_json(),
            "block_dim": {"observed_values": inv.block_dims},
        }
        if d.count and not report.op_summary["matches_op_statistic"]:
            report.notes.append(f"the per-invocation file sums to {d.total:.3f} µs for {target.op_type}, op_statistic "
                                f"says {target.total_us:.3f} µs (the files cover different runs or steps)")
    else:
        report.notes.append("no per-invocation file (op_summary / kernel_details): no pipeline ratios")
    report.operator_type_guess = signals.operator_type_guess(pct, cube_util, core_bucket(target.core_type))
    report.bound_analysis = signals.bound_analysis(pct, cube_util)
    if layout.task_time is not None:
        timeline, tt_report = ascend.task_timeline(layout.task_time, target.op_type, root=root)
        report.task_timeline_signals = timeline
        report.problems += [p.to_json() for p in tt_report.problems]
    if layout.api_statistic is not None:
        apis, api_report = ascend.read_api_statistic(layout.api_statistic, root=root)
        report.problems += [p.to_json() for p in api_report.problems]
        report.host_api_signals = {"launch_related_present": any(ascend.LAUNCH_RE.search(a.name) for a in apis),
                                   "top_apis": [a.to_json() for a in apis[:10]]}
    if layout.timeline_json is not None:
        tracks, problem = ascend.count_tracks(layout.timeline_json, root=root)
        report.msprof_timeline_signals = {"stream_like_tracks": tracks}
        if problem:
            report.problems.append(problem.to_json())
    share = (sum(h["total_time_us"] for h in report.data_movement_hotspots) / report.total_time_us * 100
             if report.total_time_us > 0 else None)
    report.symptoms = signals.detect_symptoms(pct, report.bound, share)
    report.suggested_patterns = route([s["symptom"] for s in report.symptoms])
    return report


#: The roofline's judgement → the routing symptom it raises (profile/routing.py).
ROOFLINE_SYMPTOMS: dict[str, str] = {"memory-bound": "at-bandwidth-roof", "compute-bound": "at-compute-roof",
                                     "latency-bound": "far-below-roofs"}


def _manifest_near(report: ProfileReport, profile_dir: Path) -> dict[str, Any]:
    """helix's profile manifest of the run the report read: beside its files or in a folder
    above them, up to ``profile_dir`` (which may be the parent of several PROF_* runs)."""
    from helix_engine.profile.torch_trace import read_manifest

    top = Path(profile_dir).resolve()
    for file in (f for f in report.files.values() if f):
        folder = Path(file).resolve().parent
        while folder == top or top in folder.parents:
            found = read_manifest(folder)
            if found:
                return found
            folder = folder.parent
    return read_manifest(top)


def attach_roofline(report: ProfileReport, profile_dir: Path) -> ProfileReport:
    """The profiled case's roofline (when its bench case declared bytes/flops) and, on a device,
    the bound it decides by measurement: it raises its routing symptom first, and a kernel at the
    bandwidth or compute roof is classified so whatever the pipe ratios suggest."""
    from helix_engine.perf import roofline
    from helix_engine.workspace import layout
    from helix_engine.workspace.reading import owning_workspace

    manifest = _manifest_near(report, profile_dir)
    work = manifest.get("work")
    if not isinstance(work, dict):
        return report
    try:
        repeats = int(manifest.get("repeats") or 0)
    except (TypeError, ValueError):
        repeats = 0
    names = [str(n) for n in manifest.get("kernel_names") or [] if isinstance(n, str)]
    device = manifest.get("device") if isinstance(manifest.get("device"), str) else None
    operator = manifest.get("operator_file")  # the workspace whose .helix/peaks.json applies
    ws = layout.workspace_of(Path(operator)) if isinstance(operator, str) else owning_workspace(Path(profile_dir))
    report.roofline = roofline.profile_figures(work, [(h.op_type, h.total_us) for h in report.hotspots], repeats,
                                               names, device, ws)
    figures = report.roofline.get("operator") or {}
    bound = figures.get("bound")
    if not bound:
        return report
    if report.backend == "cpu":
        report.roofline["routing"] = ("not used: on the cpu backend the times are the Triton interpreter's, "
                                      "not device time")
        return report
    evidence = f"by measurement: {figures.get('evidence')}"
    report.roofline["routing"] = evidence
    report.symptoms.insert(0, {"symptom": ROOFLINE_SYMPTOMS[bound], "evidence": evidence})
    report.suggested_patterns = route([s["symptom"] for s in report.symptoms])
    if bound in ("memory-bound", "compute-bound"):
        before = report.bound
        reasoning = [evidence] + ([f"the pipe counters alone read {before}"] if before != bound else [])
        report.bound_analysis = {**report.bound_analysis, "classification": bound, "decided_by": "roofline",
                                 "reasoning": reasoning + list(report.bound_analysis.get("reasoning", []))}
    return report


def attach_launches(report: ProfileReport, profile_dir: Path) -> ProfileReport:
    """The launch-bound evidence (several launches per call, short kernels) as routing symptoms,
    on every backend: the calls are the trace's profiler steps, else the manifest's repeats (an
    upstream Ascend profile without helix's manifest gives no call count, so no per-call figure).
    Short kernels are read from device time only, and only where no roofline fraction exists."""
    counted = report.launch_signals
    calls = counted.get("steps")
    if not calls:
        try:
            calls = int(_manifest_near(report, profile_dir).get("repeats") or 0) or None
        except (TypeError, ValueError):
            calls = None
    ops = [(str(name), int(count), avg) for name, count, avg in counted.get("ops", [])]
    # a measured fraction of the device's peaks outranks "short" (a 2 µs kernel at 40% of the copy
    # bandwidth is doing real work): the short-kernel reading is for profiles without a roofline
    figures = report.roofline.get("operator") or {}
    measured = any(figures.get(k) is not None for k in ("bw_fraction", "compute_fraction"))
    device_time = report.backend != "cpu" and report.time_label != CPU_TIME_LABEL and not measured
    found = signals.launch_symptoms(ops, calls, device_time)
    report.launch_signals = {**counted, "calls": calls,
                             "launches_per_call": round(counted.get("launches", 0) / calls, 3) if calls else None}
    if found:
        known = {s["symptom"] for s in report.symptoms}
        report.symptoms += [s for s in found if s["symptom"] not in known]
        report.suggested_patterns = route([s["symptom"] for s in report.symptoms])
    return report


def round_profile_dir(round_dir: Path) -> Path | None:
    """Where a round's (or baseline's) profile lives: round-state.json ``profile_dir`` (relative
    to the round folder) when set and present, else ``<round_dir>/profile``; None when absent."""
    from helix_engine.workspace.reading import inside, owning_workspace, read_json_object

    round_dir = Path(round_dir)
    path = round_dir / "round-state.json"
    workspace = owning_workspace(path)
    state, _ = read_json_object(path, workspace, what="round state", fix="")
    declared = state.get("profile_dir") if isinstance(state, dict) else None
    if isinstance(declared, str) and declared.strip() and (round_dir / declared).is_dir():
        with contextlib.suppress(OSError, ValueError):  # a declared folder outside the workspace is not used
            if inside(round_dir / declared, workspace):
                return round_dir / declared
    default = round_dir / "profile"
    return default if default.is_dir() else None


def report_for_round(round_dir: Path, target_op: str | None = None, top: int = 5) -> ProfileReport | None:
    """The cockpit's hotspots pane: the round's report, or None when it has no profile.
    Raises HelixError when a profile folder exists but cannot be read (show the message)."""
    folder = round_profile_dir(round_dir)
    return build_report(folder, target_op=target_op, top=top) if folder is not None else None
