"""The cuda backend for real: auto-detection, the device lease and the child-side helpers on a
GPU. Skipped where the probe finds no CUDA device (like the 2-core CI box); run on an H200."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from helix_engine.eval.backends import detect, select_backend
from helix_engine.jobs.runner import run_job

PY = sys.executable


def _cuda_report() -> Any:
    return detect()


pytestmark = pytest.mark.skipif("cuda" not in _cuda_report().devices, reason="no CUDA device here")

CHILD = """
import json, os
from helix_engine.eval.backends import get_backend
import triton, triton.language as tl

be = get_backend(os.environ["HELIX_BACKEND"])
torch = be.import_torch()

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

n = 1 << 20
x = torch.randn(n, device=be.device_str)
y = torch.randn(n, device=be.device_str)
out = torch.empty_like(x)
grid = (triton.cdiv(n, 1024),)
add_kernel[grid](x, y, out, n, BLOCK=1024)
be.synchronize()
ok = bool(torch.allclose(out, x + y))
start, end = be.event_pair()
flush = be.l2_flush_buffer()
be.flush_l2(flush)
start.record()
add_kernel[grid](x, y, out, n, BLOCK=1024)
end.record()
be.synchronize()
print(json.dumps({
    "ok": ok, "visible": os.environ.get(be.visible_devices_var), "count": torch.cuda.device_count(),
    "name": be.device_name(), "event_ms": start.elapsed_time(end),
    "wall_us": be.time_call_us(lambda: add_kernel[grid](x, y, out, n, BLOCK=1024)),
    "flush_bytes": flush.numel() * flush.element_size(), "interpret": os.environ.get("TRITON_INTERPRET"),
}))
"""


def test_auto_picks_cuda_and_a_leased_job_sees_one_gpu(tmp_path: Path) -> None:
    be = select_backend("auto")
    report = _cuda_report()
    assert be.name == report.picked
    if be.name != "cuda":
        pytest.skip(f"auto picked {be.name}")
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    last = str(len(report.devices["cuda"]) - 1)
    info = run_job(tmp_path, "bench", [PY, str(script)], timeout_s=300, device_pool=[last], backend=be)
    log = (tmp_path / ".helix/jobs" / info.id / "output.log").read_text()
    assert info.status == "passed", log[-3000:]
    data = json.loads(log.strip().splitlines()[-1])
    print(data)
    assert data["ok"] is True
    assert data["visible"] == last and data["count"] == 1
    assert data["interpret"] is None
    assert data["name"] == report.devices["cuda"][int(last)]
    assert data["event_ms"] > 0 and data["wall_us"] > 0
    assert data["flush_bytes"] == be.l2_flush_bytes
