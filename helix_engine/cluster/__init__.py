"""Jobs on a Ray cluster (issue 15): ``--cluster ADDRESS`` / ``HELIX_CLUSTER``.

Why Ray: it already schedules tasks on custom resources (one ``NPU``, ``GPU`` or other device
per job) across machines, and knows Ascend NPUs as an accelerator type; helix builds no
scheduler of its own. The job registry stays the single truth: a cluster job has its folder
in ``.helix/jobs/`` like a local one (cluster/dispatch.py supervises it from this machine),
and the node runs the same worker code under the same runner (cluster/node.py).

This package imports ray only inside functions, and only when a cluster address is set.
"""

from __future__ import annotations

import os

CLUSTER_ENV = "HELIX_CLUSTER"
RESOURCE_ENV = "HELIX_CLUSTER_RESOURCE"
#: The Ray resource a job of each backend asks one unit of (HELIX_CLUSTER_RESOURCE overrides).
BACKEND_RESOURCES: dict[str, str] = {"npu": "NPU", "cuda": "GPU", "cpu": "CPU"}
INSTALL_HINT = "install Ray with `python3 -m pip install -e '.[cluster]'` (or `pip install ray`)"

_address: str | None = None


def use_cluster(address: str | None) -> None:
    """Send this process's jobs to the Ray cluster at ``address`` (None: back to the env/local)."""
    global _address
    _address = address.strip() if isinstance(address, str) and address.strip() else None


def cluster_address() -> str | None:
    """The cluster jobs go to: ``--cluster`` of this process, else ``$HELIX_CLUSTER``, else None."""
    return _address or os.environ.get(CLUSTER_ENV, "").strip() or None


def device_resource(backend: str) -> str:
    """The Ray resource one job of ``backend`` asks for: ``$HELIX_CLUSTER_RESOURCE``, else NPU,
    GPU or CPU (a CPU-backend job on a test cluster may ask for a custom ``NPU`` resource)."""
    return os.environ.get(RESOURCE_ENV, "").strip() or BACKEND_RESOURCES.get(backend, "CPU")
