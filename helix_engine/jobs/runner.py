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
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.jobs import procs
from helix_engine.jobs.child import LOG_CAP_ENV, STUCK, Tee, pdeathsig_setup, reap, signal_text, stop_text
from helix_engine.jobs.devices import lease_device
from helix_engine.jobs.events import EVENTS_NAME
from helix_engine.jobs.interrupts import install_interrupt_handlers  # noqa: F401 - re-exported
from helix_engine.jobs.record import JobRecord
from helix_engine.jobs.registry import (
    ACTIVE_STATUSES,
    OUTPUT_NAME,
    JobInfo,
    JobStatus,
    job_dir,
    job_lock,
    last_event,
    load_job,
    new_job_id,
    read_job_file,
    request_cancel,
    user_command,
    write_job,
)
from helix_engine.jobs.settings import (  # noqa: F401 - re-exported for callers
    DEFAULT_TIMEOUT_S,
    RSS_ENV,
    TIMEOUT_ENV,
    child_environment,
    resolve_rss_limit,
    resolve_timeout,
)
from helix_engine.jobs.tree import JobTree

DEFAULT_LOG_CAP_MB = 64
_POLL_S = 0.05
_MEM_EVERY_S = 0.1  # how often the job's processes are scanned (memory, members that setsid)
#: Jobs supervised by this process: job id → (stop event, reason holder, supervising thread).
_ACTIVE: dict[str, tuple[threading.Event, list[str], int]] = {}
_ACTIVE_LOCK = threading.Lock()
_EXIT_HOOKED = False
EARLY_EXIT = ("the job's process exited with code 0 before it reported a result: the operator or its harness "
              "ended it early (sys.exit() or os._exit()); remove that call and run again")


class JobInterrupted(BaseException):
    """Raised in the supervisor's main thread on SIGTERM/SIGHUP so the child group dies too."""


def stop_all_jobs(reason: str) -> int:
    """Ask every job this process supervises to stop (their threads record ``cancelled``).

    Why: jobs supervised from worker threads never see the main thread's Ctrl-C; this is
    called automatically when the interpreter shuts down, and may be called by a cockpit.
    """
    with _ACTIVE_LOCK:
        entries = list(_ACTIVE.values())
    for event, holder, _thread in entries:
        holder.append(reason)
        event.set()
    return len(entries)


def drain(timeout_s: float) -> None:
    """Wait until jobs supervised by other threads have recorded their final status."""
    me = threading.get_ident()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with _ACTIVE_LOCK:
            if not any(thread != me for _e, _h, thread in _ACTIVE.values()):
                return
        time.sleep(0.05)


def _hook_exit() -> None:
    """Stop our jobs before the interpreter joins worker threads (else a Ctrl-C'd CLI would
    wait for every job to time out)."""
    global _EXIT_HOOKED
    if _EXIT_HOOKED:
        return
    _EXIT_HOOKED = True
    register = getattr(threading, "_register_atexit", None)  # runs before thread joins
    if register is not None:
        with contextlib.suppress(RuntimeError):
            register(lambda: stop_all_jobs("the supervising helix process is exiting"))


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


def _create_folder(ws: Path, kind: str, job_id: str | None) -> Path:
    for _ in range(20):
        folder = job_dir(ws, job_id or new_job_id(kind))
        try:
            folder.mkdir(parents=True, exist_ok=False)
            return folder
        except FileExistsError:
            if job_id:
                raise HelixError(f"a job {job_id!r} already exists; pick another id") from None
        except OSError as exc:
            raise HelixError(
                f"cannot create the job folder {folder} ({exc.strerror or exc}); make the workspace "
                "writable or run from a writable copy"
            ) from None
    raise HelixError("could not find a free job id; try again")


