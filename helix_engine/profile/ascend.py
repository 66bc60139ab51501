"""Ascend profiler outputs: find the files of either layout and aggregate them in one pass.

Two layouts exist (spec upstream-profile-ir §A):
- torch_npu: ``…_ascend_pt/ASCEND_PROFILER_OUTPUT/{op_statistic,kernel_details,api_statistic}.csv``
  + ``trace_view.json`` (torch_npu *also* writes ``PROF_*/mindstudio_profiler_output``; when both
  exist the torch_npu files win);
- msprof: ``PROF_*/mindstudio_profiler_output/{op_statistic,op_summary,task_time,api_statistic}_<ts>.csv``
  + ``msprof_<ts>.json``.
Only ``op_statistic`` is required. Per-invocation files are streamed (see `csvstream`).
"""

from __future__ import annotations

import json
import math
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.profile.csvstream import CsvReadReport, first_present, iter_cells, iter_rows, to_float
from helix_engine.workspace.models import Problem

MODE_TORCH = "torch-npu-profiler"
MODE_MSPROF = "msprof"
TORCH_DIR = "ASCEND_PROFILER_OUTPUT"
MSPROF_DIR = "mindstudio_profiler_output"

OP_STAT_REQUIRED = ("OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                    "Max Time(us)", "Ratio(%)")
#: Pipeline busy fractions (0–1 in real files) and the one percentage column.
RATIO_COLUMNS: tuple[str, ...] = (
    "aic_mac_ratio", "aic_scalar_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_mte3_ratio",
    "aiv_vec_ratio", "aiv_scalar_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio",
)
CUBE_UTIL_COLUMN = "cube_utilization(%)"
MAX_BLOCK_DIMS = 32
#: trace JSON files above this are scanned for tids with a regex instead of json.load.
MAX_JSON_LOAD_BYTES = 256 * 1024 * 1024


class ProfileDataError(HelixError):
    """A profiler file helix needs is missing or unreadable (message says which and why)."""


@dataclass
class AscendFiles:
    """The files one report reads; ``None`` where the layout has no such file."""

    mode: str
    root: Path
    op_statistic: Path | None
    op_summary: Path | None  # kernel_details.csv in torch_npu mode
    task_time: Path | None
    api_statistic: Path | None
    timeline_json: Path | None
    operator_details: Path | None = None
    step_trace_time: Path | None = None


def _newest(paths: list[Path]) -> Path | None:
    existing = [p for p in paths if p.is_file()]
    if not existing:
        return None
    return max(existing, key=lambda p: (p.stat().st_mtime, p.name))


def newest_file(folder: Path, pattern: str) -> Path | None:
    """Newest-mtime file matching ``pattern`` anywhere under ``folder`` (a bench's profiler dir)."""
    return _newest(list(Path(folder).rglob(pattern)))


def pick_csv(folder: Path, prefix: str) -> Path | None:
    """Newest-mtime ``<prefix>_*.csv``, else ``<prefix>.csv`` (upstream's rule)."""
    stamped = _newest(list(folder.glob(f"{prefix}_*.csv")))
    if stamped is not None:
        return stamped
    plain = folder / f"{prefix}.csv"
    return plain if plain.is_file() else None


def _candidate_dirs(profile_dir: Path, name: str) -> list[Path]:
    if profile_dir.name == name:
        return [profile_dir]
    child = profile_dir / name
    if child.is_dir():
        return [child]
    return [p for p in profile_dir.rglob(name) if p.is_dir()]


def _best_dir(dirs: list[Path]) -> Path | None:
    """Among several runs, the newest one that holds an op_statistic file."""
    usable = [d for d in dirs if pick_csv(d, "op_statistic") is not None]
    pool = usable or dirs
    return max(pool, key=lambda d: (d.stat().st_mtime, str(d))) if pool else None


def find_layout(profile_dir: Path) -> AscendFiles | None:
    """Detect the layout under ``profile_dir`` (a PROF_* dir, an output dir, or a parent)."""
    profile_dir = Path(profile_dir)
    if not profile_dir.is_dir():
        return None
    torch_root = _best_dir(_candidate_dirs(profile_dir, TORCH_DIR))
    msprof_root = _best_dir(_candidate_dirs(profile_dir, MSPROF_DIR))
    if torch_root is not None:
        trace = torch_root / "trace_view.json"
        return AscendFiles(
            mode=MODE_TORCH, root=torch_root,
            op_statistic=pick_csv(torch_root, "op_statistic"),
            op_summary=pick_csv(torch_root, "kernel_details"),
            task_time=None,
            api_statistic=pick_csv(torch_root, "api_statistic"),
            timeline_json=trace if trace.is_file() else None,
            operator_details=pick_csv(torch_root, "operator_details"),
            step_trace_time=pick_csv(torch_root, "step_trace_time"),
        )
    if msprof_root is not None:
        jsons = sorted(msprof_root.glob("msprof_*.json"))
        return AscendFiles(
            mode=MODE_MSPROF, root=msprof_root,
            op_statistic=pick_csv(msprof_root, "op_statistic"),
            op_summary=pick_csv(msprof_root, "op_summary"),
            task_time=pick_csv(msprof_root, "task_time"),
            api_statistic=pick_csv(msprof_root, "api_statistic"),
            timeline_json=jsons[-1] if jsons else None,
        )
    return None


# ----------------------------------------------------------------------------- aggregates


@dataclass
class RunningStat:
    """count / total / min / max of a stream of values, in O(1) memory."""

    count: int = 0
    total: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.min = value if value < self.min else self.min
        self.max = value if value > self.max else self.max

    @property
    def avg(self) -> float | None:
        return self.total / self.count if self.count else None

    def to_json(self, digits: int = 6) -> dict[str, Any]:
        if not self.count:
            return {"count": 0, "total": 0.0, "avg": None, "min": None, "max": None}
        return {"count": self.count, "total": round(self.total, digits), "avg": round(self.total / self.count, digits),
                "min": round(self.min, digits), "max": round(self.max, digits)}


@dataclass
class OpStat:
    """One ``op_statistic`` row (one row per OP Type and core type)."""

    op_type: str
    core_type: str
    count: int
    total_us: float
    min_us: float | None
    avg_us: float | None
    max_us: float | None
    ratio_pct: float | None

    def to_json(self) -> dict[str, Any]:
        return {"OP Type": self.op_type, "Core Type": self.core_type, "Count": self.count,
                "Total Time(us)": self.total_us, "Min Time(us)": self.min_us, "Avg Time(us)": self.avg_us,
                "Max Time(us)": self.max_us, "Ratio(%)": self.ratio_pct}


def read_op_statistic(path: Path) -> tuple[list[OpStat], CsvReadReport]:
    """All rows (one per op type, so small), sorted by Total Time desc."""
    report = CsvReadReport(Path(path))
    rows: list[OpStat] = []
    for row in iter_rows(path, report, required=OP_STAT_REQUIRED):
        total = to_float(row["Total Time(us)"])
        count = to_float(row["Count"])
        if total is None or count is None or not row["OP Type"]:
            report.problem("row has no OP Type, Count or Total Time; it was skipped",
                           line=report.rows + 1, severity="warning")
            continue
        rows.append(OpStat(row["OP Type"], row["Core Type"], int(count), total, to_float(row["Min Time(us)"]),
                           to_float(row["Avg Time(us)"]), to_float(row["Max Time(us)"]), to_float(row["Ratio(%)"])))
    rows.sort(key=lambda r: r.total_us, reverse=True)
    return rows, report


@dataclass
class InvocationSummary:
    """One streaming pass over op_summary / kernel_details: the target's invocations in detail,
    every op's count and total, and the distinct Step Ids."""

    path: Path
    name_column: str | None = None
    target: str | None = None
    durations: RunningStat = field(default_factory=RunningStat)
    ratios: dict[str, RunningStat] = field(default_factory=dict)
    cube_util: RunningStat = field(default_factory=RunningStat)
    wait: RunningStat = field(default_factory=RunningStat)
    block_dims: list[int] = field(default_factory=list)
    per_name: dict[str, RunningStat] = field(default_factory=dict)
    step_ids: set[str] = field(default_factory=set)
    report: CsvReadReport | None = None


def _name_columns(mode: str) -> tuple[str, ...]:
    return ("Name",) if mode == MODE_TORCH else ("OP Type", "Op Name", "Name")


def summarize_invocations(path: Path, mode: str, target: str | None) -> InvocationSummary:
    """Stream the per-invocation file once. N/A pipeline cells count as 0 (upstream);
    absent columns (aic_mte3 in older CANN) are simply not in ``ratios``."""
    summary = InvocationSummary(path=Path(path), target=target)
    report = CsvReadReport(Path(path))
    summary.report = report
    rows = iter_rows(path, report, any_of=(_name_columns(mode), ("Task Duration(us)", "Duration(us)")))
    header_seen = False
    name_col = dur_col = wait_col = None
    ratio_cols: list[str] = []
    has_util = has_step = has_block = False
    for row in rows:
        if not header_seen:
            header_seen = True
            name_col = first_present(report.header, _name_columns(mode))
            dur_col = first_present(report.header, ("Task Duration(us)", "Duration(us)"))
            wait_col = first_present(report.header, ("Task Wait Time(us)", "Wait Time(us)"))
            ratio_cols = [c for c in RATIO_COLUMNS if c in report.header]
            summary.ratios = {c: RunningStat() for c in ratio_cols}
            has_util = CUBE_UTIL_COLUMN in report.header
            has_step = "Step Id" in report.header
            has_block = "Block Dim" in report.header
            summary.name_column = name_col
        name = row[name_col]  # type: ignore[index]
        duration = to_float(row[dur_col])  # type: ignore[index]
        stat = summary.per_name.get(name)
        if stat is None:
            stat = summary.per_name[name] = RunningStat()
        if duration is not None:
            stat.add(duration)
        if has_step and row["Step Id"]:
            summary.step_ids.add(row["Step Id"])
        if target is None or name != target or duration is None or duration <= 0:
            continue
        summary.durations.add(duration)
        for col in ratio_cols:
            summary.ratios[col].add(to_float(row[col]) or 0.0)
        if has_util:
            summary.cube_util.add(to_float(row[CUBE_UTIL_COLUMN]) or 0.0)
        if wait_col is not None:
            wait = to_float(row[wait_col])
            if wait is not None and wait > 0:
                summary.wait.add(wait)
        if has_block:
            dim = to_float(row["Block Dim"])
            if dim is not None and int(dim) not in summary.block_dims and len(summary.block_dims) < MAX_BLOCK_DIMS:
                summary.block_dims.append(int(dim))
    return summary


# ------------------------------------------------------------ kernel vs total-op (run-bench)


def _raise_on(report: CsvReadReport) -> None:
    errors = [p for p in report.problems if p.severity == "error"]
    if errors:
        raise ProfileDataError(str(errors[0]))


@dataclass
class StepAverages:
    """Per-op averages from kernel_details and, when asked, each step's own per-op sums."""

    #: op ``Name`` → per-step average µs, in first-seen order
    averages: dict[str, float]
    #: Step Id → op name → summed µs; empty when the file has no Step Id values or not asked
    steps: dict[str, dict[str, float]] = field(default_factory=dict)


def kernel_details_by_step(path: Path, repeats: int, *, keep_steps: bool = True) -> StepAverages:
    """One streaming pass over kernel_details: per-step average µs per op ``Name`` = Σ Duration
    ÷ distinct ``Step Id`` (÷ ``repeats`` when the column is absent or empty); with
    ``keep_steps`` also each step's per-op sums (run-bench's per-iteration samples). Rows
    without a name are skipped. Raises ProfileDataError when the file is missing or unreadable."""
    report = CsvReadReport(Path(path))
    sums: dict[str, float] = {}
    per_step: dict[str, dict[str, float]] = {}
    steps: set[str] = set()
    name_i = dur_i = step_i = -1
    for cells in iter_cells(path, report, required=("Name", "Duration(us)")):
        if name_i < 0:
            name_i, dur_i = report.header.index("Name"), report.header.index("Duration(us)")
            step_i = report.header.index("Step Id") if "Step Id" in report.header else -1
        step = cells[step_i].strip() if step_i >= 0 else ""
        if step:
            steps.add(step)
            if keep_steps:
                per_step.setdefault(step, {})
        name = cells[name_i].strip()
        value = to_float(cells[dur_i])
        if value is None or not name:
            continue
        sums[name] = sums.get(name, 0.0) + value
        if keep_steps and step:
            bucket = per_step[step]
            bucket[name] = bucket.get(name, 0.0) + value
    _raise_on(report)
    divisor = len(steps) or repeats
    if divisor <= 0:
        raise ProfileDataError(f"{path}: cannot average per step: no Step Id column and repeats={repeats}")
    return StepAverages({name: total / divisor for name, total in sums.items()}, per_step)


def op_averages_from_kernel_details(path: Path, repeats: int) -> dict[str, float]:
    """Per-step average µs per op ``Name`` (see `kernel_details_by_step`), without the steps."""
    return kernel_details_by_step(path, repeats, keep_steps=False).averages


def op_averages_from_op_statistic(path: Path, repeats: int | None) -> dict[str, float]:
    """Per-step average µs per ``OP Type`` from op_statistic.

    ``repeats`` given (torch_npu fallback): Total ÷ repeats. ``repeats=None`` (msprof): Total ÷
    the GCD of the positive Counts when that GCD is > 1, else the file's own Avg Time(us).
    """
    rows, report = read_op_statistic(path)
    _raise_on(report)
    out: dict[str, float] = {}
    if repeats is not None:
        if repeats <= 0:
            raise ProfileDataError(f"{path}: repeats must be positive, got {repeats}")
        for row in rows:
            out[row.op_type] = out.get(row.op_type, 0.0) + row.total_us / repeats
        return out
    divisor = 0
    for row in rows:
        if row.count > 0:
            divisor = math.gcd(divisor, row.count)
    for row in rows:
        value = row.total_us / divisor if divisor > 1 else (row.avg_us if row.avg_us is not None else 0.0)
        out[row.op_type] = out.get(row.op_type, 0.0) + value
    return out


# ----------------------------------------------------------------------- timeline and host


def task_timeline(path: Path, target: str) -> tuple[dict[str, Any], CsvReadReport]:
    """Gaps between consecutive invocations of ``target`` in task_time (msprof only).

    A negative gap is an overlap. Rows named ``N/A`` are dropped. Only the target's start/stop
    pairs are kept (16 bytes each), not the rows.
    """
    report = CsvReadReport(Path(path))
    starts, stops = array("d"), array("d")
    for row in iter_rows(path, report, required=("kernel_name", "task_start(us)", "task_stop(us)")):
        if row["kernel_name"] in ("N/A", "") or row["kernel_name"] != target:
            continue
        start, stop = to_float(row["task_start(us)"]), to_float(row["task_stop(us)"])
        if start is not None and stop is not None:
            starts.append(start)
            stops.append(stop)
    order = sorted(range(len(starts)), key=starts.__getitem__)
    gaps = [starts[order[i]] - stops[order[i - 1]] for i in range(1, len(order))]
    positive = [g for g in gaps if g > 0]
    out: dict[str, Any] = {"matched_rows": len(order), "max_gap_us": round(max(gaps), 3) if gaps else None}
    if order:
        out["span_us"] = round(max(stops) - starts[order[0]], 3)
        out["total_gap_us"] = round(sum(positive), 3)
        out["overlap_count"] = sum(1 for g in gaps if g < 0)
    return out, report


@dataclass
class ApiStat:
    name: str
    time_us: float
    count: int | None
    avg_us: float | None
    level: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "time_us": self.time_us, "count": self.count, "avg_us": self.avg_us,
                "level": self.level}


