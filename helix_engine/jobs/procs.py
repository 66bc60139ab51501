"""Process facts from /proc (Linux) with a portable fallback: liveness, start time, the
members and resident memory of a process group, and group termination.

Why /proc: a PID can be reused and a zombie still answers ``kill(pid, 0)``; reading the
process state and start time tells a live job from a dead one that nobody reaped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Protocol

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (after the ``(comm)``), or None when unreadable."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    end = raw.rfind(")")
    return raw[end + 2 :].split() if end >= 0 else None


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot (None when unknown)."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def pid_alive(pid: int | None, started: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if ``started`` is given, is the same process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if not isinstance(started, int) or isinstance(started, bool):
        started = None  # a damaged record: judge by the pid alone
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    fields = _stat_fields(pid)
    if fields is None:
        return not _PROC.is_dir()  # no /proc: trust kill(0)
    if fields and fields[0] in ("Z", "X"):
        return False
    if started is not None:
        now = start_ticks(pid)
        if now is not None and now != started:
            return False  # the PID was reused by another process
    return True


def group_members(pgid: int) -> list[tuple[int, int]]:
    """``(pid, rss_bytes)`` of every live (non-zombie) process in process group ``pgid``."""
    out: list[tuple[int, int]] = []
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return out
    for name in entries:
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None or len(fields) < 22 or fields[0] in ("Z", "X"):
            continue
        try:
            if int(fields[2]) != pgid:
                continue
            out.append((int(name), int(fields[21]) * _PAGE))
        except ValueError:
            continue
    return out


def process_group_of(pid: int) -> int | None:
    """The process group ``pid`` is in now, from /proc (None when unknown)."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 3:
        return None
    try:
        return int(fields[2])
    except ValueError:
        return None


def _plain_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def proven_job_group(pid: object, pid_start_ticks: object, pgid: object) -> int | None:
    """The job's process group, only when helix can prove it is the job's; else None.

    Proof: the recorded child ``pid`` runs now with the start time recorded at launch, it
    leads the recorded group (helix starts every job child in a session of its own, so
    ``pgid == pid``), and /proc says that process is in that group now. Why so strict: pids
    and group ids come from job.json, which anyone who can write the workspace can craft; a
    group that cannot be proven is never signalled (its own supervisor still can stop it).
    """
    pid, ticks, group = _plain_int(pid), _plain_int(pid_start_ticks), _plain_int(pgid)
    if pid is None or ticks is None or group is None or pid != group or not 1 < pid < 2**22 + 1:
        return None
    if group == os.getpgrp() or pid == os.getpid():
        return None
    if start_ticks(pid) != ticks or not pid_alive(pid, ticks):
        return None
    if process_group_of(pid) != group:
        return None
    return group


def group_rss_bytes(pgid: int) -> int:
    return sum(rss for _, rss in group_members(pgid))


def _pss_bytes(pid: int) -> int | None:
    """Proportional set size (shared pages split between sharers), None when unreadable."""
    try:
        with open(_PROC / str(pid) / "smaps_rollup", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def group_memory_bytes(pgid: int, limit: int | None = None) -> int:
    """Memory of the group: the RSS sum, confirmed with PSS when it crosses ``limit``.

    Why: forked workers share library pages, so summed RSS overcounts; PSS does not, but
    costs more to read, so it is read only when the cheap RSS sum says the limit is crossed.
    """
    members = group_members(pgid)
    rss = sum(r for _, r in members)
    if limit is None or rss <= limit or len(members) < 2:
        return rss
    total = 0
    for pid, member_rss in members:
        pss = _pss_bytes(pid)
        total += member_rss if pss is None else pss
    return total


def group_alive(pgid: int | None) -> bool:
    """True while any non-zombie process of the group exists."""
    if not isinstance(pgid, int) or pgid <= 1:
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    if not _PROC.is_dir():
        return True
    return bool(group_members(pgid))


def signal_group(pgid: int | None, sig: int) -> bool:
    """Send ``sig`` to the group; False when it no longer exists. Never signals group 0/1."""
    if not isinstance(pgid, int) or pgid <= 1 or pgid == os.getpgrp():
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return False


class Pollable(Protocol):
    """What ``reap`` needs of a ``subprocess.Popen``: ``poll`` waits on its leader if it exited."""

    def poll(self) -> object: ...


def terminate_group(pgid: int | None, grace_s: float, *, reap: Pollable | None = None) -> str:
    """SIGTERM the group, wait up to ``grace_s`` for it to empty, then SIGKILL.

    ``reap`` may be a ``subprocess.Popen`` whose leader we must wait on (else it stays a
    zombie). Returns ``"none"`` (nothing ran), ``"SIGTERM"`` or ``"SIGKILL"`` (what ended it).
    """
    if not signal_group(pgid, signal.SIGTERM):
        return "none"
    deadline = time.monotonic() + max(0.0, grace_s)
    while time.monotonic() < deadline:
        if reap is not None:
            with contextlib.suppress(Exception):
                reap.poll()
        if not group_alive(pgid):
            return "SIGTERM"
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if reap is not None:
            with contextlib.suppress(Exception):
                reap.poll()
        if not group_alive(pgid):
            break
        time.sleep(0.02)
    return "SIGKILL"


def physical_memory_bytes() -> int | None:
    """Physical RAM, lowered to the cgroup v2/v1 memory limit when one is set."""
    total: int | None = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            text = Path(limit_file).read_text().strip()
            if text and text != "max":
                value = int(text)
                if 0 < value < (1 << 60) and (total is None or value < total):
                    total = value
    return total


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux PR_SET_CHILD_SUBREAPER) so they can be reaped.

    Why: a job's grandchildren that outlive the child are otherwise reparented to PID 1,
    which in some containers never reaps them; as zombies they keep the process group alive.
    """
    if not os.path.exists("/proc/self"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_group_zombies(pgid: int | None) -> int:
    """Reap zombies of group ``pgid`` that are our children; returns how many."""
    if not pgid or pgid <= 1:
        return 0
    me = os.getpid()
    reaped = 0
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return 0
    for name in entries:
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None or len(fields) < 3 or fields[0] != "Z":
            continue
        try:
            if int(fields[2]) != pgid or int(fields[1]) != me:
                continue
            if os.waitpid(int(name), os.WNOHANG)[0]:
                reaped += 1
        except (ValueError, ChildProcessError, OSError):
            continue
    return reaped
