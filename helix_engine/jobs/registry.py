"""The jobs registry: ``<ws>/.helix/jobs/<id>/`` holds job.json, events.jsonl and output.log.

Why files: a job started by an agent's CLI call is visible, live, to any cockpit or other
helix process reading the workspace. Reading never crashes on what it finds: a corrupt
job.json is skipped by ``list_jobs``, a malformed events line is skipped, a partial last
line is left for the next read. A job still marked queued/running whose supervisor and
child are both gone is reported as ``lost``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, ValidationError

from helix_engine.errors import HelixError
from helix_engine.jobs.events import EVENTS_NAME
from helix_engine.jobs.procs import pid_alive
from helix_engine.sanitize import clean
from helix_engine.workspace.files import atomic_write_json
from helix_engine.workspace.json_text import parse_json
from helix_engine.workspace.layout import HELIX_DIR, JOBS_DIR
from helix_engine.workspace.models import Problem
from helix_engine.workspace.reading import MAX_JSON_BYTES, open_workspace_file, read_text_safe

JobStatus = Literal["queued", "running", "passed", "failed", "timeout", "cancelled", "lost"]
JOB_STATUSES: tuple[str, ...] = ("queued", "running", "passed", "failed", "timeout", "cancelled", "lost")
ACTIVE_STATUSES: frozenset[str] = frozenset({"queued", "running"})
FINAL_STATUSES: frozenset[str] = frozenset({"passed", "failed", "timeout", "cancelled"})
JOB_NAME = "job.json"
OUTPUT_NAME = "output.log"
CANCEL_NAME = "cancel-requested"
#: Bytes read per ``read_events`` call at most (a huge file is read in pages).
MAX_EVENTS_CHUNK = 4 * 1024 * 1024
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def is_job_status(value: object) -> TypeGuard[JobStatus]:
    """Whether ``value`` (e.g. a status a cluster node reported) is one a job.json may hold."""
    return isinstance(value, str) and value in JOB_STATUSES


class JobInfo(BaseModel):
    """job.json. Extra keys survive a load → save (``pgid``, ``timeout_s``, start ticks...)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    id: str
    kind: str
    argv: list[str] = []
    round: str | None = None
    device: str | None = None
    backend: str | None = None
    pid: int | None = None
    supervisor_pid: int | None = None
    created_at: float
    started_at: float | None = None
    ended_at: float | None = None
    status: JobStatus = "queued"
    exit_code: int | None = None
    message: str | None = None
    #: the user's command line that made the job (``helix run-bench --operator-file …``);
    #: None in job.json files written before it was recorded, or for jobs not made by the CLI
    command: str | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def user_command(argv: list[str] | None = None) -> str | None:
    """The helix command line this process runs (``helix run-bench --operator-file …``), for
    job.json; None when the process is not the helix CLI (a test, an embedding program)."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return None
    prog = argv[0].replace(os.sep, "/")
    if Path(prog).name != "helix" and not prog.endswith(("helix_engine/__main__.py", "helix_tui/__main__.py")):
        return None
    return shlex.join(["helix", *argv[1:]])


def jobs_root(ws: Path) -> Path:
    return Path(ws) / HELIX_DIR / JOBS_DIR


def job_dir(ws: Path, job_id: str) -> Path:
    if not _ID_RE.match(job_id or ""):
        raise HelixError(f"{job_id!r} is not a job id; run `helix jobs list` to see the ids")
    return jobs_root(ws) / job_id


def new_job_id(kind: str) -> str:
    """Sortable, unique and readable: ``20261130-083212-bench-3f9a``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    safe_kind = re.sub(r"[^A-Za-z0-9]+", "-", kind).strip("-")[:24] or "job"
    return f"{stamp}-{safe_kind}-{secrets.token_hex(2)}"


def write_job(folder: Path, info: JobInfo) -> None:
    """Atomic write of job.json (a reader never sees a half-written file)."""
    atomic_write_json(Path(folder) / JOB_NAME, info.to_json())


