"""This machine's side of a cluster job: the job folder, the Ray task, and its supervision.

Why a local supervisor: the registry stays the single truth. The job gets its folder in
``.helix/jobs/<id>/`` here (job.json, events.jsonl, output.log), written by this process as the
node streams them back, so ``helix jobs``, the cockpit's jobs pane and ``helix jobs cancel``
work on a cluster job as on a local one. The job records no local process group (its process
runs on the node): ``cancel_job`` only writes the cancel marker, which this supervisor turns
into ``ray.cancel(task, force=True)``. A task whose worker or node dies becomes ``lost``,
with a sentence.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix_engine.cluster import INSTALL_HINT, cluster_address, device_resource
from helix_engine.errors import HelixError
from helix_engine.jobs import procs
from helix_engine.jobs.events import EVENTS_NAME
from helix_engine.jobs.record import JobRecord
from helix_engine.jobs.registry import (
    OUTPUT_NAME,
    JobInfo,
    JobStatus,
    is_job_status,
    user_command,
)

_POLL_S = 0.1
#: How long after its time limit a started job may stay silent before it counts as lost.
SILENCE_MARGIN_S = 60.0
_FORWARDED_ENV_PREFIXES = ("HELIX_", "TRITON_")
_LOCAL_ONLY_ENV = {"HELIX_CLUSTER", "HELIX_JOB_DIR", "HELIX_JOB_ID", "HELIX_PYTHON", "HELIX_CLUSTER_RESOURCE"}
_connected: str | None = None
_connect_lock = threading.Lock()


def ray_module() -> Any:
    """``import ray``, or a HelixError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise HelixError(f"--cluster needs Ray, which is not installed here; {INSTALL_HINT}") from None
    return ray


def connect(address: str) -> Any:
    """The ``ray`` module, connected to ``address`` (once per process; a process that already
    runs Ray, e.g. a test that started a local head, is used as it is)."""
    global _connected
    ray = ray_module()
    with _connect_lock:
        if ray.is_initialized():
            _connected = _connected or address
            return ray
        if _use_auth_token():
            with contextlib.suppress(Exception):  # Ray reads its mode once; make it read it again
                from ray._raylet import Config  # type: ignore[attr-defined]  # Cython class, not in ray's stub

                Config.initialize("")
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR", configure_logging=True)
        except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError …
            raise HelixError(
                f"cannot connect to the Ray cluster at {address!r} ({type(exc).__name__}: {str(exc)[:300]}); start "
                "one with `ray start --head --resources '{\"NPU\": 8}'` on the head node (workers: `ray start "
                "--address HEAD:6379`), then pass --cluster HEAD:6379 (or set HELIX_CLUSTER); a cluster with "
                "token authentication (Ray's default) also needs its token here: copy the head's "
                "~/.ray/auth_token, or set RAY_AUTH_TOKEN") from None
        _connected = address
    return ray


