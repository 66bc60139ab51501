"""On a CUDA machine: profile-bench + IR capture of two small Triton kernels through the helix CLI.

Writes a tiny workspace (vector add + a tiled fp16 matmul) in a temp dir, then runs
``helix profile-bench --backend cuda``, ``helix profile-report --json``, ``helix ir capture
--backend cuda`` and, for comparison, ``helix ir capture --backend cpu`` (the no-GPU sm_90
compile), and prints one JSON summary: hot kernel and device times, stage names, n_regs /
shared / num_warps / num_stages, and whether the no-GPU ttgir/ptx match the real JIT's.
Run: ``python3 benchmarks/gpu_profile_ir.py [OUT.json]``. Without a GPU it prints a note and exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

OPERATOR = '''
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def bias_kernel(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c_ptr + offs, tl.load(c_ptr + offs, mask=m) + 1.0, mask=m)


def mm(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    matmul_kernel[(M // 64, N // 64)](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=3)
    bias_kernel[(triton.cdiv(M * N, 1024),)](c, M * N, BLOCK=1024)
    return c
'''

BENCH = '''# api-name: mm
# api-kind: triton-wrapper
# kernels: matmul_kernel, bias_kernel
import torch
from helix_engine.harness import device


def build_operator_api(m):
    return m.mm


def build_bench_cases():
    return [{"id": "fp16_1024", "n": 1024, "warmup": 5, "repeats": 20},
            {"id": "fp16_128", "n": 128, "warmup": 1, "repeats": 2}]


def build_bench_case_fn(api, case):
    torch.manual_seed(0)
    a = torch.randn(case["n"], case["n"], device=device(), dtype=torch.float16)
    b = torch.randn(case["n"], case["n"], device=device(), dtype=torch.float16)
    return lambda: api(a, b)
'''


#: What `helix ir capture --backend cpu` recorded for this operator's fp16_128 case (triton 3.9 interpreter).
RECORDED_LAUNCHES = [
    {"name": "matmul_kernel", "module": "mm", "args": {
        "a_ptr": {"kind": "tensor", "dtype": "float16"}, "b_ptr": {"kind": "tensor", "dtype": "float16"},
        "c_ptr": {"kind": "tensor", "dtype": "float16"}, "M": {"kind": "int", "value": 128},
        "N": {"kind": "int", "value": 128}, "K": {"kind": "int", "value": 128}, "BLOCK_M": {"kind": "int", "value": 64},
        "BLOCK_N": {"kind": "int", "value": 64}, "BLOCK_K": {"kind": "int", "value": 32}},
     "options": {"num_warps": 4, "num_stages": 3}},
    {"name": "bias_kernel", "module": "mm", "args": {
        "c_ptr": {"kind": "tensor", "dtype": "float16"}, "n": {"kind": "int", "value": 16384},
        "BLOCK": {"kind": "int", "value": 1024}}, "options": {}},
]


def helix(*args: str, backend_env: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "helix_engine", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=500)


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"note": "no CUDA device: nothing measured"}))
        return 0
    out: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    import triton

    out["triton"] = triton.__version__
    ws = Path(tempfile.mkdtemp(prefix="helix-gpu-"))
    (ws / "mm.py").write_text(OPERATOR)
    (ws / "bench_mm.py").write_text(BENCH)
    prof = helix("profile-bench", "--operator-file", str(ws / "mm.py"), "--case-id", "fp16_1024", "--backend", "cuda",
                 "--json")
    out["profile_rc"] = prof.returncode
    if prof.returncode == 0:
        report = json.loads(prof.stdout)["report"]
        out["profile"] = {"target": report["target_operator"], "time_label": report["time_label"],
                          "hotspots": report["hotspots"], "op_summary": report["op_summary"],
                          "bound": report["bound_analysis"]["classification"], "notes": report["notes"]}
    else:
        out["profile_error"] = (prof.stdout + prof.stderr)[-3000:]
    for backend in ("cuda", "cpu"):
        ir_dir = ws / f"ir-{backend}"
        case = "fp16_1024" if backend == "cuda" else "fp16_128"  # same types; the interpreter is slow
        cap = helix("ir", "capture", "--ir-dir", str(ir_dir), "--operator-file", str(ws / "mm.py"), "--backend",
                    backend, "--case-id", case, "--json")
        out[f"ir_{backend}_rc"] = cap.returncode
        try:
            data = json.loads(cap.stdout)
            out[f"ir_{backend}"] = {"label": data.get("label"), "message": data.get("message"), "kernels": [
                {"name": k["name"], "stages": k.get("stages"), "error": k.get("error"),
                 "metadata": {m: k.get("metadata", {}).get(m) for m in
                              ("n_regs", "n_spills", "shared", "num_warps", "num_stages", "arch")}}
                for k in data.get("kernels", [])]}
        except ValueError:
            out[f"ir_{backend}_error"] = (cap.stdout + cap.stderr)[-3000:]
        listing = helix("ir", "list-stages", "--ir-dir", str(ir_dir), "--json")
        if listing.returncode == 0:
            out[f"ir_{backend}_stages"] = [(s["stage"], s["lines"]) for s in json.loads(listing.stdout)["stages"]]
    if out.get("ir_cpu_rc") != 0:
        # The device image's interpreter (triton 3.6 + numpy 2.x) can fail where ours runs; compile the
        # launch types our interpreter recorded for this operator instead (the second half of a cpu capture).
        ir_dir = ws / "ir-cpu"
        ir_dir.mkdir(exist_ok=True)
        (ir_dir / "launches.json").write_text(json.dumps(RECORDED_LAUNCHES))
        request = {"mode": "compile", "operator_file": str(ws / "mm.py"), "ir_dir": str(ir_dir),
                   "launches_file": str(ir_dir / "launches.json"), "result_path": str(ws / "compile-result.json")}
        (ws / "compile-request.json").write_text(json.dumps(request))
        env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="0")
        run = subprocess.run([sys.executable, "-m", "helix_engine.ir.worker", str(ws / "compile-request.json")],
                             cwd=ws, env=env, capture_output=True, text=True, timeout=300)
        result = json.loads((ws / "compile-result.json").read_text())
        out["ir_cpu_compile_only"] = {"rc": run.returncode, "kernels": [
            {"name": k["name"], "error": k.get("error"), "n_regs": k.get("metadata", {}).get("n_regs"),
             "shared": k.get("metadata", {}).get("shared")} for k in result.get("kernels", [])]}
    same = {}
    for kernel in ("matmul_kernel", "bias_kernel"):
        for stage in ("ttgir", "ptx"):
            a = ws / "ir-cuda" / kernel / f"{kernel}.{stage}"
            b = ws / "ir-cpu" / kernel / f"{kernel}.{stage}"
            if a.is_file() and b.is_file():
                same[f"{kernel}.{stage}"] = a.read_text() == b.read_text()
                if not same[f"{kernel}.{stage}"]:
                    diff = helix("ir", "diff-stages", "--ir-dir", str(ws), "--from", f"ir-cpu/{kernel}/{kernel}.{stage}",
                                 "--to", f"ir-cuda/{kernel}/{kernel}.{stage}", "--context", "0")
                    same[f"{kernel}.{stage}.diff_head"] = diff.stdout[:1500]
    out["nogpu_vs_jit_identical"] = same
    text = json.dumps(out, indent=2, default=str)
    print(text)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
