"""Read and write ``*_perf.txt`` perf artifacts (JSONL, one record per bench case).

Reading never raises: every way a file or a line can be bad becomes a Problem with the file
and the line, and the good lines still load. Writing keeps the upstream keys in upstream
order with compact separators (so upstream tools read our files), then helix's own keys,
then any unknown keys a record arrived with (they survive read → write).

Each record read from a file remembers where it came from (``record_source``), so the
comparison can name ``file:line`` in its messages the way upstream does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helix_engine.sanitize import clean_name
from helix_engine.workspace import json_text
from helix_engine.workspace.filemodel import ValidationError
from helix_engine.workspace.files import MAX_TEXT_BYTES, atomic_write_text
from helix_engine.workspace.json_text import DuplicateKey
from helix_engine.workspace.models import PerfRecord, Problem

#: Attribute (outside the model's fields, so never serialized) holding (file, line).
_SOURCE_ATTR = "_helix_source"


def record_source(record: PerfRecord) -> tuple[str, int] | None:
    """``(file, line)`` a record was read from, or None for records built in memory."""
    source = getattr(record, _SOURCE_ATTR, None)
    return source if isinstance(source, tuple) else None


def set_record_source(record: PerfRecord, file: str, line: int) -> None:
    """Remember where ``record`` came from (kept out of the serialized fields)."""
    object.__setattr__(record, _SOURCE_ATTR, (file, line))


def parse_perf_text(text: str, file: str) -> tuple[list[PerfRecord], list[Problem]]:
    """Parse perf JSONL text; bad lines become Problems (with the line) and are skipped."""
    records: list[PerfRecord] = []
    problems: list[Problem] = []
    first_line: dict[str, int] = {}
    saw_content = False
    for line_no, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            continue
        saw_content = True
        record, problem = _parse_line(stripped, file, line_no)
        if problem is not None:
            problems.append(problem)
            continue
        assert record is not None
        label = record.case_label
        if label in first_line:
            problems.append(
                Problem(
                    file=file,
                    line=line_no,
                    message=f"duplicates case label {label!r} (first on line {first_line[label]}); "
                    "give every bench case a unique label",
                )
            )
        else:
            first_line[label] = line_no
        set_record_source(record, file, line_no)
        records.append(record)
    if not saw_content:
        problems.append(
            Problem(file=file, message="is empty; run the bench again to produce perf records")
        )
    return records, problems


def _parse_line(line: str, file: str, line_no: int) -> tuple[PerfRecord | None, Problem | None]:
    try:
        data = json_text.loads(line)
    except DuplicateKey as exc:
        return None, Problem(file=file, line=line_no, message=f"has the key {clean_name(exc.key)!r} twice; JSON "
                             "readers disagree on which value counts, so keep one (or re-run the bench)")
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        return None, Problem(
            file=file,
            line=line_no,
            message=f"has invalid JSON ({detail}); each line must be one JSON perf record",
        )
    if not isinstance(data, dict):
        return None, Problem(
            file=file,
            line=line_no,
            message=f"is a JSON {type(data).__name__}, not an object; each line must be one "
            "JSON perf record",
        )
    if "case_label" not in data or data["case_label"] in (None, ""):
        return None, Problem(
            file=file, line=line_no, message="has no case_label; every perf record needs one"
        )
    try:
        return PerfRecord.model_validate(data), None
    except ValidationError as exc:
        return None, Problem(file=file, line=line_no, message=_describe(exc))
    except (ValueError, TypeError, RecursionError) as exc:  # defensive: odd nested values
        return None, Problem(file=file, line=line_no, message=f"is not a valid perf record ({exc})")


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "record"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    more = "" if exc.error_count() <= 3 else f" (+{exc.error_count() - 3} more)"
    return "has wrongly typed fields (" + "; ".join(parts) + more + "); fix or re-run the bench"


def read_perf(
    path: Path, workspace: Path | None = None, *, max_bytes: int = MAX_TEXT_BYTES
) -> tuple[list[PerfRecord], list[Problem]]:
    """Read a perf file. Never raises: unreadable files and bad lines become Problems.

    Read through the safe reader: a FIFO, device or folder is a Problem, not a hang. With
    ``workspace`` given, a final symlink or a file outside it is a Problem and is not read;
    problem files are then shown relative to the workspace.
    """
    from helix_engine.workspace.reading import read_text_safe, shown

    text, problem = read_text_safe(Path(path), workspace, max_bytes=max_bytes)
    if problem is not None:
        return [], [problem]
    assert text is not None
    return parse_perf_text(text, shown(Path(path), workspace))


def dump_record(record: PerfRecord) -> str:
    """One JSONL line: upstream keys in upstream order, then ours, then unknown keys."""
    return json.dumps(record.to_json(), separators=(",", ":"), ensure_ascii=False)


def render_perf(records: list[PerfRecord]) -> str:
    return "".join(dump_record(r) + "\n" for r in records)


def write_perf(path: Path, records: list[PerfRecord]) -> None:
    """Atomically write ``records`` as compact JSONL (the upstream perf format)."""
    atomic_write_text(Path(path), render_perf(records))


def record_from_json(data: dict[str, Any]) -> PerfRecord:
    """Build a record from a dict (raises filemodel.ValidationError, a ValueError, on bad input)."""
    return PerfRecord.model_validate(data)
