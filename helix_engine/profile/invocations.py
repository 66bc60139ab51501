"""The per-invocation profiler file (torch_npu ``kernel_details.csv``, msprof ``op_summary_*.csv``):
one row per kernel launch, so millions of rows. Two passes are built on it, each a single read
through `csvstream` (polars, a bounded chunk at a time):

- `summarize_invocations` (profile-report): every op's count and total, the distinct Step Ids,
  and the target's invocations in detail (durations, pipeline ratios, cube utilization, waits,
  block dims);
- `kernel_details_by_step` (run-bench): per-step average µs per op and each step's own sums.

Groups are formed on the raw cells and their keys cleaned afterwards (cleaning every row would
cost a pass over the column); orders are first-seen in the file, as a row-by-row reader's are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix_engine.profile.csvstream import (
    ROW,
    CsvReadReport,
    ProfileDataError,
    aggregate_chunks,
    first_present,
    number,
    raise_on,
    text,
)

if TYPE_CHECKING:
    import polars as pl

MODE_TORCH = "torch-npu-profiler"
MODE_MSPROF = "msprof"
#: Pipeline busy fractions (0–1 in real files) and the one percentage column.
RATIO_COLUMNS: tuple[str, ...] = (
    "aic_mac_ratio", "aic_scalar_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_mte3_ratio",
    "aiv_vec_ratio", "aiv_scalar_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio",
)
CUBE_UTIL_COLUMN = "cube_utilization(%)"
MAX_BLOCK_DIMS = 32


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

    def merge(self, count: int, total: float | None, low: float | None, high: float | None) -> None:
        """Fold in another stream's count / total / min / max (one chunk's aggregate)."""
        if not count:
            return
        self.count += count
        self.total += total or 0.0
        self.min = min(self.min, low if low is not None else math.inf)
        self.max = max(self.max, high if high is not None else -math.inf)

    @property
    def avg(self) -> float | None:
        return self.total / self.count if self.count else None

    def to_json(self, digits: int = 6) -> dict[str, Any]:
        if not self.count:
            return {"count": 0, "total": 0.0, "avg": None, "min": None, "max": None}
        return {"count": self.count, "total": round(self.total, digits), "avg": round(self.total / self.count, digits),
                "min": round(self.min, digits), "max": round(self.max, digits)}


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


DURATION_COLUMNS = ("Task Duration(us)", "Duration(us)")
WAIT_COLUMNS = ("Task Wait Time(us)", "Wait Time(us)")
_D = "__duration"  # the parsed duration column


def _stat_of(expr: pl.Expr, name: str) -> list[pl.Expr]:
    """count / sum / min / max of the non-null values of ``expr``: one chunk's `RunningStat`."""
    return [expr.count().alias(f"{name}.n"), expr.sum().alias(f"{name}.sum"), expr.min().alias(f"{name}.min"),
            expr.max().alias(f"{name}.max")]


def summarize_invocations(path: Path, mode: str, target: str | None, *,
                          root: Path | None = None) -> InvocationSummary:
    """One pass over the per-invocation file: every op's count and total, the distinct Step Ids,
    and the target's invocations in detail. N/A pipeline cells count as 0 (upstream); absent
    columns (aic_mte3 in older CANN) are simply not in ``ratios``."""
    import polars as pl

    summary = InvocationSummary(path=Path(path), target=target)
    report = summary.report = CsvReadReport(Path(path))
    names = _name_columns(mode)
    wanted = (*names, *DURATION_COLUMNS, *WAIT_COLUMNS, *RATIO_COLUMNS, CUBE_UTIL_COLUMN, "Step Id", "Block Dim")

    def queries(rows: pl.LazyFrame) -> list[pl.LazyFrame]:
        header = report.header
        name_col = first_present(header, names) or ""
        frame = rows.with_columns(pl.col(first_present(header, DURATION_COLUMNS) or "").alias(_D))  # a number
        out = [frame.group_by(name_col).agg(pl.col(ROW).min(), *_stat_of(pl.col(_D), _D))]  # raw names
        if "Step Id" in header:
            out.append(frame.select(pl.col("Step Id").unique()))
        if target is not None:
            hits = frame.filter((text(name_col) == target) & (pl.col(_D) > 0))
            out.append(_target_stats(hits, header))
            if "Block Dim" in header:
                out.append(hits.select(number("Block Dim").drop_nulls().cast(pl.Int64, strict=False)
                                       .drop_nulls().unique(maintain_order=True)))
        return out

    parts: list[pl.DataFrame] = []
    for per_name, *rest in aggregate_chunks(path, report, wanted, queries, root=root,
                                            any_of=(names, DURATION_COLUMNS), numbers=DURATION_COLUMNS):
        header = report.header
        if summary.name_column is None:  # the first rows: name the columns as the old stream did
            summary.name_column = first_present(header, names)
            summary.ratios = {c: RunningStat() for c in RATIO_COLUMNS if c in header}
        parts.append(per_name)
        if "Step Id" in header:
            steps = rest.pop(0).select(text("Step Id")).to_series()
            summary.step_ids.update(steps.filter(steps != "").to_list())
        if target is not None:
            row = rest.pop(0).row(0, named=True)
            stats = {"duration": summary.durations, CUBE_UTIL_COLUMN: summary.cube_util, "wait": summary.wait,
                     **summary.ratios}
            for name, stat in stats.items():
                if f"{name}.n" in row:
                    stat.merge(row[f"{name}.n"], row[f"{name}.sum"], row[f"{name}.min"], row[f"{name}.max"])
            for dim in rest.pop(0).to_series().to_list() if "Block Dim" in header else []:
                if dim not in summary.block_dims and len(summary.block_dims) < MAX_BLOCK_DIMS:
                    summary.block_dims.append(dim)
    if parts and summary.name_column is not None:  # set with the first rows (any_of: a name column)
        merged = (pl.concat(parts).with_columns(text(summary.name_column)).group_by(summary.name_column)
                  .agg(pl.col(ROW).min(), pl.col(f"{_D}.n").sum(), pl.col(f"{_D}.sum").sum(),
                       pl.col(f"{_D}.min").min(), pl.col(f"{_D}.max").max())
                  .sort(ROW).drop(ROW))
        for name, count, total, low, high in merged.iter_rows():
            summary.per_name[name] = stat = RunningStat()
            stat.merge(count, total, low, high)
    return summary


