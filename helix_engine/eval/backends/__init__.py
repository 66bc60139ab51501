"""Backend choice: ``--backend auto|npu|cuda|cpu`` (env ``HELIX_BACKEND``).

auto picks npu when torch_npu imports and an NPU is present, else cuda when
``torch.cuda.is_available()``, else cpu. Detection runs in a short subprocess probe so the
helix process never imports torch or torch_npu (a broken stack cannot crash it); the result
is cached per process and, for a few minutes, in a small cache file keyed by the python
executable and the environment that matters.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from helix_engine.errors import HelixError
from helix_engine.eval.backends.base import Backend
from helix_engine.eval.backends.cpu import CpuBackend
from helix_engine.eval.backends.cuda import CudaBackend
from helix_engine.eval.backends.npu import NpuBackend
from helix_engine.isolated import NEUTRAL_CWD, code_argv

BACKEND_NAMES: tuple[str, ...] = ("npu", "cuda", "cpu")
CHOICES: tuple[str, ...] = ("auto", *BACKEND_NAMES)
BACKEND_ENV = "HELIX_BACKEND"
PROBE_TIMEOUT_S = 90.0
CACHE_TTL_S = 600.0
_ADAPTERS: dict[str, type[Backend]] = {"npu": NpuBackend, "cuda": CudaBackend, "cpu": CpuBackend}
_ENV_KEYS = (
    "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PYTHONPATH",
    "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "HIP_VISIBLE_DEVICES",
)

# The probe runs in a child interpreter; it prints one JSON object as its last line.
_PROBE = r'''
import json, os, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
def ver(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None
out["triton_version"] = ver("triton")
try:
    import torch
    out["torch_version"] = torch.__version__
except BaseException as exc:
    out["torch_error"] = f"{type(exc).__name__}: {exc}"[:300]
    torch = None
if torch is not None:
    try:
        import torch_npu
        out["torch_npu_version"] = getattr(torch_npu, "__version__", ver("torch_npu"))
        n = int(torch.npu.device_count())
        out["npu_count"] = n
        out["npu_devices"] = [str(torch.npu.get_device_name(i)) for i in range(n)]
    except ModuleNotFoundError as exc:
        out["npu_error"] = "torch_npu is not installed" if exc.name == "torch_npu" else f"{exc}"
    except BaseException as exc:
        out["npu_error"] = f"torch_npu failed: {type(exc).__name__}: {exc}"[:300]
    try:
        ok = bool(torch.cuda.is_available())
        out["cuda_available"] = ok
        out["cuda_version"] = torch.version.cuda
        if ok:
            n = int(torch.cuda.device_count())
            out["cuda_count"] = n
            out["cuda_devices"] = [str(torch.cuda.get_device_name(i)) for i in range(n)]
    except BaseException as exc:
        out["cuda_error"] = f"{type(exc).__name__}: {exc}"[:300]
print(json.dumps(out))
'''


class BackendReport(BaseModel):
    """What the probe found, which backend auto picks, and why the others were not picked."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    picked: str
    python: str | None = None
    executable: str | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    torch_npu_version: str | None = None
    cuda_version: str | None = None
    devices: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    probe_error: str | None = None
    probed_at: float = 0.0


_CACHE: dict[str, BackendReport] = {}

#: What to install, per backend; the README's "Install" section says the same.
INSTALL_TORCH = (
    "install the torch build for your backend (README, \"Install\"): CPU: `python3 -m pip install torch==2.13.0 "
    "--index-url https://download.pytorch.org/whl/cpu` then `python3 -m pip install -e '.[cpu]'`; CUDA: "
    "`python3 -m pip install -e '.[cuda]'`; Ascend: the torch your torch-npu release names, then "
    "`python3 -m pip install -e '.[npu]'`"
)


def torch_missing(report: BackendReport) -> str | None:
    """Why no job can run with this Python (torch does not import: helix does not install it, since
    the right build differs per backend), with what to install; None when torch imports."""
    if report.torch_version is not None or report.probe_error is not None:
        return None  # a probe that crashed or hung says so itself; torch may well be there
    reason = report.reasons.get("cuda", "torch does not import")
    return f"{reason} in {report.executable or 'this Python'}; {INSTALL_TORCH}"


def get_backend(name: str) -> Backend:
    """The adapter for an explicit name, no detection (used inside workers)."""
    if name not in _ADAPTERS:
        raise HelixError(f"unknown backend {name!r}; use one of {', '.join(CHOICES)}")
    return _ADAPTERS[name]()


