# test-mode: differential
# compute-kind: compute
# api-name: matmul
# api-kind: triton-wrapper
# kernels: matmul_rowwise_kernel

"""Differential test for matmul.py: the same A and B through the baseline and a candidate.
Cases cover square and ragged shapes (M, N, K not multiples of any tile), a single row, a
transposed (non-contiguous) B, and both half precisions. fp32 runs only on the CPU: a GPU
tl.dot on fp32 inputs uses TF32 by default, which is not the baseline's arithmetic; bf16 runs
only on devices: the interpreter's tl.dot has no bf16 (numpy has no such type)."""

import torch

from helix_engine.harness import device


def build_operator_api(m):
    return getattr(m, "matmul")


def _shapes():
    # (m, n, k, dtype, transpose_b)
    if device() == "cpu":
        return [(32, 32, 32, torch.float32, False), (17, 33, 40, torch.float32, False),
                (1, 48, 64, torch.float32, False), (24, 40, 56, torch.float32, True),
                (32, 16, 48, torch.float16, False), (16, 24, 40, torch.float16, True)]
    return [(256, 256, 256, torch.float16, False), (300, 200, 170, torch.float16, False),
            (1, 512, 1024, torch.float16, False), (512, 384, 256, torch.float16, True),
            (256, 512, 512, torch.bfloat16, False), (64, 64, 2048, torch.bfloat16, False)]


def build_differential_test_cases(api):
    cases = []
    for i, (m, n, k, dtype, transpose_b) in enumerate(_shapes()):
        torch.manual_seed(300 + i)
        a = torch.randn((m, k)).to(dtype).to(device())
        b = torch.randn((n, k)).to(dtype).to(device()).t() if transpose_b else torch.randn((k, n)).to(dtype).to(device())
        label = f"{m}x{n}x{k}" + ("_bt" if transpose_b else "")
        cases.append({"id": f"{str(dtype).removeprefix('torch.')}_{label}", "inputs": (a, b),
                      "fn": lambda a=a, b=b: api(a, b)})
    return cases