class _Supervisor(JobRecord):
    """The state of one running job in its supervising process."""

    def __init__(self, ws: Path, folder: Path, info: JobInfo, be: Any, on_event: Callable[[dict[str, Any]], None] | None,
                 grace_s: float, expect_result: bool = False) -> None:
        super().__init__(folder, info, on_event)
        self.ws, self.be = ws, be
        self.grace_s, self.expect_result = grace_s, expect_result
        self.peak = 0  # bytes, the largest memory sample of the job's processes
        self.tree: JobTree | None = None  # the job's processes, once its child runs

    def before_finish(self) -> None:
        if self.peak and self.info.model_extra is not None:
            self.info.model_extra["peak_memory_mb"] = round(self.peak / 2**20, 1)

    def spawn(self, argv: list[str], cwd: Path, env: dict[str, str], echo: bool) -> tuple[Any, Tee] | str:
        cap = DEFAULT_LOG_CAP_MB
        with contextlib.suppress(ValueError):
            cap = max(1, int(float(os.environ.get(LOG_CAP_ENV, "") or cap)))
        if not Path(cwd).is_dir():
            return f"the job's working folder {cwd} does not exist; run it from an existing folder"
        procs.become_subreaper()
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(
                [str(a) for a in argv], cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                stdout=write_fd, stderr=write_fd, start_new_session=True,
                preexec_fn=pdeathsig_setup(),  # noqa: PLW1509 - only prctl/setrlimit
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            os.close(read_fd)
            os.close(write_fd)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return f"could not start {argv[0]!r} ({why}); check the command"
        os.close(write_fd)
        tee = Tee(read_fd, self.folder / OUTPUT_NAME, echo, cap * 1024 * 1024)
        tee.start()
        self.tree = JobTree(proc.pid, str(self.folder))
        self.info.pid = proc.pid
        self.info.started_at = time.time()
        self.info.status = "running"
        self.info.message = None
        extra = self.info.model_extra if self.info.model_extra is not None else {}
        extra["pgid"] = proc.pid
        extra["pid_start_ticks"] = procs.start_ticks(proc.pid)
        self.write()
        return proc, tee

    def reported(self) -> dict[str, Any] | None:
        """The payload of the child's final ``result`` event (None: it sent none). A child may
        fail its job with a sentence: ``{"failure": "..."}``. Read from the end of events.jsonl,
        so a bench of 10,000 cases (events far past one read page) still has its result."""
        result = last_event(self.folder, "result")
        if result is None:
            return None
        payload = result.get("payload")
        return payload if isinstance(payload, dict) else {}

    def end_processes(self, grace_s: float, proc: Any = None) -> str:
        """End every process of the job (setsid or not; see jobs/tree.py): SIGTERM, then
        SIGKILL after ``grace_s``."""
        tree = self.tree if self.tree is not None else JobTree(proc.pid, str(self.folder))
        return tree.terminate(grace_s, reap=proc)

    def watch(self, proc: Any, limit_s: float, limit_source: str, rss_limit: int | None,
              rss_source: str) -> tuple[int | None, tuple[JobStatus, str] | None]:
        """Wait for the child, enforcing limits and stop requests: (return code, outcome)."""
        tree = self.tree if self.tree is not None else JobTree(proc.pid, str(self.folder))
        deadline = time.monotonic() + limit_s
        next_mem = 0.0
        while True:
            try:
                proc.wait(timeout=_POLL_S)
                return reap(proc), None
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now >= deadline:
                self.end_processes(self.grace_s, proc)
                rc = reap(proc)
                return rc, ("timeout", f"timed out after {limit_s:g} s (limit: {limit_source}); the job "
                            f"{stop_text(rc)}. Raise {TIMEOUT_ENV} or make the run faster")
            if now >= next_mem:  # also remembers members, so an orphan that setsid()s is known
                used = tree.memory_bytes(rss_limit)
                # A /proc scan costs ~20 µs per process on the machine: keep it under ~5% of a core.
                next_mem = now + max(_MEM_EVERY_S, 20 * (time.monotonic() - now))
                self.peak = max(self.peak, used)
                if rss_limit is not None and used > rss_limit:
                    tree.signal(signal.SIGKILL)
                    return reap(proc), ("failed", f"killed: the job used {used / 2**20:.0f} MB of memory, "
                                        f"over the {rss_limit / 2**20:.0f} MB limit (limit: {rss_source}); "
                                        f"use smaller shapes or raise {RSS_ENV}")
            why = self.stop_requested()
            if why:
                self.end_processes(self.grace_s, proc)
                rc = reap(proc)
                return rc, ("cancelled", f"{why}; the job {stop_text(rc)}")
            self.pump()

    def conclude(self, proc: Any, tee: Tee, rc: int | None, outcome: tuple[JobStatus, str] | None) -> JobInfo:
        self.end_processes(min(self.grace_s, 1.0), proc)  # leftovers (grandchildren) of a finished child
        if self.tree is not None:
            self.tree.reap_zombies()
        procs.reap_group_zombies(proc.pid)
        tee.join(timeout=5)
        if rc is None:
            why = outcome[1] if outcome else "the job was stopped"
            if STUCK not in why:
                why += f"; its process {STUCK}"
            return self.finish(outcome[0] if outcome else "failed", why, None)
        if outcome is None and rc != 0:
            stopped = self.stop_requested()  # signalled by cancel_job before the loop saw the marker
            if stopped:
                outcome = ("cancelled", f"{stopped}; the job {stop_text(rc)}")
        if outcome is not None:
            return self.finish(outcome[0], outcome[1], rc)
        reported = self.reported()
        failure = reported.get("failure") if isinstance(reported, dict) else None
        if rc == 0:
            if self.expect_result and reported is None:
                return self.finish("failed", EARLY_EXIT, 0)
            return self.finish("failed", str(failure), 0) if failure else self.finish("passed", None, 0)
        if failure and rc > 0:  # the child's own sentence beats "exited with code 1"
            return self.finish("failed", str(failure), rc)
        last = tee.last_line()
        text = signal_text(rc) if rc < 0 else f"exited with code {rc}"
        return self.finish("failed", text + (f"; last output: {last}" if last else ""), rc)


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
    expect_result: bool = False,
) -> JobInfo:
    """Run ``argv`` as a job of workspace ``ws`` and return its final JobInfo (blocking).

    ``echo`` also copies the child's output live to this process's stderr. The final status
    is passed, failed (non-zero exit, a signal, the memory limit, a ``failure`` in its final
    ``result`` event, or, with ``expect_result``, no ``result`` event at all: it exited
    early), timeout or cancelled.
    """
    if not argv:
        raise HelixError("a job needs a command line to run")
    be = _resolve_backend(backend)
    limit_s, limit_source = resolve_timeout(timeout_s)
    rss_limit, rss_source = resolve_rss_limit(max_rss_mb)
    ws = Path(ws)
    folder = _create_folder(ws, kind, job_id)
    (folder / EVENTS_NAME).touch()
    (folder / OUTPUT_NAME).touch()
    info = JobInfo(
        id=folder.name, kind=kind, argv=[str(a) for a in argv], round=round_name, backend=be.name,
        supervisor_pid=os.getpid(), created_at=time.time(), status="queued",
        supervisor_start_ticks=procs.start_ticks(os.getpid()), host=socket.gethostname(),
        timeout_s=limit_s, cwd=str(cwd or ws), device_pool=device_pool, command=user_command(),
    )
    sup = _Supervisor(ws, folder, info, be, on_event, grace_s, expect_result)
    sup.write()
    with _ACTIVE_LOCK:
        _ACTIVE[info.id] = (sup.stop_event, sup.stop_reason, threading.get_ident())
    _hook_exit()

    def mark_waiting() -> None:
        info.message = "waiting for a free device among " + ",".join(device_pool or [])
        sup.write()

    proc: Any = None
    try:
        with _interrupt_signals():
            lease = (
                lease_device(ws, be.name, list(device_pool), job_id=info.id,
                             should_stop=lambda: sup.stop_requested() is not None, on_wait=mark_waiting)
                if device_pool else contextlib.nullcontext(None)
            )
            with lease as device:
                if device_pool and device is None:
                    return sup.finish("cancelled", f"{sup.stop_requested() or 'cancelled'} while waiting for a device")
                info.device = device
                if device is not None and be.visible_devices_var and os.environ.get(
                        "HELIX_DEBUG", "").lower() in ("1", "true"):  # as upstream: show the lease
                    print(f"[helix] job {info.id}: {be.visible_devices_var}={device}", file=sys.stderr)
                spawned = sup.spawn(argv, cwd or ws, child_environment(be, device, env, folder), echo)
                if isinstance(spawned, str):
                    return sup.finish("failed", spawned)
                proc, tee = spawned
                try:
                    rc, outcome = sup.watch(proc, limit_s, limit_source, rss_limit, rss_source)
                except BaseException:
                    sup.end_processes(min(grace_s, 2.0), proc)
                    reap(proc, 5.0)
                    if sup.tree is not None:
                        sup.tree.reap_zombies()
                    procs.reap_group_zombies(proc.pid)
                    tee.join(timeout=2)
                    raise
                return sup.conclude(proc, tee, rc, outcome)
    except BaseException as exc:
        if info.status in ACTIVE_STATUSES:
            rc = proc.returncode if proc is not None else None
            status: JobStatus
            if isinstance(exc, (KeyboardInterrupt, JobInterrupted)):
                what = "KeyboardInterrupt" if isinstance(exc, KeyboardInterrupt) else str(exc)
                status, text = "cancelled", (f"interrupted: the supervising helix process got {what}; "
                                             "the job's processes were stopped")
            else:
                status, text = "failed", (f"helix failed while supervising the job ({type(exc).__name__}: "
                                          f"{exc}); the job's processes were stopped")
            with contextlib.suppress(Exception):  # e.g. the disk is full: keep the first error
                sup.finish(status, text, rc)
        raise
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.pop(info.id, None)


