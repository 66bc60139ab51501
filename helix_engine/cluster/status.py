"""``helix cluster status``: the cluster's nodes, their devices free and busy, and which helix
job runs where.

Why not Ray's state API: it needs the dashboard (``ray[default]``), which a plain ``ray``
install lacks. Nodes and totals come from ``ray.nodes()``, what is free from the per-node
available resources, and helix's own jobs from the entries their tasks keep, with a heartbeat,
in the cluster's key-value store (cluster/node.py).
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from helix_engine.cluster.node import HEARTBEAT_S, KV_NAMESPACE, KV_PREFIX

#: An entry not refreshed for this long belongs to a task that is gone (killed, node lost).
STALE_AFTER_S = 6 * HEARTBEAT_S
_NOT_DEVICES = ("memory", "object_store_memory", "node:", "accelerator_type:", "bundle_group")


class DeviceCount(BaseModel):
    model_config = ConfigDict(defer_build=True)

    resource: str
    total: float
    free: float

    @property
    def busy(self) -> float:
        return max(0.0, self.total - self.free)


class ClusterJob(BaseModel):
    """A helix job running on the cluster, as its task announced it."""

    model_config = ConfigDict(defer_build=True)

    job_id: str
    kind: str | None = None
    workspace: str | None = None
    node_id: str | None = None
    node: str | None = None
    node_ip: str | None = None
    resource: str | None = None
    device: str | None = None
    since: float | None = None
    seen: float | None = None


class NodeStatus(BaseModel):
    model_config = ConfigDict(defer_build=True)

    node_id: str
    address: str | None = None
    hostname: str | None = None
    alive: bool
    devices: list[DeviceCount] = Field(default_factory=list)
    jobs: list[ClusterJob] = Field(default_factory=list)


class ClusterStatus(BaseModel):
    model_config = ConfigDict(defer_build=True)

    address: str
    nodes: list[NodeStatus] = Field(default_factory=list)
    checked_at: float

    @property
    def jobs(self) -> list[ClusterJob]:
        return [job for node in self.nodes for job in node.jobs]

    def to_json(self) -> dict[str, Any]:
        out = self.model_dump(mode="json")
        for node, shown in zip(self.nodes, out["nodes"], strict=True):
            for device, row in zip(node.devices, shown["devices"], strict=True):
                row["busy"] = device.busy
        return out

    def to_text(self) -> str:
        alive = sum(1 for n in self.nodes if n.alive)
        lines = [(f"cluster {self.address}: {len(self.nodes)} node(s), {alive} alive, "
                  f"{len(self.jobs)} helix job(s) running")]
        for node in self.nodes:
            name = node.hostname or node.address or node.node_id[:12]
            where = f" ({node.address})" if node.address and node.address != name else ""
            devices = " · ".join(f"{d.resource} {_num(d.free)} free, {_num(d.busy)} busy of {_num(d.total)}"
                                 for d in node.devices) or "no devices"
            lines.append(f"node {name}{where} {'alive' if node.alive else 'DEAD'}: {devices}")
            for job in node.jobs:
                device = f"{job.resource} {job.device}" if job.device else (job.resource or "?")
                age = f"{time.time() - job.since:.0f} s" if job.since else "?"
                lines.append(f"  {device:<8} {job.kind or '?':<12} {job.job_id}  {job.workspace or '?'}  {age}")
        if not self.nodes:
            lines.append("no nodes: start one with `ray start --head --resources '{\"NPU\": 8}'`")
        return "\n".join(lines)


def _num(value: float) -> str:
    return f"{value:g}"


def _devices(total: dict[str, float], free: dict[str, float]) -> list[DeviceCount]:
    names = sorted(k for k in total if not k.startswith(_NOT_DEVICES))
    order = {"NPU": 0, "GPU": 1}  # devices first, CPU last
    names.sort(key=lambda k: (order.get(k, 2 if k != "CPU" else 3), k))
    return [DeviceCount(resource=k, total=float(total[k]), free=float(free.get(k, 0.0))) for k in names]


def _available_per_node(ray: Any, node_ids: list[str]) -> dict[str, dict[str, float]]:
    """Free resources of each node (Ray keeps this per node; its public call sums the cluster)."""
    with contextlib.suppress(Exception):
        from ray._private import state

        found = state.available_resources_per_node()
        if isinstance(found, dict) and found:
            return {str(k): dict(v) for k, v in found.items()}
    if len(node_ids) == 1:
        return {node_ids[0]: dict(ray.available_resources())}
    return {}


def running_jobs(now: float | None = None) -> list[ClusterJob]:
    """helix jobs that announced themselves and refreshed their entry recently."""
    from ray.experimental import internal_kv

    now = time.time() if now is None else now
    found: list[ClusterJob] = []
    keys = internal_kv._internal_kv_list(KV_PREFIX.encode(), namespace=KV_NAMESPACE) or []
    for key in keys:
        raw = internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)
        with contextlib.suppress(ValueError, TypeError):
            data = json.loads(raw)
            job = ClusterJob.model_validate(data)
            if job.seen is not None and now - job.seen <= STALE_AFTER_S:
                found.append(job)
    return sorted(found, key=lambda j: (j.since or 0.0, j.job_id))


def cluster_status(address: str) -> ClusterStatus:
    """Ask the cluster at ``address`` (connects once per process)."""
    from helix_engine.cluster.dispatch import connect

    ray = connect(address)
    raw = ray.nodes()
    ids = [str(n.get("NodeID")) for n in raw]
    free = _available_per_node(ray, ids)
    jobs = running_jobs()
    nodes: list[NodeStatus] = []
    for entry in raw:
        node_id = str(entry.get("NodeID"))
        alive = bool(entry.get("Alive"))
        nodes.append(NodeStatus(
            node_id=node_id, address=entry.get("NodeManagerAddress"), hostname=entry.get("NodeManagerHostname"),
            alive=alive, devices=_devices(entry.get("Resources") or {}, free.get(node_id, {}) if alive else {}),
            jobs=[j for j in jobs if j.node_id == node_id]))
    nodes.sort(key=lambda n: (not n.alive, n.hostname or "", n.node_id))
    return ClusterStatus(address=address, nodes=nodes, checked_at=time.time())
