"""Small readers for the Ascend profiler CSVs a bench needs (kernel_details, op_statistic).

Pure Python (csv module): they run in the worker after torch_npu.profiler or msprof wrote
their files, and in tests on recorded CSVs. Rules follow spec/upstream-eval.md §3.
"""

from __future__ import annotations

import csv
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path


@dataclass
class OpView:
    """Per-op average device time (µs) in first-seen order, plus per-step rows when known."""

    op_avgs: OrderedDict[str, float] = field(default_factory=OrderedDict)
    #: step id → op name → summed duration (µs); empty when the source has no step column
    steps: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.op_avgs.values())


def _float(value: str | None) -> float | None:
    try:
        out = float((value or "").strip())
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def _rows(path: Path) -> list[dict[str, str]]:
    with Path(path).open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        return [{(k or "").strip(): (v or "") for k, v in row.items()} for row in csv.DictReader(handle)]


def read_kernel_details(path: Path, repeats: int) -> OpView:
    """``kernel_details.csv``: per-op average = sum of ``Duration(us)`` ÷ distinct ``Step Id``
    (÷ ``repeats`` when the column is absent)."""
    view = OpView()
    totals: OrderedDict[str, float] = OrderedDict()
    step_ids: set[str] = set()
    has_step = False
    for row in _rows(path):
        name = row.get("Name", "").strip()
        dur = _float(row.get("Duration(us)"))
        if not name or dur is None:
            continue
        totals[name] = totals.get(name, 0.0) + dur
        step = row.get("Step Id")
        if step is not None and step.strip() != "":
            has_step = True
            sid = step.strip()
            step_ids.add(sid)
            per = view.steps.setdefault(sid, {})
            per[name] = per.get(name, 0.0) + dur
    divisor = len(step_ids) if has_step and step_ids else max(1, repeats)
    view.op_avgs = OrderedDict((k, v / divisor) for k, v in totals.items())
    return view


def read_op_statistic(path: Path, repeats: int, *, msprof: bool = False) -> OpView:
    """``op_statistic*.csv``. torch-npu fallback: avg = Total ÷ repeats. msprof: avg = Total ÷
    gcd(Count) when that gcd is >1, else the native ``Avg Time(us)``."""
    rows = _rows(path)
    parsed: list[tuple[str, float | None, float | None, int]] = []
    for row in rows:
        name = row.get("OP Type", "").strip()
        if not name:
            continue
        count = _float(row.get("Count"))
        parsed.append((name, _float(row.get("Avg Time(us)")), _float(row.get("Total Time(us)")),
                       int(count) if count else 0))
    view = OpView()
    divisor = 0
    if msprof:
        counts = [c for *_, c in parsed if c > 0]
        divisor = reduce(math.gcd, counts) if counts else 0
    for name, avg, total, _count in parsed:
        if msprof:
            value = total / divisor if divisor > 1 and total is not None else avg
        else:
            value = total / max(1, repeats) if total is not None else avg
        if value is not None:
            view.op_avgs[name] = view.op_avgs.get(name, 0.0) + value
    return view


def newest(folder: Path, pattern: str) -> Path | None:
    found = [p for p in Path(folder).rglob(pattern) if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None