class JobRecordError(ValueError):
    """A job.json that helix will not act on (its id is not the folder it lives in)."""


def _job_workspace(folder: Path) -> Path:
    """The workspace of a job folder ``W/.helix/jobs/<id>``: what its files' reads must stay inside."""
    folder = Path(os.path.abspath(folder))
    if folder.parent.name == JOBS_DIR and folder.parent.parent.name == HELIX_DIR:
        return folder.parents[2]
    return folder


def _read_job(folder: Path) -> JobInfo:
    """job.json of ``folder``; raises when it is damaged or names another id than its folder.

    Why the id check: every consumer builds paths from ``info.id`` (``jobs_root / id``); an id
    read from a crafted file (``"../../x"``, ``"/home"``) must never reach one.
    """
    text, problem = read_text_safe(Path(folder) / JOB_NAME, _job_workspace(folder), max_bytes=MAX_JSON_BYTES)
    if problem is None:
        data, problem = parse_json(text or "", JOB_NAME)
    if problem is not None:
        raise JobRecordError(problem.message)
    info = JobInfo.model_validate(data)
    if info.id != Path(folder).name or not _ID_RE.match(info.id):
        raise JobRecordError(
            f"job.json names the id {clean(info.id)!r}, not its folder {clean(Path(folder).name)!r}"
        )
    return info


def with_liveness(info: JobInfo, folder: Path | None = None) -> JobInfo:
    """Report a queued/running job whose supervisor and child are both gone as ``lost``."""
    if info.status not in ACTIVE_STATUSES:
        return info
    extra = info.model_extra or {}
    host = extra.get("host")
    if isinstance(host, str) and host and host != socket.gethostname():
        return info  # supervised on another machine (shared folder): its pids mean nothing here
    child = pid_alive(info.pid, extra.get("pid_start_ticks"))
    supervisor = pid_alive(info.supervisor_pid, extra.get("supervisor_start_ticks"))
    if child or supervisor:
        return info
    # Re-read: the supervisor may have written the final status just before exiting.
    if folder is not None:
        try:
            fresh = _read_job(folder)
            if fresh.status not in ACTIVE_STATUSES:
                return fresh
        except (OSError, ValueError, ValidationError):
            pass
    lost = info.model_copy(deep=True)
    lost.status = "lost"
    lost.message = (
        f"the job was {info.status} but its processes are gone without a final status "
        "(the supervising helix process was killed); run it again"
    )
    return lost


def load_job(ws: Path, job_id: str) -> JobInfo:
    """One job by id (or a unique id prefix), with lost detection. Raises HelixError."""
    folder = job_dir(ws, job_id)
    if not (folder / JOB_NAME).is_file():
        matches = [j for j in _job_folders(ws) if j.name.startswith(job_id)]
        if len(matches) == 1:
            folder = matches[0]
        elif len(matches) > 1:
            raise HelixError(
                f"{job_id!r} matches {len(matches)} jobs; give more of the id "
                "(`helix jobs list` shows them)"
            )
        else:
            raise HelixError(
                f"no job {job_id!r} in {jobs_root(ws)}; run `helix jobs list` to see the ids"
            )
    try:
        info = _read_job(folder)
    except (OSError, ValueError, ValidationError) as exc:
        why = str(exc) if isinstance(exc, JobRecordError) else f"is unreadable ({type(exc).__name__})"
        raise HelixError(
            f"{clean(folder / JOB_NAME)}: {why}; the job record is damaged, delete that folder"
        ) from None
    return with_liveness(info, folder)


