"""Child-side event stream of a job: one JSON object a line in ``<job dir>/events.jsonl``.

Why a file and not a pipe: any helix process (a cockpit opened later over a new SSH
connection, an agent's ``helix jobs tail``) can follow a running job by tailing this file.
Every line carries ``"event"`` (case_started, case_finished, progress, log, result) and
``"ts"`` (Unix seconds). Each line is written with one O_APPEND write, so concurrent writers
never interleave mid-line.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from helix_engine.workspace.files import append_text

EVENTS_NAME = "events.jsonl"
JOB_DIR_ENV = "HELIX_JOB_DIR"
EVENT_KINDS: tuple[str, ...] = ("case_started", "case_finished", "progress", "log", "result")
#: A single log message longer than this is cut (a runaway message must not bloat the file).
MAX_LOG_CHARS = 8000


def _json_safe(value: Any) -> Any:
    """Replace NaN/Inf (not valid JSON) with None, recursively; other odd values become str."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


class EventWriter:
    """Appends events for one job. Build it with :meth:`from_env` inside a worker process."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def from_env(cls) -> EventWriter | None:
        """The writer for the job this process belongs to, or None outside a job."""
        job_dir = os.environ.get(JOB_DIR_ENV, "").strip()
        if not job_dir or not Path(job_dir).is_dir():
            return None
        return cls(Path(job_dir) / EVENTS_NAME)

    @classmethod
    def for_job_dir(cls, job_dir: Path) -> EventWriter:
        return cls(Path(job_dir) / EVENTS_NAME)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write one event line and return the object written."""
        obj: dict[str, Any] = {"event": event, "ts": round(time.time(), 6)}
        obj.update(_json_safe(fields))
        append_text(self.path, json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n")
        return obj

    def case_started(self, case_id: str, index: int, total: int) -> dict[str, Any]:
        return self.emit("case_started", case_id=str(case_id), index=int(index), total=int(total))

    def case_finished(self, case_id: str, record: dict[str, Any]) -> dict[str, Any]:
        return self.emit("case_finished", case_id=str(case_id), record=record)

    def progress(self, done: int, total: int) -> dict[str, Any]:
        return self.emit("progress", done=int(done), total=int(total))

    def log(self, msg: str) -> dict[str, Any]:
        text = str(msg)
        if len(text) > MAX_LOG_CHARS:
            text = text[:MAX_LOG_CHARS] + f"... [{len(text) - MAX_LOG_CHARS} characters cut]"
        return self.emit("log", msg=text)

    def result(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self.emit("result", payload=payload)
