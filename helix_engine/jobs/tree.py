"""Every process of one job, found by walking /proc, and how to end them all.

Why not the process group alone: a descendant that calls ``setsid()`` leaves the job's group
and session, so ``killpg`` misses it and it outlives run-test, run-bench and cancel. cgroups
would contain it, but need a delegation helix cannot assume. So the supervisor is a child
subreaper (orphans come to it, not to PID 1) and decides membership by this rule, at every
scan (several a second while the job runs, and at its end):

A process P, not the supervisor, that started no earlier than the job's child C, belongs to
the job when

1. P is C, or P's process group or session is C's (unless C's PID now names another
   process: Linux never hands out a PID still used as a group or session id);
2. P's initial environment carries ``HELIX_JOB_DIR=<this job's folder>`` (every job child
   gets it; descendants inherit it through setsid and reparenting; readable for our own
   uid; a folder, unlike an id, is unique across workspaces);
3. an earlier scan saw P as a member (same PID, same start time); or
4. P's parent is a member.

An orphan adopted by the supervisor that matches none of these (it cleared its environment
and its parent died before any scan saw it) is left alone: nothing tells it from another
child of the supervisor, such as another job's child, and killing one of those would be
worse than leaking it. Another job's processes never match: their group, session and
``HELIX_JOB_DIR`` are their own, and their parent chain does not pass through this job.
Without /proc (not Linux) the job is its process group, as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from helix_engine.jobs import procs
from helix_engine.jobs.events import JOB_DIR_ENV

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Member:
    pid: int
    ppid: int
    pgid: int
    sid: int
    ticks: int
    rss: int  # bytes
    zombie: bool


def _read(pid: int) -> Member | None:
    raw = None
    with contextlib.suppress(OSError):
        raw = (_PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    if raw is None:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return Member(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]),
                      int(fields[21]) * _PAGE, fields[0] in ("Z", "X"))
    except (IndexError, ValueError):
        return None


def processes() -> dict[int, Member]:
    """Every process /proc shows, by pid (the warm worker's zygote finds its orphans here too)."""
    out: dict[int, Member] = {}
    try:
        names = os.listdir(_PROC)
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            member = _read(int(name))
            if member is not None:
                out[member.pid] = member
    return out


def _carries(pid: int, marker: bytes) -> bool:
    """Whether the process's initial environment holds ``marker`` (``\\0NAME=value\\0``)."""
    try:
        with open(_PROC / str(pid) / "environ", "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return False
    return marker in b"\0" + data


class JobTree:
    """The processes of the job whose child is ``root`` and whose folder is ``job_dir`` (None:
    no environment rule; a worker ending its own descendants uses that)."""

    def __init__(self, root: int, job_dir: str | None) -> None:
        self.root = root
        self.root_ticks = procs.start_ticks(root)
        self.me = os.getpid()
        self.marker = f"\0{JOB_DIR_ENV}={job_dir}\0".encode() if job_dir else None
        self.seen: dict[int, int] = {root: self.root_ticks} if self.root_ticks is not None else {}
        self._env: dict[tuple[int, int], bool] = {}
        self.procfs = _PROC.is_dir() and self.root_ticks is not None

    def scan(self) -> list[Member]:
        """Members now (zombies included), remembering each for later scans."""
        root_ticks = self.root_ticks
        if not self.procfs or root_ticks is None:  # procfs is only set with the root's start ticks
            return []
        table = processes()
        root_now = table.get(self.root)
        root_same = root_now is None or root_now.ticks == self.root_ticks
        env_cache: dict[tuple[int, int], bool] = {}
        members: dict[int, Member] = {}
        for p in table.values():
            if p.pid in (self.me, 1) or p.ticks < root_ticks:
                continue
            key = (p.pid, p.ticks)
            if self.seen.get(p.pid) == p.ticks or (root_same and self.root in (p.pid, p.pgid, p.sid)):
                members[p.pid] = p
                continue
            if not p.zombie and self.marker is not None:
                hit = self._env.get(key)
                if hit is None:
                    hit = _carries(p.pid, self.marker)
                env_cache[key] = hit
                if hit:
                    members[p.pid] = p
        self._env = env_cache  # forget processes that are gone
        children: dict[int, list[Member]] = {}
        for p in table.values():
            if p.pid not in (self.me, 1) and p.ticks >= root_ticks:
                children.setdefault(p.ppid, []).append(p)
        stack = list(members) + ([self.root] if root_same else [])  # root may be this process
        while stack:
            for child in children.get(stack.pop(), []):
                if child.pid not in members:
                    members[child.pid] = child
                    stack.append(child.pid)
        for p in members.values():
            self.seen[p.pid] = p.ticks
        return list(members.values())

    def live(self) -> list[Member]:
        return [m for m in self.scan() if not m.zombie]

    def memory_bytes(self, limit: int | None = None) -> int:
        """Resident memory of the job: the RSS sum, confirmed with PSS when it crosses ``limit``
        (forked workers share pages, so summed RSS overcounts)."""
        if not self.procfs:
            return procs.group_memory_bytes(self.root, limit)
        live = self.live()
        rss = sum(m.rss for m in live)
        if limit is None or rss <= limit or len(live) < 2:
            return rss
        return sum(pss if (pss := procs._pss_bytes(m.pid)) is not None else m.rss for m in live)

    def signal(self, sig: int) -> int:
        """Send ``sig`` to every live member (and the group); how many were signalled."""
        if not self.procfs:
            return int(procs.signal_group(self.root, sig))
        sent = 0
        for m in self.live():
            sent += _send(m, sig)
        return sent

    def alive(self) -> bool:
        if not self.procfs:
            return procs.group_alive(self.root)
        return bool(self.live())

    def terminate(self, grace_s: float, *, reap: procs.Pollable | None = None) -> str:
        """SIGTERM every member, wait up to ``grace_s`` (members that appear meanwhile get it
        too), then SIGKILL until none is left (5 s at most). ``reap``: the child's Popen, polled
        so it does not linger as a zombie. Returns "none", "SIGTERM" or "SIGKILL"."""
        if not self.procfs:
            return procs.terminate_group(self.root, grace_s, reap=reap)
        if not self.signal(signal.SIGTERM):
            return "none"
        termed = {(m.pid, m.ticks) for m in self.live()}
        deadline = time.monotonic() + max(0.0, grace_s)
        while time.monotonic() < deadline:
            _poll(reap)
            live = self.live()
            if not live:
                return "SIGTERM"
            for m in live:
                if (m.pid, m.ticks) not in termed:
                    termed.add((m.pid, m.ticks))
                    _send(m, signal.SIGTERM)
            time.sleep(0.05)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            _poll(reap)
            if not self.signal(signal.SIGKILL):
                break
            time.sleep(0.02)
        return "SIGKILL"

    def reap_zombies(self) -> int:
        """Reap members that ended as zombies of this process (orphans it adopted). The child
        itself is left to its Popen, which needs its exit status."""
        reaped = 0
        for m in self.scan():
            if m.zombie and m.ppid == self.me and m.pid != self.root:
                with contextlib.suppress(ChildProcessError, OSError):
                    if os.waitpid(m.pid, os.WNOHANG)[0]:
                        reaped += 1
        return reaped


def _send(member: Member, sig: int) -> int:
    """Signal one process if it is still the one scanned (a pidfd pins it: no PID-reuse race)."""
    opener = getattr(os, "pidfd_open", None)
    sender = getattr(signal, "pidfd_send_signal", None)
    if opener is not None and sender is not None:
        try:
            fd = opener(member.pid)
        except OSError:
            return 0
        try:
            if procs.start_ticks(member.pid) != member.ticks:
                return 0
            sender(fd, sig)
            return 1
        except OSError:
            return 0
        finally:
            os.close(fd)
    if procs.start_ticks(member.pid) != member.ticks:
        return 0
    try:
        os.kill(member.pid, sig)
        return 1
    except OSError:
        return 0


def _poll(reap: procs.Pollable | None) -> None:
    if reap is not None:
        with contextlib.suppress(Exception):
            reap.poll()