def _trusted_root(ws: Path) -> Path | None:
    """``.helix/jobs`` when it is a real folder inside the workspace, else None.

    Why: a ``.helix`` or ``jobs`` that is a symlink would make "a child of the jobs folder"
    mean a folder anywhere on disk; helix then lists and deletes nothing there.
    """
    root = jobs_root(ws)
    try:
        if (Path(ws) / HELIX_DIR).is_symlink() or root.is_symlink() or not root.is_dir():
            return None
        real_ws = os.path.realpath(ws)
        if os.path.realpath(root) != os.path.join(real_ws, HELIX_DIR, JOBS_DIR):
            return None
    except OSError:
        return None
    return root


def _job_folders(ws: Path) -> list[Path]:
    """Direct, real (not symlinked) sub-folders of ``.helix/jobs`` named like a job id."""
    root = _trusted_root(ws)
    if root is None:
        return []
    try:
        with os.scandir(root) as entries:
            return [root / e.name for e in entries
                    if _ID_RE.match(e.name) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def scan_jobs(ws: Path) -> tuple[list[tuple[Path, JobInfo]], list[Problem]]:
    """Every readable job with the folder helix found it in (newest first), and a problem for
    each folder helix will not act on (damaged job.json, an id that is not its folder, a
    symlink where a job folder should be, a jobs folder linked elsewhere)."""
    root = jobs_root(ws)
    shown_root = f"{HELIX_DIR}/{JOBS_DIR}"
    problems: list[Problem] = []
    if _trusted_root(ws) is None:
        if os.path.lexists(root) or os.path.islink(Path(ws) / HELIX_DIR):
            problems.append(Problem(shown_root, "is not a real folder inside the workspace (a symbolic "
                                    "link or another kind of file); helix ignores it. Remove it and "
                                    "run the jobs again"))
        return [], problems
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            if entry.is_symlink():
                problems.append(Problem(f"{shown_root}/{clean(entry.name)}", "is a symbolic link, not a "
                                        "job folder; helix ignores it. Remove it"))
    found: list[tuple[Path, JobInfo]] = []
    for folder in _job_folders(ws):
        try:
            info = _read_job(folder)
        except (OSError, ValueError, ValidationError) as exc:
            why = str(exc) if isinstance(exc, JobRecordError) else f"is unreadable ({type(exc).__name__})"
            problems.append(Problem(f"{shown_root}/{folder.name}/{JOB_NAME}",
                                    f"{why}; helix ignores this job. Delete the folder {folder.name}"))
            continue
        found.append((folder, with_liveness(info, folder)))
    found.sort(key=lambda pair: (pair[1].created_at, pair[1].id), reverse=True)
    return found, problems


def list_jobs(ws: Path) -> list[JobInfo]:
    """Every readable job, newest first; damaged records are skipped, never raised."""
    return [info for _folder, info in scan_jobs(ws)[0]]


def read_events(job_dir: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Events appended since byte ``offset``, and the offset to pass next time.

    A partial last line (a writer mid-append) is not consumed: the returned offset stops
    before it. Malformed lines and lines without an ``event`` key are skipped. If the file
    shrank below ``offset`` (replaced), reading restarts at 0.
    """
    path = Path(job_dir) / EVENTS_NAME
    try:
        size = path.stat().st_size
    except OSError:
        return [], max(0, offset)
    if offset < 0 or offset > size:
        offset = 0
    try:  # the safe reader: events.jsonl may be a FIFO or a link out of the workspace
        with open_workspace_file(path, _job_workspace(job_dir)) as handle:
            handle.seek(offset)
            data = handle.read(MAX_EVENTS_CHUNK)
    except OSError:
        return [], offset
    end = data.rfind(b"\n")
    if end < 0:
        if len(data) >= MAX_EVENTS_CHUNK:  # one giant line: skip it rather than stall forever
            return [], offset + len(data)
        return [], offset
    events = [obj for obj in map(_event_of, data[: end + 1].splitlines()) if obj is not None]
    return events, offset + end + 1


def _event_of(raw: bytes) -> dict[str, Any] | None:
    """One events.jsonl line as an event, or None (blank, malformed, no ``event`` key)."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("event"), str) else None


def iter_events(job_dir: Path) -> Iterator[dict[str, Any]]:
    """Every complete event of the job's events.jsonl, however long the file: it is read page
    by page (``MAX_EVENTS_CHUNK`` bytes at most in memory), never whole."""
    offset = 0
    while True:
        events, after = read_events(job_dir, offset)
        yield from events
        if after <= offset:  # the end (or a partial last line, or the file was replaced)
            return
        offset = after


def last_event(job_dir: Path, name: str) -> dict[str, Any] | None:
    """The last complete ``name`` event of the job's events.jsonl (None: there is none), read
    from the end backwards page by page, so a result event after 10,000 cases is found at
    once and memory stays bounded (a line longer than a page is skipped, as ``read_events``
    skips it). A partial last line (a writer mid-append) does not count."""
    path = Path(job_dir) / EVENTS_NAME
    try:
        with open_workspace_file(path, _job_workspace(job_dir)) as handle:
            end = os.fstat(handle.fileno()).st_size
            carry, giant, tail = b"", False, True
            while end > 0:
                start = max(0, end - MAX_EVENTS_CHUNK)
                handle.seek(start)
                data = handle.read(end - start)
                if len(data) != end - start:  # the file shrank under us (replaced): no answer
                    return None
                end = start
                lines = data.split(b"\n")
                if giant:  # inside a line longer than a page: drop it, up to its start
                    lines[-1], giant = b"", len(lines) == 1
                else:  # the line the later page began inside continues there
                    lines[-1] += carry
                if tail:  # after the file's last newline: a partial line, not an event yet
                    lines[-1], tail = b"", False
                if len(lines[-1]) > MAX_EVENTS_CHUNK:  # over-long: skipped, as read_events skips it
                    lines[-1], giant = b"", len(lines) == 1 and start > 0
                carry = lines.pop(0) if start > 0 else b""  # it may begin in the page before
                for raw in reversed(lines):
                    obj = _event_of(raw)
                    if obj is not None and obj["event"] == name:
                        return obj
    except OSError:
        return None
    return None


def cancel_requested(folder: Path) -> bool:
    return (Path(folder) / CANCEL_NAME).exists()


def request_cancel(folder: Path) -> None:
    atomic_write_json(Path(folder) / CANCEL_NAME, {"pid": os.getpid(), "ts": time.time()})


@contextlib.contextmanager
def job_lock(folder: Path) -> Iterator[None]:
    """Serialize status writes to one job.json between its supervisor and a canceller."""
    fd = os.open(Path(folder) / ".job.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_job_file(folder: Path) -> JobInfo:
    """job.json of one folder, without lost detection (raises on a damaged file)."""
    return _read_job(folder)


def prune_jobs(ws: Path, keep: int = 100) -> list[str]:
    """Delete the folders of finished jobs beyond the ``keep`` newest; returns the ids removed.

    Why: every test/bench run leaves a folder (output.log may be tens of MB); a long
    optimization would otherwise fill the disk. Queued/running jobs are never removed, and
    neither are spawn logs of the kept period.
    """
    import shutil

    root = _trusted_root(ws)
    if root is None:
        return []
    real_root = os.path.realpath(root)
    removed: list[str] = []
    jobs, _problems = scan_jobs(ws)
    for folder, info in jobs[max(0, keep):]:
        if info.status in ACTIVE_STATUSES:
            continue
        # Only a folder helix listed itself: a real directory whose resolved parent is the
        # jobs folder (checked again now, in case it was swapped for a link since the scan).
        if folder.is_symlink() or os.path.dirname(os.path.realpath(folder)) != real_root:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    logs = sorted((p for p in root.glob("spawn-*.log") if p.parent == root), reverse=True)
    for old in logs[max(0, keep):]:
        with contextlib.suppress(OSError):
            old.unlink()
    return removed