def _use_auth_token() -> bool:
    """Send the cluster token when one is at hand (True: turned on here). Why: Ray enables
    token authentication on a cluster it starts, and writes the token to ~/.ray/auth_token,
    but a process that connects to an existing cluster sends it only with RAY_AUTH_MODE=token."""
    if os.environ.get("RAY_AUTH_MODE"):
        return False  # the user chose
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or \
            (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"
        return True
    return False


def cluster_backend(chosen: str) -> str:
    """The backend of jobs sent to the cluster: an explicit npu/cuda/cpu as given (this machine
    need not have that device); ``auto`` is npu when the cluster has NPU resources, else cuda
    when it has GPUs, else cpu."""
    if chosen != "auto":
        return chosen
    address = cluster_address()
    resources = connect(address).cluster_resources() if address else {}
    if resources.get("NPU", 0) >= 1:
        return "npu"
    if resources.get("GPU", 0) >= 1:
        return "cuda"
    return "cpu"


def _task_options(resource: str) -> dict[str, Any]:
    """One unit of the device resource; no CPU reservation for a device job (the device is
    what is scarce: an 8-card node with few cores must still run eight jobs)."""
    if resource == "CPU":
        return {"num_cpus": 1}
    if resource == "GPU":
        return {"num_cpus": 0, "num_gpus": 1}
    return {"num_cpus": 0, "resources": {resource: 1}}


def _forwarded_env(env: dict[str, str] | None) -> dict[str, str]:
    """The environment contract a job carries: helix's and Triton's variables set here, then
    the caller's (the node supplies the rest, including the visible-devices variable)."""
    out = {k: v for k, v in os.environ.items()
           if k.startswith(_FORWARDED_ENV_PREFIXES) and k not in _LOCAL_ONLY_ENV}
    out.update({str(k): str(v) for k, v in (env or {}).items()})
    return out


class _ClusterSupervisor(JobRecord):
    """One cluster job, supervised from this process."""

    def append(self, name: str, data: bytes) -> None:
        fd = os.open(self.folder / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def where(self) -> str:
        node = self.extra.get("node_ip") or self.extra.get("node") or "?"
        device = f" {self.extra.get('cluster_resource')} {self.info.device}" if self.info.device else ""
        return f"node {node}{device}"


def run_cluster_job(
    ws: Path, kind: str, module: str, request: dict[str, Any], *, argv: list[str], backend: Any, cwd: Path,
    round_name: str | None = None, env: dict[str, str] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None, timeout_s: float | None = None,
    extra_argv: list[str] | None = None, device_pool: list[str] | None = None,
) -> JobInfo:
    """Run ``python -m <module>`` on ``request`` as a job of ``ws`` on the cluster (blocking);
    write its result JSON to ``request["result_path"]`` and its outputs at their paths here."""
    from helix_engine.cluster.payload import deliver, pack, relocate
    from helix_engine.jobs import runner
    from helix_engine.jobs.settings import RSS_ENV, resolve_timeout

    address = cluster_address()
    if not address:
        raise HelixError("no cluster address: pass --cluster HOST:PORT or set HELIX_CLUSTER")
    if device_pool:
        raise HelixError("--devices picks devices of this machine; with --cluster, Ray picks a free device on the "
                         "cluster: drop --devices (or drop --cluster to use this machine's devices)")
    if module == "helix_engine.ir.worker" and request.get("mode") == "run-once":
        raise HelixError("an NPU IR capture replays the compiler on the machine that compiled the kernel, which a "
                         "cluster job cannot do from here; run `helix ir capture` on the NPU server itself")
    ray = connect(address)
    resource = device_resource(backend.name)
    total = ray.cluster_resources().get(resource, 0)
    if total < 1:
        raise HelixError(f"the cluster at {address} has no {resource} resource for a {backend.name} job; start its "
                         f"nodes with that resource (e.g. `ray start --resources '{{\"{resource}\": 8}}'`) or set "
                         "HELIX_CLUSTER_RESOURCE to a resource it has")
    limit_s, _source = resolve_timeout(timeout_s)
    parcel = pack(request, cwd, ws)
    folder = runner._create_folder(Path(ws), kind, None)
    (folder / EVENTS_NAME).touch()
    (folder / OUTPUT_NAME).touch()
    info = JobInfo(
        id=folder.name, kind=kind, argv=[str(a) for a in argv], round=round_name, backend=backend.name,
        supervisor_pid=os.getpid(), created_at=time.time(), status="queued",
        supervisor_start_ticks=procs.start_ticks(os.getpid()), host=socket.gethostname(), timeout_s=limit_s,
        cwd=str(cwd), device_pool=None, command=user_command(), cluster=address, cluster_resource=resource,
        message=f"waiting for a free {resource} on the cluster",
    )
    sup = _ClusterSupervisor(folder, info, on_event)
    sup.write()
    try:
        max_rss_mb: float | None = float(os.environ.get(RSS_ENV, "").strip())
    except ValueError:
        max_rss_mb = None  # the node's default (75% of its memory)
    spec = {
        "job_id": info.id, "kind": kind, "module": module, "extra_argv": list(extra_argv or []),
        "request": {k: v for k, v in request.items() if k != "result_path"}, "parcel": parcel.to_node(),
        "backend": backend.name, "env": _forwarded_env(env), "timeout_s": limit_s,
        "max_rss_mb": max_rss_mb, "round": round_name,
        "resource": resource, "workspace": str(Path(ws).resolve()),
    }
    with runner._ACTIVE_LOCK:
        runner._ACTIVE[info.id] = (sup.stop_event, sup.stop_reason, threading.get_ident())
    runner._hook_exit()
    from helix_engine.cluster.node import run_on_node

    task = ray.remote(run_on_node).options(max_retries=0, name=f"helix {kind} {info.id}", **_task_options(resource))
    gen = None
    try:
        with runner._interrupt_signals():
            gen = task.remote(spec)
            return _supervise(ray, gen, sup, limit_s, parcel, request, deliver, relocate)
    except BaseException as exc:
        if gen is not None:
            with contextlib.suppress(Exception):
                ray.cancel(gen, force=True)
        if sup.info.status in ("queued", "running"):
            status: JobStatus
            if isinstance(exc, (KeyboardInterrupt, runner.JobInterrupted)):
                what = "KeyboardInterrupt" if isinstance(exc, KeyboardInterrupt) else str(exc)
                status, text = "cancelled", (f"interrupted: the supervising helix process got {what}; the Ray "
                                             "task was cancelled")
            else:
                status, text = "failed", (f"helix failed while supervising the cluster job ({type(exc).__name__}: "
                                          f"{exc}); the Ray task was cancelled")
            with contextlib.suppress(Exception):
                sup.finish(status, text)
        raise
    finally:
        with runner._ACTIVE_LOCK:
            runner._ACTIVE.pop(info.id, None)


def _supervise(ray: Any, gen: Any, sup: _ClusterSupervisor, limit_s: float, parcel: Any, request: dict[str, Any],
               deliver: Callable[..., Any], relocate: Callable[..., str]) -> JobInfo:
    """Follow the task's stream until its final chunk, a cancel, or its end."""
    started: float | None = None
    cancelling: str | None = None
    cancel_deadline = 0.0
    while True:
        why = sup.stop_requested()
        if why and cancelling is None:
            cancelling = why
            cancel_deadline = time.monotonic() + 15.0
            ray.cancel(gen, force=True)
        if cancelling and time.monotonic() > cancel_deadline:
            return sup.finish("cancelled", f"{cancelling}; Ray was asked to stop the task on {sup.where()}")
        if started is not None and not cancelling and time.monotonic() > started + limit_s + SILENCE_MARGIN_S:
            ray.cancel(gen, force=True)
            return sup.finish("lost", f"{sup.where()} sent nothing for {SILENCE_MARGIN_S:g} s past the job's "
                              f"{limit_s:g} s limit; the task was cancelled. Check the node, then run it again")
        ready, _ = ray.wait([gen], timeout=_POLL_S)
        if not ready:
            continue
        try:
            chunk = ray.get(next(gen))
        except StopIteration:
            return sup.finish("failed", f"the Ray task on {sup.where()} ended without reporting the job's end; "
                              "run it again")
        except ray.exceptions.TaskCancelledError:
            return sup.finish("cancelled", f"{cancelling or 'cancelled'}; Ray stopped the task on {sup.where()}")
        except ray.exceptions.RayError as exc:
            if cancelling:
                return sup.finish("cancelled", f"{cancelling}; Ray stopped the task on {sup.where()}")
            return _lost_or_failed(ray, exc, sup)
        if "started" in chunk:
            started = time.monotonic()
            where = chunk["started"]
            sup.info.device = where.get("device")
            sup.info.started_at = time.time()
            sup.info.status = "running"
            sup.info.message = None
            sup.extra.update({k: where.get(k) for k in ("node", "node_ip", "node_id", "task_pid")})
            sup.write()
        if chunk.get("events"):
            sup.append(EVENTS_NAME, chunk["events"])
        if chunk.get("output"):
            sup.append(OUTPUT_NAME, chunk["output"])
        if chunk.get("pid") is not None:
            sup.extra["node_pid"] = chunk["pid"]
            sup.write()
        sup.pump()
        if "final" in chunk:
            return _conclude(sup, chunk["final"], parcel, request, deliver, relocate)


def _lost_or_failed(ray: Any, exc: Exception, sup: _ClusterSupervisor) -> JobInfo:
    """A task that died: its worker or node gone is ``lost``; an error raised in the task is ``failed``."""
    ex = ray.exceptions
    gone = tuple(getattr(ex, n) for n in ("WorkerCrashedError", "NodeDiedError", "OwnerDiedError",
                                           "ObjectLostError", "LocalRayletDiedError", "RaySystemError")
                 if hasattr(ex, n))
    if isinstance(exc, gone):
        return sup.finish("lost", f"the Ray worker running the job on {sup.where()} died ({type(exc).__name__}: the "
                          "process was killed or its node went away) before the job ended; its cases so far are "
                          "in events.jsonl. Run it again")
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()[-1] if str(cause).strip() else type(cause).__name__
    return sup.finish("failed", f"the job's Ray task failed on {sup.where()}: {text[:400]}")


def _conclude(sup: _ClusterSupervisor, final: dict[str, Any], parcel: Any, request: dict[str, Any],
              deliver: Callable[..., Any], relocate: Callable[..., str]) -> JobInfo:
    """The node's final record → the result JSON, outputs and job.json here."""
    from helix_engine.workspace.files import atomic_write_text

    if final.get("result") is not None and request.get("result_path"):
        atomic_write_text(Path(request["result_path"]), relocate(final["result"], parcel, str(final.get("root"))))
    try:
        deliver(parcel, final.get("outputs") or {})
    except OSError as exc:
        return sup.finish("failed", f"the job ran on {sup.where()} but its outputs cannot be written here "
                          f"({exc.strerror or exc}); make the folder writable and run it again")
    node_job = final.get("job")
    if not isinstance(node_job, dict):
        return sup.finish("failed", f"the node could not run the job on {sup.where()}: {final.get('error')}")
    if node_job.get("peak_memory_mb") is not None:
        sup.extra["peak_memory_mb"] = node_job["peak_memory_mb"]
    if node_job.get("started_at"):
        sup.info.started_at = node_job["started_at"]
    status = node_job.get("status")
    return sup.finish(status if is_job_status(status) else "failed", node_job.get("message"), node_job.get("exit_code"))
