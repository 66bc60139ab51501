"""The staging layout an operator process sends back (gate/devshare.py) is checked before the
supervisor reads a byte of the staging buffer: hostile layouts are refused, never followed.

The CUDA IPC path itself runs only on a GPU: `helix selftest --backend cuda` and
benchmarks/h200_gate.sh exercise it end to end (RESULTS.md); here the staging buffer is a CPU
byte tensor, which ``_rebuild`` reads exactly as it reads a device one."""

from __future__ import annotations

import pytest
import torch

from helix_engine.gate import devshare
from helix_engine.gate.devshare import LayoutError, _rebuild


def _staging(values: torch.Tensor, size: int = 4096) -> torch.Tensor:
    buf = torch.zeros(size, dtype=torch.uint8)
    raw = values.contiguous().reshape(-1).view(torch.uint8)
    buf[: raw.numel()] = raw
    return buf


def test_a_layout_reads_back_the_tensors_and_values_it_names() -> None:
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    buf = _staging(x)
    layout = {"k": "tuple", "v": [{"k": "t", "dtype": "float32", "shape": [3, 4], "offset": 0},
                                  {"k": "v", "v": 7}, {"k": "dict", "v": {"s": {"k": "v", "v": "ok"}}}]}
    out = _rebuild(layout, buf, 0)
    assert isinstance(out, tuple) and torch.equal(out[0], x) and out[1] == 7 and out[2] == {"s": "ok"}
    buf.zero_()  # the process can write its staging buffer later: what was read is a copy
    assert torch.equal(out[0], x)


@pytest.mark.parametrize("node, why", [
    ({"k": "t", "dtype": "float32", "shape": [2000], "offset": 0}, "outside the staging buffer"),
    ({"k": "t", "dtype": "float32", "shape": [4], "offset": 4096}, "outside the staging buffer"),
    ({"k": "t", "dtype": "float32", "shape": [4], "offset": 8}, "outside"),  # not aligned
    ({"k": "t", "dtype": "Tensor", "shape": [4], "offset": 0}, "not a plain dtype"),
    ({"k": "t", "dtype": "float32", "shape": [-1], "offset": 0}, "natural numbers"),
    ({"k": "t", "dtype": "float32", "shape": [True], "offset": 0}, "natural numbers"),
    ({"k": "t", "dtype": "float32", "shape": [4], "offset": -256}, "natural numbers"),
    ({"k": "v", "v": [1, 2]}, "not a number"),
    ({"k": "call", "v": "os.system"}, "unknown layout node"),
    ({"k": "list"}, "without items"),
])
def test_a_hostile_layout_is_refused(node: dict, why: str) -> None:
    with pytest.raises(LayoutError, match=why):
        _rebuild(node, _staging(torch.ones(4)), 0)


def test_a_layout_deeper_than_32_levels_is_refused() -> None:
    node: dict = {"k": "v", "v": 1}
    for _ in range(40):
        node = {"k": "list", "v": [node]}
    with pytest.raises(LayoutError, match="32 levels"):
        _rebuild(node, _staging(torch.ones(4)), 0)


def test_outputs_that_are_not_plain_cuda_tensors_go_through_the_pipe() -> None:
    """On the CPU (and for a tensor subclass anywhere) stage() declines and the pipe carries the
    outputs, where the supervisor's weights-only reader refuses anything but plain tensors."""
    assert devshare.stage(torch.ones(3), torch.zeros(4096, dtype=torch.uint8)) == (None, 0)
    assert devshare.stage((torch.ones(3), object()), torch.zeros(4096, dtype=torch.uint8)) == (None, 0)
    assert not devshare.usable("cpu") and not devshare.usable("npu")
