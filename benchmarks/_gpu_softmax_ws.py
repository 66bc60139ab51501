"""A tiny GPU workspace shared by bench_gpu_fidelity.py and bench_probe.py: a one-pass Triton
softmax (softmax.py), a slower three-pass variant (baseline/softmax.py), and their bench and
differential test harnesses. Kept here, not in tests/, so the benchmarks are self-contained."""

from __future__ import annotations

import os
import sys
from pathlib import Path

FAST = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * n_cols + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * n_cols + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    warps = 4 if block <= 2048 else 8 if block <= 4096 else 16
    softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=block, num_warps=warps)
    return out
'''

SLOW = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_slow_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    # three passes over the row (max, sum, write): same result, 3x the loads
    row = tl.program_id(0)
    base = in_ptr + row * n_cols
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / s
        tl.store(out_ptr + row * n_cols + offs, y.to(out_ptr.dtype.element_ty), mask=offs < n_cols)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_slow_kernel[(n_rows,)](out, x, n_cols, BLOCK=256, num_warps=4)
    return out
'''

BENCH = '''\
# api-name: softmax
# api-kind: triton-wrapper
import torch

from helix_engine.harness import device

CASES = [("fp32_4096x2048", 4096, 2048, torch.float32), ("fp16_8192x4096", 8192, 4096, torch.float16),
         ("fp32_1024x1024", 1024, 1024, torch.float32)]


def build_operator_api(m):
    return m.softmax


def build_bench_cases():
    return [{"id": cid, "rows": r, "cols": c, "dtype": dt, "seed": i, "warmup": 10, "repeats": REPEATS}
            for i, (cid, r, c, dt) in enumerate(CASES)]


def build_bench_case_fn(api, case):
    torch.manual_seed(case["seed"])
    x = torch.randn(case["rows"], case["cols"], dtype=case["dtype"], device=device())
    return lambda: api(x)
'''

DIFF_TEST = '''\
# test-mode: differential
# compute-kind: compute
# api-name: softmax
# api-kind: triton-wrapper
import torch

from helix_engine.harness import device


def build_operator_api(m):
    return m.softmax


def build_differential_test_cases(api):
    cases = []
    for i, (rows, cols, dt) in enumerate([(8, 256, torch.float32), (64, 1000, torch.float32),
                                          (128, 4096, torch.float16), (3, 77, torch.bfloat16),
                                          (1024, 1024, torch.float32)]):
        torch.manual_seed(i)
        x = torch.randn(rows, cols, dtype=dt, device=device())
        cases.append({"id": f"c{i}_{rows}x{cols}", "inputs": (x,), "fn": lambda x=x: api(x)})
    return cases
'''


def make_workspace(root: Path, repeats: int = 100) -> Path:
    """Write the workspace under ``root``; returns it. ``softmax.py`` is the fast operator."""
    ws = Path(root) / "softmax_ws"
    (ws / "baseline").mkdir(parents=True, exist_ok=True)
    (ws / "softmax.py").write_text(FAST, encoding="utf-8")
    (ws / "baseline" / "softmax.py").write_text(SLOW, encoding="utf-8")
    (ws / "fast_copy").mkdir(exist_ok=True)
    (ws / "fast_copy" / "softmax.py").write_text(FAST, encoding="utf-8")
    (ws / "bench_softmax.py").write_text(BENCH.replace("REPEATS", str(repeats)), encoding="utf-8")
    (ws / "differential_test_softmax.py").write_text(DIFF_TEST, encoding="utf-8")
    return ws


def cuda_available() -> tuple[bool, str]:
    """(available, reason) through helix's subprocess probe (no torch import here)."""
    from helix_engine.eval.backends import detect

    report = detect(refresh=True)
    if "cuda" in report.devices:
        return True, ", ".join(report.devices["cuda"])
    return False, report.reasons.get("cuda", "no CUDA device")


def json_path(default_name: str) -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    if os.environ.get("HELIX_BENCH_JSON"):
        return Path(os.environ["HELIX_BENCH_JSON"])
    out = os.environ.get("OUT")
    return Path(out) / default_name if out else Path.cwd() / default_name


def print_rows(rows: list[dict]) -> None:
    print(f"{'figure':<58} {'value':>10} {'unit':<5} {'ratio':>7}  note")
    for r in rows:
        ratio = "" if r.get("ratio") is None else f"{r['ratio']:.3f}"
        print(f"{r['figure'][:58]:<58} {r['value']:>10.3f} {r['unit']:<5} {ratio:>7}  {r['note']}")
