"""Ascend profiler outputs: find the files of either layout and aggregate them in one pass.

Two layouts exist (spec upstream-profile-ir §A):
- torch_npu: ``…_ascend_pt/ASCEND_PROFILER_OUTPUT/{op_statistic,kernel_details,api_statistic}.csv``
  + ``trace_view.json`` (torch_npu *also* writes ``PROF_*/mindstudio_profiler_output``; when both
  exist the torch_npu files win);
- msprof: ``PROF_*/mindstudio_profiler_output/{op_statistic,op_summary,task_time,api_statistic}_<ts>.csv``
  + ``msprof_<ts>.json``.
Only ``op_statistic`` is required. Every CSV is read through polars a bounded chunk at a time
from the safe reader's descriptor (see `csvstream`); ``root`` is the folder a file must stay in
(default: its workspace, `owning_workspace`).
polars is imported inside the functions, so ``helix status`` and ``--help`` never pay for it.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix_engine.profile.csvstream import (
    ROW,
    CsvReadReport,
    ProfileDataError,
    aggregate_chunks,
    number,
    raise_on,
    read_table,
    text,
)
from helix_engine.profile.invocations import (  # noqa: F401 - the profile API, one import away
    CUBE_UTIL_COLUMN,
    MAX_BLOCK_DIMS,
    MODE_MSPROF,
    MODE_TORCH,
    RATIO_COLUMNS,
    InvocationSummary,
    RunningStat,
    StepAverages,
    kernel_details_by_step,
    op_averages_from_kernel_details,
    summarize_invocations,
)
from helix_engine.workspace.problem import Problem
from helix_engine.workspace.reading import (
    UnreadableFile,
    open_workspace_file,
    owning_workspace,
)

if TYPE_CHECKING:
    import polars as pl

TORCH_DIR = "ASCEND_PROFILER_OUTPUT"
MSPROF_DIR = "mindstudio_profiler_output"

OP_STAT_REQUIRED = ("OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                    "Max Time(us)", "Ratio(%)")
#: trace JSON files above this are scanned for tids with a regex instead of json.load.
MAX_JSON_LOAD_BYTES = 256 * 1024 * 1024


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


def _entry_mtime(path: Path) -> float | None:
    """The entry's own mtime (a link is not followed), None for a folder or nothing. Why: a
    FIFO or a link where a profiler file should be is picked, so the safe reader can say what
    is wrong with it, instead of the file looking absent."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    return None if stat.S_ISDIR(st.st_mode) else st.st_mtime


def _newest(paths: list[Path]) -> Path | None:
    stamped = [(mtime, p.name, p) for p in paths if (mtime := _entry_mtime(p)) is not None]
    return max(stamped, key=lambda t: (t[0], t[1]))[2] if stamped else None


def newest_file(folder: Path, pattern: str) -> Path | None:
    """Newest-mtime file matching ``pattern`` anywhere under ``folder`` (a bench's profiler dir)."""
    return _newest(list(Path(folder).rglob(pattern)))


def pick_csv(folder: Path, prefix: str) -> Path | None:
    """Newest-mtime ``<prefix>_*.csv``, else ``<prefix>.csv`` (upstream's rule)."""
    stamped = _newest(list(folder.glob(f"{prefix}_*.csv")))
    if stamped is not None:
        return stamped
    plain = folder / f"{prefix}.csv"
    return plain if _entry_mtime(plain) is not None else None


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
            timeline_json=trace if _entry_mtime(trace) is not None else None,
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


def read_op_statistic(path: Path, *, root: Path | None = None) -> tuple[list[OpStat], CsvReadReport]:
    """All rows (one per op type, so small), sorted by Total Time desc."""
    import polars as pl

    report = CsvReadReport(Path(path))
    frame = read_table(path, report, OP_STAT_REQUIRED, root=root, required=OP_STAT_REQUIRED)
    if frame is None:
        return [], report
    rows: list[OpStat] = []
    table = frame.select(pl.col(ROW), pl.col("OP Type"), pl.col("Core Type"),
                         *(number(c).alias(c) for c in OP_STAT_REQUIRED[2:]))
    for row, op_type, core_type, count, total, low, avg, high, ratio in table.iter_rows():
        if total is None or count is None or not op_type:
            report.problem("row has no OP Type, Count or Total Time; it was skipped", line=row + 2, severity="warning")
            continue
        rows.append(OpStat(op_type, core_type, int(count), total, low, avg, high, ratio))
    rows.sort(key=lambda r: r.total_us, reverse=True)
    return rows, report


