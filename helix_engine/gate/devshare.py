"""Tensors handed between the supervisor and an operator process without leaving the GPU (CUDA).

Why: through the pipe, every slot's inputs went device → host → ``torch.save`` → pipe → host →
device in each operator process, and every checked call's outputs came back the same way to be
compared on the CPU; on an H200 that was most of a paired bench's time (issue 27: 3.6x the
bench before the gate). Here the supervisor copies each input set into memory of its own that it
shares with one operator process (CUDA IPC, torch's own ``reduce_tensor``/``rebuild_cuda_tensor``),
and each process copies the outputs of a checked call into a staging buffer the supervisor
shares with it the same way; the supervisor compares them on the device.

What an operator process can reach: CUDA IPC maps the whole allocation a shared block lives in,
so each side's shared memory comes from a memory pool of its own (``torch.cuda.MemPool``): the
candidate's process can write only its own copy of the inputs and its own staging buffer, never
the reference's or the supervisor's other tensors. Handles go one way only: the supervisor opens
none that an operator process made (a handle names memory and a shared-memory counter file; one
from the operator's side would be the operator's choice). What comes back is a layout in the
JSON header (dtype, shape, offset per tensor), checked against the staging buffer's bounds.

Anything else (the CPU and NPU backends, inputs that are not plain CUDA tensors, outputs that do
not fit the staging buffer) goes through the pipe as before (gate/wire.py).
"""

from __future__ import annotations

import base64
from typing import Any

