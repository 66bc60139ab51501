"""The warm worker's server: ``python -m helix_engine.eval.zygote WORKSPACE BACKEND IDLE_S``
(see warm.py for why and how; ``helix worker start`` runs it as a job).

It imports torch, Triton and helix's eval modules (never a device), listens on the workspace's
socket, and for each ``run`` forks: the fork becomes its own process group, takes the client's
stdin/stdout/stderr, folder and environment, and runs the worker module's main as
``python -m`` would. Forks happen on the main thread only; one small thread per fork waits for
it to end (and tells the client) and another watches the client (its connection closing kills
the fork). It exits after IDLE_S seconds with nothing running, or on ``stop``.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib
import io
import os
import runpy
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from helix_engine.eval import warm

#: What every eval child imports, loaded once here so a fork starts with it.
PRELOAD = ("numpy", "torch", "triton", "triton.language", "helix_engine.eval.worker", "helix_engine.eval.childlib",
           "helix_engine.eval.bench", "helix_engine.eval.timing", "helix_engine.eval.loader",
           "helix_engine.eval.interleave", "helix_engine.eval.adaptive", "helix_engine.eval.pairedbench",
           "helix_engine.eval.usercode", "helix_engine.eval.backends", "helix_engine.perf.sequential",
           "helix_engine.perf.evaluation", "helix_engine.jobs.events", "helix_engine.jobs.tree")
#: The modules a client may ask to run.
RUNNABLE = frozenset({"helix_engine.eval.worker"})
#: How long a stopping worker waits for its killed forks' ends to reach their clients.
CLOSE_WAIT_S = 2.0


class Zygote:
    def __init__(self, ws: Path, backend: str, idle_s: float) -> None:
        self.ws, self.backend, self.idle_s = ws, backend, idle_s
        self.path = warm.socket_path(ws, backend)
        self.fingerprint = warm.fingerprint(dict(os.environ), sys.executable)  # before imports change it
        self.started = time.time()
        self.last_active = time.monotonic()
        self.served = 0
        self.children: set[int] = set()
        self.conns: set[socket.socket] = set()  # running probes' connections: a later fork closes its copies
        self.waiters: set[threading.Thread] = set()  # each fork's `_wait`: it tells the client how it ended
        self.lock = threading.Lock()
        self.stopping = False
        self.listener: socket.socket | None = None
        self.lock_fd: int | None = None
        self.bound: int | None = None  # the socket file's inode, to remove only our own
        from helix_engine.jobs.child import pdeathsig_setup

        self.death_hook = pdeathsig_setup()  # made here: it checks that the fork's parent is this process

    # ---------------------------------------------------------------- lifecycle

    def preload(self) -> list[str]:
        """Import PRELOAD (and the backend's torch); what failed, as text (a fork imports it again)."""
        from helix_engine.eval.childlib import setup_backend

        failed = []
        with contextlib.suppress(Exception):
            setup_backend({"backend": self.backend, "device_str": None})
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - reported, the fork will import it again
                failed.append(f"{name}: {type(exc).__name__}: {exc}")
        return failed

    def bind(self) -> None:
        """Take the socket's lock for this process's life (one worker per workspace and backend:
        a second one, or one started while this one is busy, finds it held and exits), then bind."""
        lock_path = self.path.with_suffix(".lock")
        old = os.umask(0o177)
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        finally:
            os.umask(old)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise SystemExit(f"helix: a warm worker already serves {self.ws} ({self.backend})") from None
        self.lock_fd = fd
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a socket left by a worker that died (it held the lock while it lived)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        self.bound = os.stat(self.path).st_ino
        sock.listen(16)
        sock.settimeout(1.0)
        self.listener = sock

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self.bound:  # ours, not a later worker's
                    os.unlink(self.path)
        # close() also runs in the SIGTERM handler, on the main thread, which may have been holding
        # the lock when the signal came (the idle check, a fork's bookkeeping): never wait on it for
        # long; the sets are only read here, and the process ends next
        held = self.lock.acquire(timeout=1.0)
        try:
            for pid in list(self.children):
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            waiters = list(self.waiters)
        finally:
            if held:
                self.lock.release()
        # the process exits next, and its daemon threads with it: without this wait a client could
        # find its socket closed before its fork's end was sent ("the warm worker ended before the
        # probe did" instead of "killed by SIGKILL"), depending on which thread ran first
        deadline = time.monotonic() + CLOSE_WAIT_S
        for thread in waiters:
            thread.join(max(0.0, deadline - time.monotonic()))

    def serve(self) -> int:
        assert self.listener is not None
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                self.end_orphans()
                with self.lock:
                    idle = not self.children and time.monotonic() - self.last_active > self.idle_s
                if idle:
                    print(f"helix: no probe for {self.idle_s:g} s; the warm worker stops", flush=True)
                    return 0
                continue
            except OSError:
                return 0 if self.stopping else 1
            self.handle(conn)
        return 0

    def end_orphans(self) -> None:
        """End what a fork left behind: the zygote is a subreaper, so a process a fork started
        (setsid or not) comes here when its fork ends; any child that is not a running fork is
        such an orphan and is killed and reaped (a cold job's supervisor does the same)."""
        from helix_engine.jobs.tree import processes

        me = os.getpid()
        with self.lock:
            forks = set(self.children)
        for member in processes().values():
            if member.ppid == me and member.pid not in forks:
                with contextlib.suppress(OSError):
                    os.kill(member.pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.waitpid(member.pid, os.WNOHANG)

    # ---------------------------------------------------------------- requests

    def handle(self, conn: socket.socket) -> None:
        """One request, on the main thread (a fork must come from here)."""
        conn.settimeout(5.0)
        fds: list[int] = []
        try:
            if warm.peer_uid(conn) != os.getuid():
                conn.close()
                return
            message, fds = warm.receive(conn, max_fds=3)
            op = message.get("op")
            if op == "hello":
                warm.send(conn, {"pid": os.getpid(), "backend": self.backend, "workspace": str(self.ws),
                                 "fingerprint": self.fingerprint, "served": self.served,
                                 "started_at": self.started, "probes_running": len(self.children)})
            elif op == "stop":
                with self.lock:
                    running = len(self.children)
                warm.send(conn, {"stopping": True, "probes_stopped": running})
                self.stopping = True
            elif op == "run" and len(fds) == 3:
                self.run(conn, message, fds)
                return  # the waiter threads own conn now
            else:
                warm.send(conn, {"error": f"unknown request {op!r}"})
        except Exception as exc:  # noqa: BLE001 - a bad request must never end the worker
            with contextlib.suppress(Exception):
                warm.send(conn, {"error": f"bad request: {type(exc).__name__}: {exc}"[:500]})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        conn.close()

    def run(self, conn: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
        module, argv, cwd, env = message.get("module"), message.get("argv"), message.get("cwd"), message.get("env")
        path = message.get("path")
        if not isinstance(module, str) or module not in RUNNABLE:
            warm.send(conn, {"error": f"the warm worker runs only {', '.join(sorted(RUNNABLE))}"})
            conn.close()
            return
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(cwd, str)
                and isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
                and isinstance(path, list) and all(isinstance(p, str) for p in path)):
            warm.send(conn, {"error": "bad request: argv, cwd, env and path must be strings"})
            conn.close()
            return
        why = warm.difference(warm.fingerprint(env, sys.executable), self.fingerprint)
        if why is not None:
            warm.send(conn, {"error": f"the job's settings differ from the worker's: {why}"})
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the fork: never returns
            _child(self, conn, fds, module, argv, cwd, env, path)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done in the fork: whichever runs first
        with self.lock:
            self.children.add(pid)
            self.conns.add(conn)
            self.served += 1
            self.last_active = time.monotonic()
        try:
            warm.send(conn, {"pid": pid})
        except OSError:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        conn.settimeout(None)
        done = threading.Event()
        waiter = threading.Thread(target=self._wait, args=(conn, pid, done), daemon=True, name=f"wait-{pid}")
        with self.lock:
            self.waiters.add(waiter)
        waiter.start()
        threading.Thread(target=self._watch, args=(conn, pid, done), daemon=True, name=f"watch-{pid}").start()

    def _wait(self, conn: socket.socket, pid: int, done: threading.Event) -> None:
        _, status = os.waitpid(pid, 0)
        done.set()
        with self.lock:
            self.children.discard(pid)
            self.conns.discard(conn)
            self.last_active = time.monotonic()
        reply = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"code": os.waitstatus_to_exitcode(status)}
        with contextlib.suppress(OSError):
            warm.send(conn, reply)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()
        with self.lock:
            self.waiters.discard(threading.current_thread())

    def _watch(self, conn: socket.socket, pid: int, done: threading.Event) -> None:
        """The client closing its end before the fork ended (it was killed): end the fork."""
        with contextlib.suppress(OSError, ValueError):
            while conn.recv(64):
                pass
        if not done.is_set():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def _child(z: Zygote, conn: socket.socket, fds: list[int], module: str, argv: list[str], cwd: str,
           env: dict[str, str], path: list[str]) -> None:
    """In the fork: become the client's process and run ``python -m module argv…``; exit with its code."""
    code = 1
    try:
        os.setpgid(0, 0)
        if z.death_hook is not None:
            z.death_hook()  # the zygote dying kills the fork
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh Python: KeyboardInterrupt
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        if z.lock_fd is not None:
            os.close(z.lock_fd)
        if z.listener is not None:
            z.listener.close()
        conn.close()
        for other in list(z.conns):  # other probes' connections: theirs, not this fork's
            other.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                      line_buffering=True, write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                      line_buffering=True, write_through=True)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = path  # the client's: its PYTHONPATH and working folder, as a cold child's
        sys.argv = [module, *argv]
        atexit._clear()  # noqa: SLF001 - the zygote's exit hooks are not the job's
        try:
            entry = getattr(importlib.import_module(module), "cli_main", None)
            if callable(entry):  # preloaded: what its `if __name__ == "__main__"` runs
                result = entry()
                code = result if isinstance(result, int) else 0
            else:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the fork must never return into the server
        with contextlib.suppress(Exception):
            traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # noqa: SLF001 - what a cold child's interpreter runs at exit
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        print("usage: python -m helix_engine.eval.zygote WORKSPACE BACKEND IDLE_S", file=sys.stderr)
        return 2
    ws, backend, idle_s = Path(args[0]), args[1], float(args[2])
    if backend not in warm.BACKENDS:
        print(f"helix: the warm worker serves {' and '.join(warm.BACKENDS)}, not {backend}", file=sys.stderr)
        return 2
    # forks come from the main thread while waiter threads only block in waitpid and recv
    warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning)
    try:
        z = Zygote(ws, backend, idle_s)
    except warm.WarmError as exc:  # no folder its socket fits in (warm.runtime_dir): a sentence, not a traceback
        print(f"helix: {exc}", file=sys.stderr)
        return 1

    def stop(_signum: int, _frame: Any) -> None:
        z.stopping = True
        z.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    from helix_engine.jobs.procs import become_subreaper

    become_subreaper()  # a fork's orphans come here, to be ended (Zygote.end_orphans)
    t0 = time.monotonic()
    failed = z.preload()
    for line in failed:
        print(f"helix: the warm worker could not preload {line}", file=sys.stderr, flush=True)
    try:
        z.bind()
    except warm.WarmError as exc:
        print(f"helix: {exc}", file=sys.stderr)
        return 1
    print(f"helix: warm worker pid {os.getpid()} ready in {time.monotonic() - t0:.1f} s on {z.path} "
          f"({backend})", flush=True)
    try:
        return z.serve()
    finally:
        z.close()


if __name__ == "__main__":
    sys.exit(main())