# ------------------------------------------------------------ kernel vs total-op (run-bench)


def op_averages_from_op_statistic(path: Path, repeats: int | None, *,
                                  root: Path | None = None) -> dict[str, float]:
    """Per-step average µs per ``OP Type`` from op_statistic.

    ``repeats`` given (torch_npu fallback): Total ÷ repeats. ``repeats=None`` (msprof): Total ÷
    the GCD of the positive Counts when that GCD is > 1, else the file's own Avg Time(us).
    """
    rows, report = read_op_statistic(path, root=root)
    raise_on(report)
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


def task_timeline(path: Path, target: str, *, root: Path | None = None) -> tuple[dict[str, Any], CsvReadReport]:
    """Gaps between consecutive invocations of ``target`` in task_time (msprof only).

    A negative gap is an overlap. Rows named ``N/A`` are dropped. Only the target's start/stop
    pairs are kept (16 bytes each), not the rows.
    """
    import polars as pl

    report = CsvReadReport(Path(path))
    starts, stops = array("d"), array("d")
    columns = ("kernel_name", "task_start(us)", "task_stop(us)")

    named = target not in ("N/A", "")  # rows named N/A (or nothing) never match

    def queries(rows: pl.LazyFrame) -> list[pl.LazyFrame]:
        return [rows.filter(pl.lit(named) & (text("kernel_name") == target))
                .select(number("task_start(us)").alias("start"), number("task_stop(us)").alias("stop")).drop_nulls()]

    for (hits,) in aggregate_chunks(path, report, columns, queries, root=root, required=columns):
        starts.extend(hits.get_column("start").to_list())
        stops.extend(hits.get_column("stop").to_list())
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


def read_api_statistic(path: Path, *, root: Path | None = None) -> tuple[list[ApiStat], CsvReadReport]:
    """Host API rows sorted by total time (one row per API, so small)."""
    import polars as pl

    report = CsvReadReport(Path(path))
    columns = ("API Name", "Name", "Time(us)", "Duration(us)", "Count", "Avg(us)", "Level")
    frame = read_table(path, report, columns, root=root, any_of=(("API Name", "Name"), ("Time(us)", "Duration(us)")))
    if frame is None:
        return [], report

    def cell(name: str) -> pl.Expr:
        return pl.col(name) if name in frame.columns else pl.lit("")

    def either(first: str, second: str) -> pl.Expr:  # upstream: the second column when the first cell is empty
        return pl.when(cell(first) != "").then(cell(first)).otherwise(cell(second))

    table = frame.select(either("API Name", "Name").alias("name"), either("Time(us)", "Duration(us)").alias("time"),
                         cell("Count").alias("count"), cell("Avg(us)").alias("avg"), cell("Level").alias("level"))
    table = table.with_columns(number("time").alias("time"), number("count").alias("count"), number("avg").alias("avg"))
    out = [ApiStat(name, time_us, int(count) if count is not None else None, avg, level)
           for name, time_us, count, avg, level in table.iter_rows() if name and time_us is not None]
    out.sort(key=lambda a: a.time_us, reverse=True)
    return out, report


_TID_RE = re.compile(rb'"tid"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)')


def count_tracks(path: Path, *, root: Path | None = None) -> tuple[int | None, Problem | None]:
    """Distinct ``tid`` values in a Chrome-trace style JSON (list or {"traceEvents": …}), read
    through the safe reader (``root``: the folder it must stay in; default its workspace)."""
    path = Path(path)
    try:
        with open_workspace_file(path, owning_workspace(path) if root is None else root) as handle:
            if os.fstat(handle.fileno()).st_size > MAX_JSON_LOAD_BYTES:
                tids: set[bytes] = set()
                tail = b""
                while chunk := handle.read(1 << 20):
                    buf = tail + chunk
                    tids.update(m.group(1) for m in _TID_RE.finditer(buf))
                    tail = buf[-256:]
                return len(tids), None
            data = json.loads(handle.read().decode("utf-8"))
    except UnreadableFile as exc:
        return None, Problem(str(path), exc.problem.message, severity="warning")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, Problem(file=str(path), message=f"is not valid JSON (truncated or garbled: {exc}); "
                             "the timeline signals were skipped", severity="warning")
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        return None, Problem(file=str(path), message="holds no trace event list; the timeline signals were skipped",
                             severity="warning")
    return len({str(e.get("tid")) for e in events if isinstance(e, dict) and "tid" in e}), None
