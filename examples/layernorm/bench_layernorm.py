# api-name: layernorm
# api-kind: triton-wrapper
# kernels: layernorm_fwd_kernel

"""Bench harness for layernorm.py: hooks only (no timing, no sync, no printing).

Shapes depend on the device: transformer-sized rows on an NPU or GPU, tiny ones on the CPU,
where Triton runs through its interpreter and every program is Python code.
"""

import torch

from helix_engine.harness import device


def build_operator_api(operator_module):
    return operator_module.layernorm


def build_bench_cases():
    if device() == "cpu":
        return [
            {"id": "fp32_16x64", "shape": (16, 64), "dtype": torch.float32, "seed": 0, "warmup": 1, "repeats": 6},
            {"id": "fp32_32x128", "shape": (32, 128), "dtype": torch.float32, "seed": 1, "warmup": 1, "repeats": 6},
            {"id": "fp32_8x200", "shape": (8, 200), "dtype": torch.float32, "seed": 2, "warmup": 1, "repeats": 6},
            {"id": "fp16_16x96", "shape": (16, 96), "dtype": torch.float16, "seed": 3, "warmup": 1, "repeats": 6},
        ]
    return [
        {"id": "fp32_8192x512", "shape": (8192, 512), "dtype": torch.float32, "seed": 0},
        {"id": "fp32_4096x1024", "shape": (4096, 1024), "dtype": torch.float32, "seed": 1},
        {"id": "fp16_4096x4096", "shape": (4096, 4096), "dtype": torch.float16, "seed": 2},
        {"id": "bf16_8192x2048", "shape": (8192, 2048), "dtype": torch.bfloat16, "seed": 3},
        {"id": "fp16_16384x768", "shape": (16384, 768), "dtype": torch.float16, "seed": 4},
        {"id": "fp32_2048x3000", "shape": (2048, 3000), "dtype": torch.float32, "seed": 5},
    ]


def build_bench_case_fn(api, case):
    torch.manual_seed(case["seed"])
    n_cols = case["shape"][1]
    x = torch.randn(case["shape"], dtype=case["dtype"], device=device())
    w = torch.rand(n_cols, dtype=case["dtype"], device=device()) + 0.5
    b = torch.randn(n_cols, dtype=case["dtype"], device=device())
    return lambda: api(x, w, b)


def build_bench_case_work(case):
    """Bytes one layernorm call must move, for the roofline: read x, weight and bias, write y,
    and the fp32 mean and rstd per row the operator also returns."""
    rows, cols = case["shape"]
    elt = torch.empty((), dtype=case["dtype"]).element_size()
    return {"bytes": (2 * rows * cols + 2 * cols) * elt + 2 * rows * 4, "dtype": case["dtype"]}