#: bytes between the starts of two tensors in a staging buffer
ALIGN = 256
#: dtypes a layout may name (torch's plain dtypes; anything else is refused)
_DTYPES = ("float64", "float32", "float16", "bfloat16", "complex64", "complex128", "int64", "int32", "int16",
           "int8", "uint8", "bool", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64")


class LayoutError(ValueError):
    """A staging layout an operator process sent does not describe the staging buffer."""


def usable(backend_name: str) -> bool:
    if backend_name != "cuda":
        return False
    try:
        import torch
        from torch.multiprocessing.reductions import rebuild_cuda_tensor, reduce_tensor  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available() and hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")


def _plain_cuda(tensors: list[Any]) -> bool:
    import torch

    return bool(tensors) and all(type(t) is torch.Tensor and t.is_cuda and t.layout == torch.strided
                                 for t in tensors)


# ------------------------------------------------------------------------------ supervisor side


class SideArena:
    """One operator process's shared memory, in a pool of its own: input sets by name, and the
    staging buffer its outputs are copied into."""

    def __init__(self, device: Any) -> None:
        import torch

        self.device = torch.device(device)
        if self.device.index is None:  # a pool is per device: name the one "cuda" means
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.pool = torch.cuda.MemPool()
        self.sets: dict[str, list[Any]] = {}
        self.staging: Any = None

    def _alloc(self, nbytes: int) -> Any:
        import torch

        with torch.cuda.use_mem_pool(self.pool, self.device):
            return torch.empty(max(1, nbytes), dtype=torch.uint8, device=self.device)

    def share_inputs(self, name: str, tensors: list[Any]) -> list[dict[str, Any]] | None:
        """Descriptors of this side's own copy of ``tensors`` (views of one storage stay views of
        one storage), or None when they are not all plain CUDA tensors."""
        import torch

        if not _plain_cuda(tensors):
            return None
        copies: dict[int, Any] = {}
        shared: list[Any] = []
        for t in tensors:
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key not in copies:
                buf = self._alloc(storage.nbytes())
                if storage.nbytes():
                    src = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage, 0, (storage.nbytes(),), (1,))
                    buf.copy_(src)
                copies[key] = buf
            view = torch.empty(0, dtype=t.dtype, device=self.device).set_(
                copies[key].untyped_storage(), t.storage_offset(), t.size(), t.stride())
            shared.append(view)
        torch.cuda.current_stream(self.device).synchronize()
        self.sets[name] = shared
        return [describe(v) for v in shared]

    def drop(self, names: list[str] | tuple[str, ...]) -> None:
        import torch

        for name in names:
            self.sets.pop(name, None)
        torch.cuda.ipc_collect()  # memory the operator process let go of returns to the pool

    def staging_for(self, nbytes: int) -> dict[str, Any] | None:
        """A staging buffer of at least ``nbytes`` (a new one when the current is smaller): its
        descriptor to send, or None when the current one is big enough."""
        if self.staging is not None and self.staging.numel() >= nbytes:
            return None
        size = max(nbytes, 1 << 20)
        self.staging = self._alloc(size + size // 4)
        import torch

        torch.cuda.current_stream(self.device).synchronize()
        return describe(self.staging)

    def read_staged(self, layout: Any) -> Any:
        """The output tree a process staged, as the supervisor's own tensors (cloned out of the
        staging buffer at once: the process can write that buffer)."""
        if self.staging is None:
            raise LayoutError("no staging buffer was shared")
        return _rebuild(layout, self.staging, 0)


def _rebuild(node: Any, staging: Any, depth: int) -> Any:
    import torch

    if depth > 32 or not isinstance(node, dict):
        raise LayoutError("the layout is not a tree of at most 32 levels")
    kind = node.get("k")
    if kind == "t":
        dtype_name, shape, offset = node.get("dtype"), node.get("shape"), node.get("offset")
        if dtype_name not in _DTYPES or not hasattr(torch, str(dtype_name)):
            raise LayoutError(f"dtype {str(dtype_name)[:40]!r} is not a plain dtype")
        dtype = getattr(torch, str(dtype_name))
        if not isinstance(shape, list) or len(shape) > 16 or not all(_nat(s) for s in shape) or not _nat(offset):
            raise LayoutError("a tensor's shape or offset is not a list of natural numbers")
        assert isinstance(offset, int)
        numel = 1
        for s in shape:
            numel *= int(s)
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        if offset % ALIGN or offset + nbytes > staging.numel():
            raise LayoutError(f"a tensor of {nbytes} bytes at {offset} is outside the staging buffer")
        return staging[offset:offset + nbytes].view(dtype).view(tuple(int(s) for s in shape)).clone()
    if kind in ("tuple", "list"):
        items = node.get("v")
        if not isinstance(items, list):
            raise LayoutError("a sequence without items")
        out = [_rebuild(v, staging, depth + 1) for v in items]
        return tuple(out) if kind == "tuple" else out
    if kind == "dict":
        items = node.get("v")
        if not isinstance(items, dict):
            raise LayoutError("a mapping without items")
        return {str(k): _rebuild(v, staging, depth + 1) for k, v in items.items()}
    if kind == "v":
        value = node.get("v")
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise LayoutError("a value that is not a number, a string or None")
    raise LayoutError(f"unknown layout node {str(kind)[:20]!r}")


def to_cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (tuple, list)):
        return type(value)(to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    return value


def _nat(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < (1 << 48)


# --------------------------------------------------------------------------------- descriptors


def describe(t: Any) -> dict[str, Any]:
    """A JSON-safe descriptor of a CUDA tensor for ``adopt`` in another process."""
    from torch.multiprocessing.reductions import reduce_tensor

    _, args = reduce_tensor(t)
    (_cls, size, stride, offset, _storage_cls, dtype, device, handle, storage_size, storage_offset, _grad,
     ref_handle, ref_offset, event_handle, event_sync) = args
    return {"size": list(size), "stride": list(stride), "offset": int(offset), "dtype": str(dtype).removeprefix("torch."),
            "device": int(device), "handle": _b(handle), "storage_size": int(storage_size),
            "storage_offset": int(storage_offset), "ref_handle": _b(ref_handle), "ref_offset": int(ref_offset),
            "event_handle": _b(event_handle), "event_sync": bool(event_sync)}


def adopt(desc: dict[str, Any]) -> Any:
    """The tensor ``describe`` described, mapped into this process (the operator's side)."""
    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    dtype = getattr(torch, str(desc["dtype"]))
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {desc['dtype']!r}")
    return rebuild_cuda_tensor(torch.Tensor, torch.Size(desc["size"]), tuple(desc["stride"]), int(desc["offset"]),
                               torch.UntypedStorage, dtype, int(desc["device"]), _unb(desc["handle"]),
                               int(desc["storage_size"]), int(desc["storage_offset"]), False, _unb(desc["ref_handle"]),
                               int(desc["ref_offset"]), _unb(desc["event_handle"]), bool(desc["event_sync"]))


def _b(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _unb(value: Any) -> Any:
    if isinstance(value, dict) and "b64" in value:
        return base64.b64decode(value["b64"])
    return value


# ---------------------------------------------------------------------------- operator side


def stage(out: Any, staging: Any) -> tuple[dict[str, Any] | None, int]:
    """Copy the plain CUDA tensors of ``out`` into ``staging``: (the layout, bytes used); (None,
    bytes needed) when it does not fit, (None, 0) when something in it is not a plain CUDA tensor
    or value (then the pipe carries it)."""
    import torch

    leaves: list[Any] = []
    layout = _layout(out, leaves, 0)
    if layout is None:
        return None, 0
    offset = 0
    placed: list[tuple[Any, int]] = []
    for t in leaves:
        placed.append((t, offset))
        offset += -(-t.numel() * t.element_size() // ALIGN) * ALIGN
    if staging is None or offset > staging.numel():
        return None, offset
    for (t, at), node in zip(placed, _tensor_nodes(layout), strict=True):
        nbytes = t.numel() * t.element_size()
        node["offset"] = at
        if nbytes:
            staging[at:at + nbytes].copy_(t.detach().contiguous().reshape(-1).view(torch.uint8))
    torch.cuda.synchronize()
    return layout, offset


def _layout(value: Any, leaves: list[Any], depth: int) -> dict[str, Any] | None:
    import torch

    if depth > 32:
        return None
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor or not value.is_cuda or value.layout != torch.strided:
            return None
        leaves.append(value)
        return {"k": "t", "dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape), "offset": 0}
    if isinstance(value, (tuple, list)):
        items = [_layout(v, leaves, depth + 1) for v in value]
        if any(i is None for i in items):
            return None
        return {"k": "tuple" if isinstance(value, tuple) else "list", "v": items}
    if isinstance(value, dict):
        sub = {str(k): _layout(v, leaves, depth + 1) for k, v in value.items()}
        if any(v is None for v in sub.values()):
            return None
        return {"k": "dict", "v": sub}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"k": "v", "v": value}
    return None


def _tensor_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    if node["k"] == "t":
        return [node]
    if node["k"] in ("tuple", "list"):
        return [n for v in node["v"] for n in _tensor_nodes(v)]
    if node["k"] == "dict":
        return [n for v in node["v"].values() for n in _tensor_nodes(v)]
    return []