LAUNCH_RE = re.compile(r"launch|memcpy|synchronize|binary|stream", re.IGNORECASE)


def read_api_statistic(path: Path) -> tuple[list[ApiStat], CsvReadReport]:
    """Host API rows sorted by total time (one row per API, so small)."""
    report = CsvReadReport(Path(path))
    out: list[ApiStat] = []
    for row in iter_rows(path, report, any_of=(("API Name", "Name"), ("Time(us)", "Duration(us)"))):
        name = row.get("API Name") or row.get("Name") or ""
        time_us = to_float(row.get("Time(us)") or row.get("Duration(us)"))
        if not name or time_us is None:
            continue
        count = to_float(row.get("Count"))
        out.append(ApiStat(name, time_us, int(count) if count is not None else None, to_float(row.get("Avg(us)")),
                           row.get("Level", "")))
    out.sort(key=lambda a: a.time_us, reverse=True)
    return out, report


_TID_RE = re.compile(rb'"tid"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)')


def count_tracks(path: Path) -> tuple[int | None, Problem | None]:
    """Distinct ``tid`` values in a Chrome-trace style JSON (list or {"traceEvents": …})."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_JSON_LOAD_BYTES:
            tids: set[bytes] = set()
            with open(path, "rb") as handle:
                tail = b""
                while chunk := handle.read(1 << 20):
                    buf = tail + chunk
                    tids.update(m.group(1) for m in _TID_RE.finditer(buf))
                    tail = buf[-256:]
            return len(tids), None
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, Problem(file=str(path), message="is missing")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, Problem(file=str(path), message=f"is not valid JSON (truncated or garbled: {exc}); "
                             "the timeline signals were skipped", severity="warning")
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        return None, Problem(file=str(path), message="holds no trace event list; the timeline signals were skipped",
                             severity="warning")
    return len({str(e.get("tid")) for e in events if isinstance(e, dict) and "tid" in e}), None
