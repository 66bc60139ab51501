# api-name: softmax
# api-kind: triton-wrapper
# kernels: row_max_kernel, exp_sum_kernel, normalize_kernel

"""Bench harness for softmax.py: hooks only (no timing, no sync, no printing).

Shapes depend on the device: realistic sizes on an NPU or GPU, tiny ones on the CPU, where
Triton runs through its interpreter (TRITON_INTERPRET=1) and every program is Python code.
"""

import torch

from helix_engine.harness import device


def build_operator_api(operator_module):
    return operator_module.softmax


def build_bench_cases():
    if device() == "cpu":
        return [
            {"id": "fp32_8x64", "shape": (8, 64), "dtype": torch.float32, "seed": 0, "warmup": 1, "repeats": 6},
            {"id": "fp32_16x128", "shape": (16, 128), "dtype": torch.float32, "seed": 1, "warmup": 1, "repeats": 6},
            {"id": "fp32_8x200", "shape": (8, 200), "dtype": torch.float32, "seed": 2, "warmup": 1, "repeats": 6},
            {"id": "fp16_16x96", "shape": (16, 96), "dtype": torch.float16, "seed": 3, "warmup": 1, "repeats": 6},
        ]
    return [
        {"id": "fp32_4096x512", "shape": (4096, 512), "dtype": torch.float32, "seed": 0},
        {"id": "fp32_4096x1024", "shape": (4096, 1024), "dtype": torch.float32, "seed": 1},
        {"id": "fp32_2048x3000", "shape": (2048, 3000), "dtype": torch.float32, "seed": 2},
        {"id": "fp16_8192x1024", "shape": (8192, 1024), "dtype": torch.float16, "seed": 3},
        {"id": "fp16_1024x4096", "shape": (1024, 4096), "dtype": torch.float16, "seed": 4},
        {"id": "bf16_4096x2048", "shape": (4096, 2048), "dtype": torch.bfloat16, "seed": 5},
    ]


def build_bench_case_fn(api, case):
    torch.manual_seed(case["seed"])
    x = torch.randn(case["shape"], dtype=case["dtype"], device=device())
    return lambda: api(x)


def build_bench_case_work(case):
    """Bytes one softmax call must move (read x, write y), for the roofline; per kernel, what
    the baseline's three kernels move (x twice, an fp32 intermediate written and read back)."""
    rows, cols = case["shape"]
    elt = torch.empty((), dtype=case["dtype"]).element_size()
    n, f32 = rows * cols, 4
    return {
        "bytes": 2 * n * elt,
        "dtype": case["dtype"],
        "kernel_bytes": {
            "row_max_kernel": n * elt + rows * f32,
            "exp_sum_kernel": n * elt + n * f32 + 2 * rows * f32,
            "normalize_kernel": n * f32 + rows * f32 + n * elt,
        },
    }
