"""The warm worker: a fork server that has imported torch, Triton and helix's eval code, so a
probe's child starts in milliseconds instead of seconds.

Why: on an H200 an adaptive probe-bench settled its verdict after 4.6 s, of which 3.4 s was
start-up (a fresh Python, ``import torch``, Triton, helix's eval modules, then CUDA and the two
operators); the measuring itself was 1.2 s. ``helix worker start`` runs
``python -m helix_engine.eval.zygote`` as a long-lived job of the workspace (shown by ``helix
jobs``, ended by ``helix worker stop`` or ``helix jobs cancel``, its memory watched like any
job's). It imports what every eval child imports and never touches a device (CUDA does not
survive a fork), then waits on a Unix socket. A probe's job runs
``python -m helix_engine.eval.warmclient`` instead of the cold worker: the client hands the
zygote its command line, working folder, environment and its stdin/stdout/stderr, the zygote
forks, and the fork runs the same ``helix_engine.eval.worker`` main a cold child would, in a
fresh process of its own (its own process group; device, CUDA context and operators are its
own). The client relays signals to it and exits with its status, so to the job runner the
warm child is an ordinary child: cancel, timeout and the output log behave as before; when the
client dies, the zygote kills the fork.

Only probes use it. run-bench, run-test, profiles and IR capture always start cold: a file of
record comes from a process whose imports saw that job's own environment. A probe uses the
worker only when it was started with the same Python, the same helix code, the same torch and
Triton, and the same import-time environment (``fingerprint``); otherwise it runs cold and says
why. Nothing here is read from workspace files: the socket's path is derived from the
workspace's real path in a private per-user folder, and both ends check that the other runs
under the same user id (SO_PEERCRED).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import socket
import stat
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

#: Environment variables that do not change what the zygote imported (set per job or per run).
PER_JOB_ENV = frozenset({
    "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "PYTHONUNBUFFERED",
    "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
})
#: Prefixes of the environment variables that can change what importing torch or Triton does.
IMPORT_ENV_PREFIXES = ("TORCH", "PYTORCH", "TRITON", "CUDA", "NVIDIA", "CUBLAS", "CUDNN", "NCCL", "ASCEND",
                       "PYTHON", "LD_", "OMP_", "MKL_", "KMP_")
#: The modules whose origin must be the same on both sides.
ORIGIN_MODULES = ("torch", "triton", "numpy", "helix_engine")
#: Backends the worker serves: a fork of a process that imported torch_npu is not known to be safe.
BACKENDS = ("cpu", "cuda")
HEADER = struct.Struct("!I")
MAX_MESSAGE = 4 * 1024 * 1024
CONNECT_TIMEOUT_S = 2.0
#: How the note of a job that found no worker starts (probe output shows it only with --verbose).
NO_WORKER = "no warm worker is running"


class WarmError(Exception):
    """Why the warm worker cannot serve a request, as a sentence (the caller runs cold)."""


# ------------------------------------------------------------------------------ where


#: The longest socket path AF_UNIX takes (Linux's sun_path: 108 bytes, the final NUL included).
SOCKET_PATH_MAX = 107
_SOCKET_NAME_LEN = len("w-.sock") + 24  # socket_path's names: a 24-digit key


def _socket_folder() -> Path:
    """``$XDG_RUNTIME_DIR/helix`` when that is set, a folder, and short enough for the sockets in it;
    else ``<tmp>/helix-<uid>`` (a long $XDG_RUNTIME_DIR, or $TMPDIR on a cluster's scratch space, would
    make every bind fail with "AF_UNIX path too long")."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    tried: list[Path] = []
    if base and os.path.isabs(base) and Path(base).is_dir():  # relative: ignored, as the XDG spec says (the
        # worker runs in the workspace, its client anywhere: the two would name different folders)
        tried.append(Path(base) / "helix")
        if _fits(tried[-1]):
            return tried[-1]
    try:
        tmp = tempfile.gettempdir()  # raises when no temp folder is usable
    except OSError as exc:
        raise WarmError(f"no folder for the warm worker's socket: no usable temp folder ({exc.strerror or exc}); "
                        "set TMPDIR to a writable folder") from None
    tried.append(Path(tmp) / f"helix-{os.getuid()}")
    if _fits(tried[-1]):
        return tried[-1]
    raise WarmError(f"the warm worker's socket would have too long a path in {' and in '.join(map(str, tried))} "
                    f"(a Unix socket's path is at most {SOCKET_PATH_MAX} bytes); set XDG_RUNTIME_DIR or TMPDIR "
                    "to an existing, shorter folder")


