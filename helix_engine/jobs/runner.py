"""Run one job: a child command in its own process group, supervised to the end.

Why so careful: operator code may crash, hang, leak memory or ignore SIGTERM; none of that
may hang or crash helix, and no child may outlive its job. The supervisor (the process that
calls ``run_job``) leases a device, spawns the child with ``start_new_session`` (and, on
Linux, a parent-death signal), tees its output to output.log, enforces the time and memory
limits, honours cancel requests, and always writes a final status to job.json.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.jobs import procs
from helix_engine.jobs.child import LOG_CAP_ENV, STUCK, Tee, pdeathsig_setup, reap, signal_text, stop_text
from helix_engine.jobs.devices import lease_device
from helix_engine.jobs.events import EVENTS_NAME, JOB_DIR_ENV
from helix_engine.jobs.registry import (
    ACTIVE_STATUSES, OUTPUT_NAME, JobInfo, cancel_requested, job_dir, job_lock, load_job,
    new_job_id, read_events, read_job_file, request_cancel, write_job,
)

TIMEOUT_ENV = "HELIX_EVAL_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_S = 300.0
RSS_ENV = "HELIX_JOB_MAX_RSS_MB"
DEFAULT_LOG_CAP_MB = 64
_POLL_S = 0.05
_MEM_EVERY_S = 0.1
_REPO_ROOT = str(Path(__file__).resolve().parents[2])


class JobInterrupted(BaseException):
    """Raised in the supervisor's main thread on SIGTERM/SIGHUP so the child group dies too."""