def _target_stats(hits: pl.LazyFrame, header: Sequence[str]) -> pl.LazyFrame:
    """The aggregates of the target's invocations: duration, each pipeline ratio (N/A → 0), cube
    utilization (N/A → 0) and the waits > 0, each as ``<name>.n/.sum/.min/.max`` (each cell read
    once, then aggregated four times)."""
    import polars as pl

    values = [pl.col(_D).alias("duration")]
    values += [number(col).fill_null(0.0).alias(col) for col in (*RATIO_COLUMNS, CUBE_UTIL_COLUMN) if col in header]
    wait_col = first_present(header, WAIT_COLUMNS)
    if wait_col is not None:
        values.append(number(wait_col).alias("wait"))
    exprs = [stat for value in values if (name := value.meta.output_name()) != "wait"
             for stat in _stat_of(pl.col(name), name)]
    if wait_col is not None:
        exprs += _stat_of(pl.col("wait").filter(pl.col("wait") > 0), "wait")
    return hits.select(values).select(exprs)


@dataclass
class StepAverages:
    """Per-op averages from kernel_details and, when asked, each step's own per-op sums."""

    #: op ``Name`` → per-step average µs, in first-seen order
    averages: dict[str, float]
    #: Step Id → op name → summed µs; empty when the file has no Step Id values or not asked
    steps: dict[str, dict[str, float]] = field(default_factory=dict)


def kernel_details_by_step(path: Path, repeats: int, *, keep_steps: bool = True,
                           root: Path | None = None) -> StepAverages:
    """One pass over kernel_details: per-step average µs per op ``Name`` = Σ Duration ÷ distinct
    ``Step Id`` (÷ ``repeats`` when the column is absent or empty); with ``keep_steps`` also each
    step's per-op sums (run-bench's per-iteration samples). Rows without a name are skipped.
    Raises ProfileDataError when the file is missing or unreadable."""
    import polars as pl

    report = CsvReadReport(Path(path))
    sums: list[pl.DataFrame] = []
    steps: list[pl.DataFrame] = []
    pairs: list[pl.DataFrame] = []
    def queries(rows: pl.LazyFrame) -> list[pl.LazyFrame]:  # grouped by the raw cells; cleaned in _first_seen
        frame = rows.rename({"Duration(us)": _D})  # already a number (see `numbers` below)
        valid = frame.filter(pl.col(_D).is_not_null())
        out = [valid.group_by("Name").agg(pl.col(ROW).min(), pl.col(_D).sum())]
        if "Step Id" in report.header:
            out.append(frame.select(pl.col("Step Id").unique(maintain_order=True)))  # in first-seen order
            if keep_steps:
                out.append(valid.group_by("Step Id", "Name").agg(pl.col(ROW).min(), pl.col(_D).sum()))
        return out

    for found in aggregate_chunks(path, report, ("Name", "Duration(us)", "Step Id"), queries, root=root,
                                  required=("Name", "Duration(us)"), numbers=("Duration(us)",)):
        for part, into in zip(found, (sums, steps, pairs)):
            into.append(part)
    raise_on(report)
    step_ids: list[str] = []
    if steps:  # each chunk's distinct raw cells in first-seen order: cleaned, then distinct again
        cleaned = pl.concat(steps).select(text("Step Id")).to_series().unique(maintain_order=True)
        step_ids = cleaned.filter(cleaned != "").to_list()
    divisor = len(step_ids) or repeats
    if divisor <= 0:
        raise ProfileDataError(f"{path}: cannot average per step: no Step Id column and repeats={repeats}")
    averages = {name: total / divisor for name, total in _first_seen(sums, ["Name"], _D).iter_rows()}
    per_step: dict[str, dict[str, float]] = {step: {} for step in step_ids} if keep_steps else {}
    for step, name, total in _first_seen(pairs, ["Step Id", "Name"], _D).iter_rows():
        per_step[step][name] = total
    return StepAverages(averages, per_step)


def _first_seen(parts: list[pl.DataFrame], keys: list[str], total: str | None = None) -> pl.DataFrame:
    """Chunks' partial groups of raw cells folded into one row per cleaned, non-empty key
    (``total`` summed), in the order the keys first appear in the file."""
    import polars as pl

    if not parts:
        return pl.DataFrame(schema={k: pl.String for k in keys} | ({total: pl.Float64} if total else {}))
    sums = [pl.col(total).sum()] if total else []
    frame = pl.concat(parts).with_columns(text(k) for k in keys).filter(pl.all_horizontal(pl.col(k) != "" for k in keys))
    return frame.group_by(keys).agg(pl.col(ROW).min(), *sums).sort(ROW).drop(ROW)


def op_averages_from_kernel_details(path: Path, repeats: int, *, root: Path | None = None) -> dict[str, float]:
    """Per-step average µs per op ``Name`` (see `kernel_details_by_step`), without the steps."""
    return kernel_details_by_step(path, repeats, keep_steps=False, root=root).averages
