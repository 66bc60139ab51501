# api-name: matmul
# api-kind: triton-wrapper
# kernels: matmul_rowwise_kernel

"""Bench harness for matmul.py: hooks only (no timing, no sync, no printing).

Half-precision GEMMs of LLM-layer sizes on an NPU or GPU; tiny ones on the CPU, where Triton
runs through its interpreter.
"""

import torch

from helix_engine.harness import device


def build_operator_api(operator_module):
    return operator_module.matmul


def build_bench_cases():
    if device() == "cpu":
        return [
            {"id": "fp32_64x64x64", "mnk": (64, 64, 64), "dtype": torch.float32, "seed": 0, "warmup": 1, "repeats": 6},
            {"id": "fp32_32x96x128", "mnk": (32, 96, 128), "dtype": torch.float32, "seed": 1, "warmup": 1, "repeats": 6},
            {"id": "fp16_64x32x64", "mnk": (64, 32, 64), "dtype": torch.float16, "seed": 2, "warmup": 1, "repeats": 6},
        ]
    return [
        {"id": "fp16_1024x1024x1024", "mnk": (1024, 1024, 1024), "dtype": torch.float16, "seed": 0},
        {"id": "fp16_2048x2048x2048", "mnk": (2048, 2048, 2048), "dtype": torch.float16, "seed": 1},
        {"id": "bf16_4096x1024x4096", "mnk": (4096, 1024, 4096), "dtype": torch.bfloat16, "seed": 2},
        {"id": "fp16_512x4096x1024", "mnk": (512, 4096, 1024), "dtype": torch.float16, "seed": 3},
        {"id": "bf16_2048x512x8192", "mnk": (2048, 512, 8192), "dtype": torch.bfloat16, "seed": 4, "repeats": 20},
    ]


def build_bench_case_fn(api, case):
    torch.manual_seed(case["seed"])
    m, n, k = case["mnk"]
    a = torch.randn((m, k), dtype=case["dtype"], device=device())
    b = torch.randn((k, n), dtype=case["dtype"], device=device())
    return lambda: api(a, b)


def build_bench_case_work(case):
    """Flops (2·M·N·K) and bytes (read A and B once, write C) of one matmul call, for the roofline."""
    m, n, k = case["mnk"]
    elt = torch.empty((), dtype=case["dtype"]).element_size()
    return {"flops": 2 * m * n * k, "bytes": (m * k + k * n + m * n) * elt, "dtype": case["dtype"]}