def _fits(folder: Path) -> bool:
    return len(os.fsencode(folder)) + 1 + _SOCKET_NAME_LEN <= SOCKET_PATH_MAX


def runtime_dir() -> Path:
    """The per-user folder holding the sockets (`_socket_folder`), created 0700; refused when it is
    a link, not ours, or open to others."""
    folder = _socket_folder()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise WarmError(f"the warm worker's folder {folder} cannot be made ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise WarmError(f"{folder} is not a private folder of this user (a link, another owner, or open to "
                        "others); remove it and start the worker again")
    return folder


def socket_path(ws: Path, backend: str) -> Path:
    """The socket of the worker for ``ws`` (its real path) and ``backend``; short enough for AF_UNIX
    (`_socket_folder`)."""
    key = hashlib.sha256(f"{os.path.realpath(ws)}\0{backend}".encode()).hexdigest()[:24]
    return runtime_dir() / f"w-{key}.sock"


# ------------------------------------------------------------------------------ identity


def _origin(name: str) -> str | None:
    """Where ``name`` would be imported from, with that file's size and time (an upgrade in place
    keeps the path)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = os.path.realpath(spec.origin)
    try:
        info = os.stat(path)
    except OSError:
        return path
    return f"{path} {info.st_size} {info.st_mtime_ns}"


def code_digest() -> str:
    """Every helix_engine module as it is on disk now (not cached: a worker started before an edit
    runs old code, and a long-lived caller such as the cockpit must see the edit)."""
    from helix_engine.code_identity import all_modules, modules_digest_now

    return modules_digest_now("warm", all_modules())


def fingerprint(env: dict[str, str], python: str) -> dict[str, Any]:
    """What a child's imports depend on: the interpreter, helix's code, where torch and Triton come
    from, and the import-time environment (per-job variables and helix's own left out)."""
    shown = {k: v for k, v in env.items()
             if k.startswith(IMPORT_ENV_PREFIXES) and k not in PER_JOB_ENV and not k.startswith("HELIX_")}
    return {"python": os.path.abspath(python), "code": code_digest(),  # not realpath: a venv's python links its base
            "origins": {name: _origin(name) for name in ORIGIN_MODULES}, "env": dict(sorted(shown.items()))}


def difference(mine: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """What differs between two fingerprints, as the end of a sentence; None when they match."""
    if mine.get("python") != theirs.get("python"):
        return f"it runs {theirs.get('python')}, this job {mine.get('python')}"
    if mine.get("code") != theirs.get("code"):
        return "helix's code changed since it started"
    for name, origin in (mine.get("origins") or {}).items():
        if (theirs.get("origins") or {}).get(name) != origin:
            return f"it imports {name} from elsewhere"
    env_a, env_b = mine.get("env") or {}, theirs.get("env") or {}
    changed = sorted(k for k in set(env_a) | set(env_b) if env_a.get(k) != env_b.get(k))
    if changed:
        return f"the environment differs ({', '.join(changed[:4])}{' …' if len(changed) > 4 else ''})"
    return None


# ------------------------------------------------------------------------------ wire


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """One message: a 4-byte length, then JSON; ``fds`` ride with the length (SCM_RIGHTS)."""
    body = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [HEADER.pack(len(body))], fds)
    else:
        sock.sendall(HEADER.pack(len(body)))
    sock.sendall(body)


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("the other end closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """One message and the descriptors that came with it."""
    fds: list[int] = []
    if max_fds:
        head, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size, max_fds)
        if not head:
            raise ConnectionError("the other end closed the connection")
        if len(head) < HEADER.size:
            head += _exactly(sock, HEADER.size - len(head))
    else:
        head = _exactly(sock, HEADER.size)
    try:
        (size,) = HEADER.unpack(head)
        if size > MAX_MESSAGE:
            raise ConnectionError(f"a message of {size} bytes is larger than the worker accepts")
        data = json.loads(_exactly(sock, size))
        if not isinstance(data, dict):
            raise ConnectionError("the message is not a JSON object")
    except BaseException:
        for fd in fds:  # never kept when the message is refused
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    return data, fds


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end (Linux SO_PEERCRED); WarmError elsewhere."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        raise WarmError("the warm worker needs Linux (it checks who is at the other end of its socket)")
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def connect(path: Path, timeout_s: float = CONNECT_TIMEOUT_S) -> socket.socket:
    """A connection to the worker at ``path``, checked to run under this user; WarmError if none."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(str(path))
        if peer_uid(sock) != os.getuid():
            raise WarmError(f"the process at {path} runs under another user")
    except WarmError:
        sock.close()
        raise
    except OSError:
        sock.close()
        raise WarmError(f"{NO_WORKER} for this workspace and backend (start one with `helix worker start`)") from None
    return sock


def hello(ws: Path, backend: str) -> dict[str, Any]:
    """The running worker's description (pid, fingerprint, served, started); WarmError if none."""
    sock = connect(socket_path(ws, backend))
    try:
        send(sock, {"op": "hello"})
        reply, _ = receive(sock)
    except (OSError, ValueError) as exc:
        raise WarmError(f"the warm worker did not answer ({exc})") from None
    finally:
        sock.close()
    return reply


def usable(ws: Path, backend: str, env: dict[str, str], python: str | None = None) -> tuple[Path | None, str]:
    """(socket path, note) when a warm worker for ``ws``/``backend`` matches a child that would get
    ``env``; (None, why not) otherwise. Never raises."""
    if backend not in BACKENDS:
        return None, f"the warm worker serves {' and '.join(BACKENDS)}, not {backend}"
    try:
        info = hello(ws, backend)
        why = difference(fingerprint(env, python or sys.executable), info.get("fingerprint") or {})
    except WarmError as exc:
        return None, str(exc)
    if why is not None:
        return None, f"the warm worker was started with other settings: {why}; restart it (helix worker start)"
    return socket_path(ws, backend), f"warm worker pid {info.get('pid')}"


# ------------------------------------------------------------------------------ start, stop


#: How long `helix worker start` waits for the worker to answer (imports take seconds on a GPU host).
START_WAIT_S = 120.0
DEFAULT_IDLE_S = 1800.0
#: The longest a worker lives (its job's time limit); it stops sooner when idle.
LIFETIME_S = 12 * 3600.0


def serve(ws: Path, backend_name: str | None, idle_s: float = DEFAULT_IDLE_S) -> int:
    """Run the zygote as a job of ``ws`` (blocking; `helix worker start` runs this detached)."""
    from helix_engine.eval.jobrun import resolve_backend
    from helix_engine.jobs.runner import run_job

    be = resolve_backend(backend_name)
    python = os.environ.get("HELIX_PYTHON") or sys.executable
    job = run_job(ws, "warm-worker", [python, "-m", "helix_engine.eval.zygote", str(Path(ws).resolve()), be.name,
                                      f"{idle_s:g}"], cwd=Path(ws), timeout_s=LIFETIME_S, backend=be)
    return 0 if job.status in ("passed", "cancelled") else 1


def start(ws: Path, backend_name: str | None, idle_s: float = DEFAULT_IDLE_S,
          wait_s: float = START_WAIT_S) -> dict[str, Any]:
    """Start the warm worker for ``ws`` detached and wait until it answers; its ``hello``. A
    running one is returned as it is. HelixError with what to do when it does not come up."""
    import time

    from helix_engine.errors import HelixError
    from helix_engine.eval.jobrun import resolve_backend
    from helix_engine.jobs.launch import spawn_cli

    be = resolve_backend(backend_name)
    if be.name not in BACKENDS:
        raise HelixError(f"the warm worker serves {' and '.join(BACKENDS)}; on {be.name} probes start cold "
                         "(a fork of a process that imported torch_npu is not known to be safe)")
    with contextlib.suppress(WarmError):
        return dict(hello(ws, be.name), already=True)
    try:
        socket_path(ws, be.name)  # a folder the worker could not bind in: say so now, not after the wait
    except WarmError as exc:
        raise HelixError(f"{exc}, then start the worker again") from None
    spawn_cli(ws, ["worker", "serve", str(Path(ws).resolve()), "--backend", be.name, "--idle-s", f"{idle_s:g}"],
              refusal_wait_s=0.5)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with contextlib.suppress(WarmError):
            return hello(ws, be.name)
        time.sleep(0.2)
    raise HelixError(f"the warm worker did not answer within {wait_s:g} s; see its job (`helix jobs`) for why")


def stop(ws: Path, backend_name: str | None) -> dict[str, Any] | None:
    """Ask the running worker to stop; its ``hello`` from before, or None when none ran."""
    from helix_engine.eval.jobrun import resolve_backend

    name = resolve_backend(backend_name).name
    try:
        info = hello(ws, name)
    except WarmError:
        return None
    sock = connect(socket_path(ws, name))
    try:
        send(sock, {"op": "stop"})
        receive(sock)
    except (OSError, ValueError):
        pass
    finally:
        sock.close()
    return info