def _cache_key(python: str) -> str:
    parts = [python, *(f"{k}={os.environ.get(k, '')}" for k in _ENV_KEYS)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _cache_file(key: str) -> Path | None:
    from helix_engine.workspace.sealed import user_cache_folder_made  # the cache key's folder, made private

    folder = user_cache_folder_made()
    return folder / f"backend-probe-{key}.json" if folder is not None else None


def _run_probe(python: str) -> dict[str, Any]:
    """Run the probe from a neutral folder with the cwd off ``sys.path`` (never a workspace's
    ``torch.py``); it keeps PYTHONPATH, which a device stack may need."""
    env = dict(os.environ)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.pop("TRITON_INTERPRET", None)
    try:
        proc = subprocess.Popen(
            code_argv(python, _PROBE), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, stdin=subprocess.DEVNULL, start_new_session=True, cwd=NEUTRAL_CWD,
        )
    except OSError as exc:
        return {"probe_error": f"could not start {python} ({exc.strerror or exc})"}
    try:
        stdout, stderr = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)  # the probe and anything it started
        proc.communicate()
        return {"probe_error": f"the backend probe did not finish within {PROBE_TIMEOUT_S:.0f} s "
                "(a device driver may be hung)"}
    lines = [ln for ln in (stdout or "").strip().splitlines() if ln.startswith("{")]
    if not lines:
        tail = (stderr or "").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return {"probe_error": f"the backend probe crashed ({tail[0][:200]})"}
    try:
        data = json.loads(lines[-1])
    except ValueError:
        return {"probe_error": "the backend probe printed unreadable output"}
    return data if isinstance(data, dict) else {"probe_error": "unexpected probe output"}


def _build_report(data: dict[str, Any]) -> BackendReport:
    reasons: dict[str, str] = {}
    devices: dict[str, list[str]] = {"cpu": ["cpu"]}
    torch_missing = data.get("torch_error") or data.get("probe_error")
    if torch_missing:
        why = data.get("probe_error") or f"torch does not import ({data['torch_error']})"
        reasons["npu"] = why
        reasons["cuda"] = why
    else:
        if data.get("npu_error"):
            reasons["npu"] = str(data["npu_error"])
        elif not data.get("npu_count"):
            reasons["npu"] = "torch_npu imports but no NPU is present (device_count() is 0)"
        else:
            devices["npu"] = list(data.get("npu_devices") or [])
        if data.get("cuda_error"):
            reasons["cuda"] = f"torch.cuda failed: {data['cuda_error']}"
        elif not data.get("cuda_available"):
            reasons["cuda"] = "torch.cuda.is_available() is False"
        else:
            devices["cuda"] = list(data.get("cuda_devices") or [])
    picked = next(n for n in BACKEND_NAMES if n not in reasons)
    for name in BACKEND_NAMES:
        if name != picked and name not in reasons:
            reasons[name] = f"available, but auto prefers {picked}"
    fields = {k: data.get(k) for k in (
        "python", "executable", "torch_version", "triton_version", "torch_npu_version",
        "cuda_version", "probe_error",
    )}
    return BackendReport(picked=picked, devices=devices, reasons=reasons, probed_at=time.time(), **fields)


def detect(*, refresh: bool = False, python: str | None = None) -> BackendReport:
    """Probe the installed stack (cached in-process, and on disk for CACHE_TTL_S)."""
    python = python or os.environ.get("HELIX_PYTHON") or sys.executable
    key = _cache_key(python)
    if not refresh and key in _CACHE:
        return _CACHE[key]
    path = _cache_file(key)
    use_file = path is not None and os.environ.get("HELIX_BACKEND_CACHE", "1") not in ("0", "false", "no")
    if use_file and path is not None and not refresh:
        try:
            report = BackendReport.model_validate_json(path.read_text(encoding="utf-8"))
            if 0 <= time.time() - report.probed_at < CACHE_TTL_S:
                _CACHE[key] = report
                return report
        except (OSError, ValueError):
            pass
    report = _build_report(_run_probe(python))
    _CACHE[key] = report
    if use_file and path is not None and not report.probe_error:
        try:
            from helix_engine.workspace.files import atomic_write_text

            atomic_write_text(path, report.model_dump_json())
        except OSError:
            pass
    return report


def select_backend(name: str | None = None) -> Backend:
    """The backend to run on: ``name``, else ``$HELIX_BACKEND``, else auto-detection.

    An explicit npu/cuda that the probe finds unusable is a HelixError naming the reason;
    an explicit cpu needs no probe.
    """
    chosen = (name or os.environ.get(BACKEND_ENV) or "auto").strip().lower()
    if chosen not in CHOICES:
        raise HelixError(
            f"unknown backend {chosen!r} (from {'--backend' if name else BACKEND_ENV}); "
            f"use one of {', '.join(CHOICES)}"
        )
    if chosen == "cpu":
        return CpuBackend()
    from helix_engine.cluster import cluster_address

    if cluster_address():  # the jobs run on the cluster's nodes: this machine's devices do not matter
        from helix_engine.cluster.dispatch import cluster_backend

        return get_backend(cluster_backend(chosen))
    report = detect()
    if chosen == "auto":
        return get_backend(report.picked)
    if chosen in report.devices:
        return get_backend(chosen)
    raise HelixError(
        f"the {chosen} backend is not usable here: {report.reasons.get(chosen, 'unknown reason')}; "
        "run `helix backend` for details, or use --backend cpu"
    )


__all__ = [
    "BACKEND_NAMES", "CHOICES", "Backend", "BackendReport", "CpuBackend", "CudaBackend",
    "NpuBackend", "INSTALL_TORCH", "detect", "get_backend", "select_backend", "torch_missing",
]
