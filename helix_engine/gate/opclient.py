"""The supervisor's handle on one operator process: a private copy of the operator, a scrubbed
environment, two pipes, and calls that raise ``OperatorFailed`` when the operator does.

The copy: the operator file and the Python files beside it (an operator may import a helper
module of its round) go to a fresh folder outside the workspace, which is the process's working
directory and first import path; the process is told no workspace path, no job id and no command
name, so it cannot tell a test from a bench, and whatever it writes is not a file of record.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.gate import wire
from helix_engine.workspace.siblings import round_digests, sibling_files

#: variables an operator process keeps (beside the backend's own and the toolchains')
_KEEP_PREFIXES = ("TRITON_", "CUDA_", "ASCEND_", "NPU_", "TORCH_", "LD_", "OMP_", "MKL_", "OPENBLAS_",
                  "NVIDIA_", "ROCM_", "HIP_", "CC", "CXX", "PYTORCH_")
_KEEP = {"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED",
         "HELIX_DEVICE", "HELIX_BACKEND", "HELIX_DEBUG", "CC", "CXX", "TERM"}


class OperatorFailed(Exception):
    """The operator raised (or its process died); ``traceback`` holds its own frames."""

    def __init__(self, message: str, traceback: str = "", user_code_error: dict[str, Any] | None = None,
                 died: bool = False) -> None:
        super().__init__(message)
        self.traceback = traceback
        self.user_code_error = user_code_error
        #: the process ended (a signal, an exit) rather than raising
        self.died = died


@dataclass
class PrivateCopy:
    folder: Path
    operator: Path
    sha256: str
    #: the sibling files copied, name → sha256
    siblings: dict[str, str] = field(default_factory=dict)
    #: every file of the operator's folder as it was when the process started (workspace/siblings.round_digests)
    round_files: dict[str, str] = field(default_factory=dict)


def private_copy(operator_file: Path, label: str) -> PrivateCopy:
    operator_file = Path(operator_file).resolve()
    round_files = round_digests(operator_file)  # before the process can read any of them
    folder = Path(tempfile.mkdtemp(prefix=f"helix-gate-{label}-"))
    siblings: dict[str, str] = {}
    for src in sibling_files(operator_file):
        data = src.read_bytes()
        (folder / src.name).write_bytes(data)
        siblings[src.name] = hashlib.sha256(data).hexdigest()
    data = operator_file.read_bytes()
    target = folder / operator_file.name
    target.write_bytes(data)
    for p in folder.iterdir():
        p.chmod(0o444)
    folder.chmod(0o555)
    return PrivateCopy(folder, target, hashlib.sha256(data).hexdigest(), siblings, round_files)


def operator_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    source = dict(os.environ if base is None else base)
    env = {k: v for k, v in source.items() if k in _KEEP or k.startswith(_KEEP_PREFIXES)}
    repo = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if repo not in paths:
        env["PYTHONPATH"] = os.pathsep.join([repo, *paths])
    env["PYTHONUNBUFFERED"] = "1"
    return env


class OperatorClient:
    """One operator process. ``label`` is "candidate" or "reference" (the supervisor's name for
    it; the process itself is never told)."""

    def __init__(self, label: str, operator_file: Path, backend: Any) -> None:
        """Start the process and send it the operator to import; ``ready()`` waits for the answer
        (so that several processes start side by side: ``start_clients``)."""
        self.label = label
        self.backend_name: str = backend.name
        self.device_str: str = backend.device_str
        self.copy = private_copy(operator_file, label)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "helix_engine.gate.opproc", str(to_child_r), str(from_child_w), backend.name,
             backend.device_str],
            pass_fds=(to_child_r, from_child_w), cwd=str(self.copy.folder), env=operator_environment(),
            stdin=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.wfd, self.rfd = to_child_w, from_child_r
        self.sent_steps = 0
        self.original = Path(operator_file).resolve()
        self.hello: dict[str, Any] | None = None
        self.closed = False
        with contextlib.suppress(wire.WireError):  # a process that died is reported by ready()
            wire.send(self.wfd, {"cmd": "hello", "operator_file": str(self.copy.operator)})

    def ready(self) -> dict[str, Any]:
        """The answer to hello: the operator imported (raises what importing it raised)."""
        if self.hello is not None:
            return self.hello
        try:
            self.hello = self._answer()[0]
        except OperatorFailed as exc:
            self.close()
            if exc.user_code_error is not None:  # named by the user's file, not by the private copy
                from helix_engine.eval.usercode import UserCodeError

                raise UserCodeError.from_exception_text(exc.user_code_error, self.copy.operator,
                                                        self.original) from None
            raise
        return self.hello

    def ask(self, msg: dict[str, Any], blob: bytes = b"") -> dict[str, Any]:
        reply, _ = self.ask_blob(msg, blob)
        return reply

    def ask_blob(self, msg: dict[str, Any], blob: bytes = b"") -> tuple[dict[str, Any], bytes]:
        self.ready()
        try:
            wire.send(self.wfd, msg, blob)
        except wire.WireError:
            pass  # the process is gone: its ending is read below
        return self._answer()

    def _answer(self) -> tuple[dict[str, Any], bytes]:
        try:
            reply, out = wire.recv(self.rfd)
        except wire.WireError:
            code = self.proc.poll()
            if code is None:
                with contextlib.suppress(Exception):
                    code = self.proc.wait(timeout=2.0)
            raise OperatorFailed(f"the {self.label} operator's process {_ending(code)}", died=True) from None
        if reply.get("tampered"):  # the gate's own code in the process was rewritten (put back: opproc.serve)
            names = [str(n) for n in reply["tampered"]][:6]
            raise OperatorFailed(f"the {self.label}'s process rewrote the gate's own code in it ({', '.join(names)}): "
                                 "an operator that changes its harness's timer, fetch or checks is not measured")
        if not reply.get("ok"):
            shown = str(self.copy.operator)
            original = getattr(self, "original", None)

            def named(text: str) -> str:  # the user's file, not the private copy
                return text.replace(shown, str(original)) if original is not None else text

            raise OperatorFailed(named(str(reply.get("error") or "the operator failed")),
                                 named(str(reply.get("traceback") or "")),
                                 reply.get("user_code_error") if isinstance(reply.get("user_code_error"), dict) else None)
        return reply, out

    def timed_round_trip(self, msg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(seconds from sending ``msg`` to its answer, measured here; the answer)."""
        start = time.perf_counter()
        reply = self.ask(msg)
        return time.perf_counter() - start, reply

    def request_exit(self) -> None:
        """Ask the process to let go of what it holds (shared device memory) and end at once."""
        if not self.closed:
            with contextlib.suppress(Exception):
                wire.send(self.wfd, {"cmd": "exit"})

    def close(self) -> None:
        """End the process: asked to exit (``os._exit`` after letting go of shared memory: its
        exit handlers are the operator's code, and torch's teardown takes a second), then killed
        if it has not within a second. Closing twice does nothing."""
        if self.closed:
            return
        self.request_exit()
        self.closed = True
        for fd in (self.wfd, self.rfd):
            with contextlib.suppress(Exception):
                os.close(fd)
        try:
            self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(Exception):
                self.proc.kill()
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=10.0)
        _remove(self.copy.folder)


def start_clients(files: dict[str, Path], backend: Any, ready: bool = True) -> dict[str, OperatorClient]:
    """One operator process per entry, started side by side; with ``ready``, each imported and
    ready (``ready_all``). If one fails, all are closed."""
    clients: dict[str, OperatorClient] = {}
    try:
        for label, path in files.items():
            clients[label] = OperatorClient(label, path, backend)
        if ready:
            ready_all(clients)
    except BaseException:
        close_all(clients)
        raise
    return clients


def ready_all(clients: dict[str, OperatorClient]) -> None:
    try:
        for client in clients.values():
            client.ready()
    except BaseException:
        close_all(clients)
        raise


def close_all(clients: dict[str, OperatorClient]) -> None:
    for client in clients.values():
        client.request_exit()  # all of them at once, then each waited for
    for client in clients.values():
        client.close()
def _ending(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code} before answering (sys.exit or os._exit in the operator?)"


def _remove(folder: Path) -> None:
    with contextlib.suppress(Exception):
        folder.chmod(0o755)
        for p in folder.iterdir():
            with contextlib.suppress(Exception):
                p.chmod(0o644)
    shutil.rmtree(folder, ignore_errors=True)
