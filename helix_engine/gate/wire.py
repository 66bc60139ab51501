"""The pipe between the supervisor and an operator process: one message = a JSON header and,
optionally, a blob of tensors.

Why this format: the supervisor reads what an adversarial process sends, so nothing from that
side is unpickled by a full unpickler. The header is plain JSON (capped); the blob is
``torch.save`` bytes read back with ``torch.load(weights_only=True)``, which only rebuilds plain
tensors, containers and numbers (a tensor subclass or any other class is refused). Each frame is
``<8-byte header length><8-byte blob length><header><blob>``.
"""

from __future__ import annotations

import io
import json
import os
import struct
from typing import Any

MAX_HEADER = 4 * 1024 * 1024
#: a blob bigger than this is refused (an operator process cannot make the supervisor allocate at will)
MAX_BLOB = 8 * 1024 * 1024 * 1024
_FRAME = struct.Struct("<QQ")


class WireError(Exception):
    """The other side sent something that is not a message (or closed the pipe)."""


def encode_blob(obj: Any) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def decode_blob(data: bytes, map_location: str | None = None) -> Any:
    import torch

    try:
        return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - whatever the bytes were, they are not plain tensors
        raise WireError(f"the tensors sent could not be read as plain tensors ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:200] if str(exc) else ''})") from None


def send(fd: int, header: dict[str, Any], blob: bytes = b"") -> None:
    head = json.dumps(header, separators=(",", ":"), default=str).encode("utf-8")
    _write_all(fd, _FRAME.pack(len(head), len(blob)) + head)
    if blob:
        _write_all(fd, blob)


def recv(fd: int) -> tuple[dict[str, Any], bytes]:
    frame = _read_exact(fd, _FRAME.size)
    n_head, n_blob = _FRAME.unpack(frame)
    if n_head > MAX_HEADER or n_blob > MAX_BLOB:
        raise WireError(f"a message of {n_head} + {n_blob} bytes is over the limit")
    try:
        header = json.loads(_read_exact(fd, n_head).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"the message header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise WireError("the message header is not an object")
    return header, _read_exact(fd, n_blob) if n_blob else b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BrokenPipeError:
            raise WireError("the other side closed the pipe") from None
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    left = n
    while left:
        chunk = os.read(fd, min(left, 1 << 22))
        if not chunk:
            raise WireError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
