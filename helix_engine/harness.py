"""The small public API that harness files (bench_*.py, test_*.py) may import.

One harness runs on every backend: instead of hard-coding ``device="npu"`` it asks
``device()``. The job runner tells the child which backend it chose through ``HELIX_DEVICE``;
outside a helix job we detect (npu, then cuda, then cpu). Upstream harnesses that hard-code
``"npu"`` keep working on NPU because nothing here rewrites them.
"""

from __future__ import annotations

import os

_DEVICES = ("npu", "cuda", "cpu")


def device() -> str:
    """``"npu"``, ``"cuda"`` or ``"cpu"``: where the harness should allocate tensors."""
    chosen = os.environ.get("HELIX_DEVICE", "").strip().lower()
    if chosen in _DEVICES:
        return chosen
    backend = os.environ.get("HELIX_BACKEND", "").strip().lower()
    if backend in _DEVICES:
        return backend
    return _detect()


def _detect() -> str:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    try:
        import torch
    except ImportError:
        return "cpu"
    try:
        import torch_npu  # noqa: F401

        if torch.npu.is_available():  # type: ignore[attr-defined]  # torch_npu adds torch.npu
            return "npu"
    except Exception:  # noqa: BLE001 - a broken torch_npu simply means "not npu"
        pass
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def synchronize() -> None:
    """Wait for all queued device work (no-op on cpu), so timing brackets the kernel."""
    dev = device()
    if dev == "cpu":
        return
    import torch

    if dev == "cuda":
        torch.cuda.synchronize()
    else:
        torch.npu.synchronize()  # type: ignore[attr-defined]  # torch_npu adds torch.npu


def empty_cache() -> None:
    """Release cached device memory between big cases (no-op on cpu)."""
    dev = device()
    if dev == "cpu":
        return
    import torch

    if dev == "cuda":
        torch.cuda.empty_cache()
    else:
        torch.npu.empty_cache()  # type: ignore[attr-defined]  # torch_npu adds torch.npu