def cancel_job(ws: Path, job_id: str, grace_s: float = 5.0) -> JobInfo:
    """Stop a job: SIGTERM its process group, SIGKILL after ``grace_s``; status cancelled.

    Works across processes: a cancel marker tells the supervisor (also while the job is
    queued for a device); if the supervisor is gone, the job is finalized here. A process
    group is signalled only when :func:`procs.proven_job_group` proves it is the job's (the
    pid, its start time and its group all match what the supervisor recorded at launch); a
    lost job is never signalled, whatever its job.json says.
    """
    info = load_job(ws, job_id)
    folder = job_dir(ws, info.id)
    extra = info.model_extra or {}
    remote = extra.get("host") not in (None, "", socket.gethostname())

    def proven() -> int | None:
        return None if remote else procs.proven_job_group(info.pid, extra.get("pid_start_ticks"), extra.get("pgid"))

    if info.status not in ACTIVE_STATUSES:
        return info
    request_cancel(folder)
    pgid = proven()
    if pgid is not None:
        procs.terminate_group(pgid, grace_s)
    supervisor_ticks = extra.get("supervisor_start_ticks")
    deadline = time.monotonic() + grace_s + 5.0
    while time.monotonic() < deadline:
        current = read_job_file(folder)  # the record itself: "lost" is what we are settling
        if current.status not in ACTIVE_STATUSES:
            return current
        if not remote and not procs.pid_alive(current.supervisor_pid, supervisor_ticks):
            break
        time.sleep(0.05)
    if remote:  # only its own supervisor (on that host) can stop it; it reads the marker
        return load_job(ws, info.id)
    with job_lock(folder):
        current = read_job_file(folder)
        if current.status in ACTIVE_STATUSES:
            pgid = proven()
            if pgid is not None:
                procs.terminate_group(pgid, 0.5)
            current.status = "cancelled"
            current.ended_at = time.time()
            current.message = "cancelled on request (the supervising process was gone)"
            write_job(folder, current)
    return load_job(ws, info.id)