def resolve_timeout(timeout_s: float | None) -> tuple[float, str]:
    """The time limit and a phrase naming where it came from (for the timeout message)."""
    if timeout_s is not None:
        if timeout_s <= 0:
            raise HelixError(f"the timeout must be a positive number of seconds, not {timeout_s}")
        return float(timeout_s), f"set by the caller; {TIMEOUT_ENV} sets the default"
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S, f"the {TIMEOUT_ENV} default, {DEFAULT_TIMEOUT_S:g} s"
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise HelixError(f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds; set it like 600")
    return value, f"{TIMEOUT_ENV}={raw}"


def resolve_rss_limit(max_rss_mb: float | None) -> tuple[int | None, str]:
    """Memory limit in bytes (None: off) and where it came from."""
    if max_rss_mb is None:
        raw = os.environ.get(RSS_ENV, "").strip()
        if raw:
            try:
                max_rss_mb = float(raw)
            except ValueError:
                raise HelixError(f"{RSS_ENV}={raw!r} is not a number of megabytes; set it like 8000") from None
            source = f"{RSS_ENV}={raw}"
        else:
            total = procs.physical_memory_bytes()
            if total is None:
                return None, "no limit"
            return int(total * 0.75), f"the {RSS_ENV} default, 75% of this machine's memory"
    else:
        source = f"set by the caller; {RSS_ENV} sets the default"
    if max_rss_mb <= 0:
        return None, "no limit"
    return int(max_rss_mb * 1024 * 1024), source


def child_environment(backend: Any, device: str | None, env: dict[str, str] | None, folder: Path) -> dict[str, str]:
    """Inherited env + backend env + caller env, then the variables the runner owns."""
    merged = dict(os.environ)
    merged.update(backend.child_env(device, base=merged))
    if env:
        merged.update({str(k): str(v) for k, v in env.items()})
    if merged.get("TRITON_ALL_BLOCKS_PARALLEL") == "1":
        merged["TRITON_ALL_BLOCKS_PARALLEL"] = "0"
    if device is not None and backend.visible_devices_var:
        merged[backend.visible_devices_var] = str(device)
    merged[JOB_DIR_ENV] = str(folder)
    merged["HELIX_JOB_ID"] = folder.name
    merged["PYTHONUNBUFFERED"] = "1"
    paths = [p for p in merged.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _REPO_ROOT not in paths:
        paths.append(_REPO_ROOT)  # so `python -m helix_engine...` works from any cwd
    merged["PYTHONPATH"] = os.pathsep.join(paths)
    return merged


@contextlib.contextmanager
def _interrupt_signals() -> Iterator[None]:
    """In the main thread, turn SIGTERM/SIGHUP into JobInterrupted (so cleanup runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise JobInterrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, prev in old.items():
            signal.signal(sig, prev)


def _resolve_backend(backend: Any) -> Any:
    if not isinstance(backend, str):
        return backend
    from helix_engine.eval.backends import get_backend, select_backend

    return select_backend(backend) if backend == "auto" else get_backend(backend)


def run_job(
    ws: Path,
    kind: str,
    argv: list[str],
    *,
    round_name: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
    device_pool: list[str] | None = None,
    backend: Any = "cpu",
    on_event: Callable[[dict[str, Any]], None] | None = None,
    echo: bool = False,
    max_rss_mb: float | None = None,
    grace_s: float = 5.0,
    job_id: str | None = None,
) -> JobInfo:
    """Run ``argv`` as a job of workspace ``ws`` and return its final JobInfo (blocking)."""
    if not argv:
        raise HelixError("a job needs a command line to run")
    be = _resolve_backend(backend)
    limit_s, limit_source = resolve_timeout(timeout_s)
    rss_limit, rss_source = resolve_rss_limit(max_rss_mb)
    ws = Path(ws)
    folder = job_dir(ws, job_id or new_job_id(kind))
    folder.mkdir(parents=True, exist_ok=False)
    (folder / EVENTS_NAME).touch()
    (folder / OUTPUT_NAME).touch()
    info = JobInfo(
        id=folder.name, kind=kind, argv=[str(a) for a in argv], round=round_name, backend=be.name,
        supervisor_pid=os.getpid(), created_at=time.time(), status="queued",
        supervisor_start_ticks=procs.start_ticks(os.getpid()), timeout_s=limit_s,
        cwd=str(cwd or ws), device_pool=device_pool,
    )
    write_job(folder, info)
    offset = 0

    def pump() -> None:
        nonlocal offset
        if on_event is None:
            return
        events, offset = read_events(folder, offset)
        for event in events:
            with contextlib.suppress(Exception):
                on_event(event)

    def mark_waiting() -> None:
        info.message = "waiting for a free device among " + ",".join(device_pool or [])
        with job_lock(folder):
            write_job(folder, info)

    def finish(status: str, message: str | None, exit_code: int | None = None) -> JobInfo:
        info.status = status  # type: ignore[assignment]
        info.message = message
        info.exit_code = exit_code
        info.ended_at = time.time()
        with job_lock(folder):
            write_job(folder, info)
        pump()
        return info

    with _interrupt_signals():
        try:
            lease = (
                lease_device(ws, be.name, list(device_pool), job_id=info.id,
                             should_stop=lambda: cancel_requested(folder), on_wait=mark_waiting)
                if device_pool else contextlib.nullcontext(None)
            )
            with lease as device:
                if device_pool and device is None:
                    return finish("cancelled", "cancelled while waiting for a device")
                info.device = device
                return _supervise(info, folder, be, argv, cwd or ws, env, device, limit_s,
                                  limit_source, rss_limit, rss_source, echo, grace_s, pump, finish)
        except (KeyboardInterrupt, JobInterrupted) as exc:
            what = "KeyboardInterrupt" if isinstance(exc, KeyboardInterrupt) else str(exc)
            if info.status in ACTIVE_STATUSES:
                pgid = (info.model_extra or {}).get("pgid")
                procs.terminate_group(pgid, min(grace_s, 2.0))
                finish("cancelled", f"interrupted: the supervising helix process got {what}; "
                       "the job's processes were stopped")
            raise


def _supervise(
    info: JobInfo, folder: Path, be: Any, argv: list[str], cwd: Path, env: dict[str, str] | None,
    device: str | None, limit_s: float, limit_source: str, rss_limit: int | None, rss_source: str,
    echo: bool, grace_s: float, pump: Callable[[], None], finish: Callable[..., JobInfo],
) -> JobInfo:
    child_env = child_environment(be, device, env, folder)
    cap = DEFAULT_LOG_CAP_MB
    with contextlib.suppress(ValueError):
        cap = max(1, int(float(os.environ.get(LOG_CAP_ENV, "") or cap)))
    procs.become_subreaper()
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [str(a) for a in argv], cwd=str(cwd), env=child_env, stdin=subprocess.DEVNULL,
            stdout=write_fd, stderr=write_fd, start_new_session=True,
            preexec_fn=pdeathsig_setup(),  # noqa: PLW1509 - only a prctl call
        )
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        return finish("failed", f"could not start {argv[0]!r} ({exc.strerror or exc}); check the command")
    os.close(write_fd)
    tee = Tee(read_fd, folder / OUTPUT_NAME, echo, cap * 1024 * 1024)
    tee.start()
    pgid = proc.pid
    info.pid = proc.pid
    info.started_at = time.time()
    info.status = "running"
    info.message = None
    extra = info.model_extra if info.model_extra is not None else {}
    extra["pgid"] = pgid
    extra["pid_start_ticks"] = procs.start_ticks(proc.pid)
    with job_lock(folder):
        write_job(folder, info)
    outcome: tuple[str, str] | None = None
    try:
        deadline = time.monotonic() + limit_s
        next_mem = 0.0
        while True:
            try:
                proc.wait(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now >= deadline:
                procs.terminate_group(pgid, grace_s, reap=proc)
                outcome = ("timeout", f"timed out after {limit_s:g} s (limit: {limit_source}); the job "
                           f"{stop_text(reap(proc))}. Raise {TIMEOUT_ENV} or make the run faster")
                break
            if rss_limit is not None and now >= next_mem:
                next_mem = now + _MEM_EVERY_S
                rss = procs.group_rss_bytes(pgid)
                if rss > rss_limit:
                    procs.signal_group(pgid, signal.SIGKILL)
                    outcome = ("failed", f"killed: the job used {rss / 2**20:.0f} MB of memory, over "
                               f"the {rss_limit / 2**20:.0f} MB limit (limit: {rss_source}); use smaller "
                               f"shapes or raise {RSS_ENV}")
                    break
            if cancel_requested(folder):
                procs.terminate_group(pgid, grace_s, reap=proc)
                outcome = ("cancelled", f"cancelled on request; the job {stop_text(reap(proc))}")
                break
            pump()
        rc = reap(proc)
    except BaseException:
        procs.terminate_group(pgid, min(grace_s, 2.0), reap=proc)
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        procs.reap_group_zombies(pgid)
        tee.join(timeout=2)
        raise
    if procs.group_alive(pgid):  # leftovers (grandchildren) of a finished child
        procs.terminate_group(pgid, min(grace_s, 1.0))
    procs.reap_group_zombies(pgid)
    tee.join(timeout=5)
    if rc is None:
        why = outcome[1] if outcome else "the job was stopped"
        if STUCK not in why:
            why += f"; its process {STUCK}"
        return finish(outcome[0] if outcome else "failed", why, None)
    if outcome is None and rc != 0 and cancel_requested(folder):
        # another process (cancel_job) signalled the group before this loop saw the marker
        outcome = ("cancelled", f"cancelled on request; the job {stop_text(rc)}")
    if outcome is not None:
        return finish(outcome[0], outcome[1], rc)
    if rc == 0:
        return finish("passed", None, 0)
    last = tee.last_line()
    if rc < 0:
        text = signal_text(rc)
    else:
        text = f"exited with code {rc}"
    return finish("failed", text + (f"; last output: {last}" if last else ""), rc)


def cancel_job(ws: Path, job_id: str, grace_s: float = 5.0) -> JobInfo:
    """Stop a job: SIGTERM its process group, SIGKILL after ``grace_s``; status cancelled.

    Works across processes: a cancel marker tells the supervisor (also while the job is
    queued for a device); if the supervisor is gone, the job is finalized here.
    """
    info = load_job(ws, job_id)
    folder = job_dir(ws, info.id)
    extra = info.model_extra or {}
    if info.status not in ACTIVE_STATUSES:
        if info.status == "lost":
            procs.terminate_group(extra.get("pgid"), grace_s)
        return info
    request_cancel(folder)
    pgid = extra.get("pgid")
    if pgid and procs.pid_alive(info.pid, extra.get("pid_start_ticks")):
        procs.terminate_group(pgid, grace_s)
    deadline = time.monotonic() + grace_s + 5.0
    while time.monotonic() < deadline:
        current = load_job(ws, info.id)
        if current.status not in ACTIVE_STATUSES:
            return current
        if not procs.pid_alive(current.supervisor_pid, extra.get("supervisor_start_ticks")):
            break
        time.sleep(0.05)
    with job_lock(folder):
        current = read_job_file(folder)
        if current.status in ACTIVE_STATUSES:
            procs.terminate_group((current.model_extra or {}).get("pgid"), 0.5)
            current.status = "cancelled"
            current.ended_at = time.time()
            current.message = "cancelled on request (the supervising process was gone)"
            write_job(folder, current)
    return load_job(ws, info.id)
