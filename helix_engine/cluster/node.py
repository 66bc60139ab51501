"""The node side of a cluster job: a Ray task that runs the job under helix's own runner.

Why the same runner: the worker child (``python -m helix_engine.eval.worker`` and the profile
and IR workers) gets the same environment contract, time and memory limits, process group
and output tee as on a local machine, because ``jobs.runner.run_job`` starts it, here in a
temporary folder on the node. This generator task streams what the job writes (events.jsonl
lines, output.log bytes) back to the supervising helix process while it runs, then yields the
job's final record, its result JSON and its output files.

Each running job also announces itself in Ray's key-value store (namespace ``helix``), with a
heartbeat, so ``helix cluster status`` can say which helix job runs where.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helix_engine.cluster.payload import Parcel, collect, materialize

KV_NAMESPACE = "helix"
KV_PREFIX = "job/"
HEARTBEAT_S = 5.0
STREAM_EVERY_S = 0.1
CHUNK_BYTES = 1 << 20
_TMP_PREFIX = "helix-cluster-"
_STALE_S = 24 * 3600.0


class _Tail:
    """New bytes of one growing file (whole lines only, when ``lines``)."""

    def __init__(self, path: Path, lines: bool) -> None:
        self.path, self.lines, self.offset = path, lines, 0

    def read(self) -> bytes:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(CHUNK_BYTES)
        except OSError:
            return b""
        if self.lines:
            end = data.rfind(b"\n")
            data = data[: end + 1] if end >= 0 else b""
        self.offset += len(data)
        return data


def _remove_stale_folders() -> None:
    """Temp folders of jobs whose task was killed (a forced cancel skips ``finally``)."""
    base = Path(tempfile.gettempdir())
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in base.glob(_TMP_PREFIX + "*"):
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink() and now - entry.stat().st_mtime > _STALE_S:
                    shutil.rmtree(entry, ignore_errors=True)


def _announce(job_id: str, entry: dict[str, Any] | None) -> None:
    """Put (or, with None, delete) this job's entry in the cluster's key-value store."""
    with contextlib.suppress(Exception):  # status information only: never fail a job for it
        from ray.experimental import internal_kv

        key = (KV_PREFIX + job_id).encode()
        if entry is None:
            internal_kv._internal_kv_del(key, namespace=KV_NAMESPACE)
        else:
            internal_kv._internal_kv_put(key, json.dumps(entry).encode(), overwrite=True,
                                         namespace=KV_NAMESPACE)


def _where(resource: str) -> dict[str, Any]:
    """This node and the device Ray gave the task (accelerator ids of ``resource``, if any)."""
    import ray

    ctx = ray.get_runtime_context()
    ids: list[str] = []
    with contextlib.suppress(Exception):
        ids = [str(i) for i in ctx.get_accelerator_ids().get(resource, [])]
    ip = None
    with contextlib.suppress(Exception):
        ip = ray.util.get_node_ip_address()
    return {"node": socket.gethostname(), "node_ip": ip, "node_id": ctx.get_node_id(),
            "device": ",".join(ids) or None, "task_pid": os.getpid()}


def run_on_node(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The Ray task (a generator): run one helix job on this node and stream it back.

    ``spec``: job_id, kind, module, extra_argv, request, parcel, backend, env, timeout_s,
    max_rss_mb, round, resource, workspace (a label for status). Yields ``{"started": …}``
    once, then ``{"events": bytes, "output": bytes, "pid": int}`` chunks while the job runs,
    then ``{"final": {"job": job.json, "result": text, "outputs": {name: bytes}, "root": str}}``.
    """
    from helix_engine.jobs.events import EVENTS_NAME
    from helix_engine.jobs.registry import OUTPUT_NAME, job_dir

    _remove_stale_folders()
    tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX))
    job_id = str(spec["job_id"])
    where = _where(str(spec["resource"]))
    entry = {**where, "job_id": job_id, "kind": spec.get("kind"), "workspace": spec.get("workspace"),
             "resource": spec.get("resource"), "since": time.time(), "seen": time.time()}
    holder: dict[str, Any] = {}
    runner_thread: threading.Thread | None = None
    try:
        parcel: Parcel = spec["parcel"]
        root = tmp / "files"
        request, cwd = materialize(parcel, dict(spec["request"]), root)
        request["result_path"] = str(tmp / "result.json")
        request_path = tmp / "request.json"
        request_path.write_text(json.dumps(request), encoding="utf-8")
        node_ws = tmp / "job"
        folder = job_dir(node_ws, job_id)
        argv = [sys.executable, "-m", str(spec["module"]), str(request_path), *spec.get("extra_argv", [])]
        _announce(job_id, entry)
        yield {"started": where}

        def run() -> None:
            from helix_engine.jobs.runner import run_job

            try:
                holder["job"] = run_job(
                    node_ws, str(spec["kind"]), argv, round_name=spec.get("round"), cwd=cwd, env=spec.get("env"),
                    timeout_s=spec.get("timeout_s"), backend=str(spec["backend"]), max_rss_mb=spec.get("max_rss_mb"),
                    job_id=job_id, expect_result=True)
            except BaseException as exc:  # noqa: BLE001 - reported to the supervisor as a sentence
                holder["error"] = f"{type(exc).__name__}: {exc}"

        runner_thread = threading.Thread(target=run, name=f"helix-job-{job_id}", daemon=True)
        runner_thread.start()
        events, output = _Tail(folder / EVENTS_NAME, True), _Tail(folder / OUTPUT_NAME, False)
        pid_sent = False
        beat = time.monotonic()
        while True:
            alive = runner_thread.is_alive()
            chunk: dict[str, Any] = {}
            for name, tail in (("events", events), ("output", output)):
                data = tail.read()  # at most CHUNK_BYTES a tick; the rest comes next tick
                if data:
                    chunk[name] = data
            if not pid_sent:
                pid = _child_pid(folder)
                if pid is not None:
                    chunk["pid"] = pid
                    pid_sent = True
            if chunk:
                yield chunk
            if not alive:
                break
            if time.monotonic() - beat > HEARTBEAT_S:
                beat = time.monotonic()
                _announce(job_id, {**entry, "seen": time.time()})
            time.sleep(STREAM_EVERY_S)
        result = None
        with contextlib.suppress(OSError):
            result = (tmp / "result.json").read_text(encoding="utf-8")
        job = holder["job"].to_json() if "job" in holder else None
        yield {"final": {"job": job, "error": holder.get("error"), "result": result,
                         "outputs": collect(parcel, root), "root": str(root)}}
    finally:
        if runner_thread is not None and runner_thread.is_alive():  # cancelled (not forced): stop the job
            from helix_engine.jobs.runner import stop_all_jobs

            stop_all_jobs("the Ray task was cancelled")
            runner_thread.join(30)
        _announce(job_id, None)
        shutil.rmtree(tmp, ignore_errors=True)


def _child_pid(folder: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        pid = json.loads((folder / "job.json").read_text(encoding="utf-8")).get("pid")
        return pid if isinstance(pid, int) else None
    return None
