"""Constant-memory CSV reading for profiler outputs.

Profiler CSVs (``kernel_details.csv``, ``op_summary_*.csv``) grow with the number of kernel
launches: a long run writes millions of rows. Everything here walks the file once through the
``csv`` module and hands out one row at a time, so callers aggregate on the fly and memory
stays flat. Real CANN files put a TAB after timestamp cells and write ``N/A`` for counters that
do not apply; truncated or garbled files become `Problem`s, never exceptions.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helix_engine.workspace.models import Problem

#: Cells that mean "no value" in CANN outputs.
MISSING_CELLS: frozenset[str] = frozenset({"", "N/A", "NA", "n/a", "-", "None", "null", "nan", "NaN"})
#: A cell longer than this is garbage (the csv module would otherwise buffer it whole).
MAX_FIELD_CHARS = 1 << 20


@dataclass
class CsvReadReport:
    """What one streaming pass saw besides the rows: header, row counts, problems."""

    path: Path
    header: list[str] = field(default_factory=list)
    rows: int = 0
    skipped_rows: int = 0
    problems: list[Problem] = field(default_factory=list)

    def problem(self, message: str, line: int | None = None, severity: str = "error") -> None:
        self.problems.append(Problem(file=str(self.path), message=message, line=line, severity=severity))  # type: ignore[arg-type]


def clean_cell(cell: str) -> str:
    """Strip the TABs and spaces CANN leaves around cells (and a UTF-8 BOM)."""
    return cell.strip().lstrip("\ufeff").strip()


def to_float(cell: str | None) -> float | None:
    """Parse a numeric cell: ``N/A``/empty/garbage → None, never an exception."""
    if cell is None:
        return None
    text = cell.strip()
    if text in MISSING_CELLS:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def iter_rows(
    path: Path, report: CsvReadReport, *, required: Sequence[str] = (), any_of: Sequence[Sequence[str]] = ()
) -> Iterator[dict[str, str]]:
    """Yield each data row of ``path`` as ``{column: cleaned cell}``, one at a time (see `iter_cells`)."""
    for cells in iter_cells(path, report, required=required, any_of=any_of):
        yield {name: clean_cell(cell) for name, cell in zip(report.header, cells)}


def iter_cells(
    path: Path, report: CsvReadReport, *, required: Sequence[str] = (), any_of: Sequence[Sequence[str]] = ()
) -> Iterator[list[str]]:
    """Yield each data row of ``path`` as its raw cell list (at least as long as the header).

    The fast path for hot loops: look columns up once with ``report.header.index`` after the
    first row, and `clean_cell`/`to_float` only the cells you use.

    ``required`` columns must all be present; each group in ``any_of`` needs at least one.
    A missing file, a missing column, a NUL byte, an undecodable or oversized field, or a
    short (truncated) row is recorded in ``report`` with its line number; short rows are
    skipped, unreadable files stop the pass. Rows longer than the header keep the known
    columns (CANN never does this; a hand-edited file might).
    """
    path = Path(path)
    csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        handle = open(path, encoding="utf-8", errors="strict", newline="")  # noqa: SIM115
    except FileNotFoundError:
        report.problem("is missing")
        return
    except OSError as exc:
        report.problem(f"cannot be read ({exc.strerror or exc})")
        return
    with handle:
        reader = csv.reader(handle)
        try:
            header_cells = next(reader, None)
            if header_cells is None:
                report.problem("is empty (no header line); re-run the profiler to regenerate it")
                return
            report.header = [clean_cell(c) for c in header_cells]
            columns = set(report.header)
            missing = [c for c in required if c not in columns]
            for group in any_of:
                if not any(c in columns for c in group):
                    missing.append(" or ".join(group))
            if missing:
                report.problem(
                    f"lacks the column(s) {', '.join(missing)}; it is not the profiler file helix "
                    "expected (or it is damaged): re-run the profiler",
                    line=1,
                )
                return
            width = len(report.header)
            for cells in reader:
                line = reader.line_num
                if not cells:
                    continue
                if len(cells) < width:
                    report.skipped_rows += 1
                    if report.skipped_rows <= 3:
                        report.problem(
                            f"row has {len(cells)} of {width} cells (truncated file?); the row was skipped",
                            line=line,
                            severity="warning",
                        )
                    continue
                report.rows += 1
                yield cells
        except csv.Error as exc:
            report.problem(f"is not a readable CSV file ({exc}); re-run the profiler", line=reader.line_num)
        except UnicodeDecodeError:
            report.problem("is not UTF-8 text (binary or garbled); re-run the profiler", line=reader.line_num + 1)
    if report.skipped_rows > 3:
        report.problem(f"{report.skipped_rows} short rows were skipped in total", severity="warning")


def first_present(header: Sequence[str], names: Sequence[str]) -> str | None:
    """The first of ``names`` that is a column of ``header`` (upstream's column fallbacks)."""
    present = set(header)
    for name in names:
        if name in present:
            return name
    return None
