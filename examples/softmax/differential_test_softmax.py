# test-mode: differential
# compute-kind: compute
# api-name: softmax
# api-kind: triton-wrapper
# kernels: row_max_kernel, exp_sum_kernel, normalize_kernel

"""Differential test for softmax.py: the same inputs through the baseline and a candidate.

Cases cover power-of-two and ragged widths, a single row, large-magnitude inputs (the max
subtraction must keep exp finite) and half precision. No assertions here: run-test compares
the archived outputs against the reference operator's.
"""

import torch

from helix_engine.harness import device


def build_operator_api(m):
    return getattr(m, "softmax")


def _shapes():
    if device() == "cpu":
        return [((4, 64), torch.float32, 1.0), ((3, 100), torch.float32, 1.0), ((1, 257), torch.float32, 1.0),
                ((5, 32), torch.float32, 40.0), ((6, 48), torch.float16, 1.0), ((2, 8), torch.float32, -3.0)]
    return [((256, 1024), torch.float32, 1.0), ((128, 1000), torch.float32, 1.0), ((1, 4097), torch.float32, 1.0),
            ((64, 512), torch.float32, 40.0), ((512, 768), torch.float16, 1.0), ((32, 16), torch.float32, -3.0)]


def build_differential_test_cases(api):
    cases = []
    for i, (shape, dtype, scale) in enumerate(_shapes()):
        torch.manual_seed(100 + i)
        x = (torch.randn(shape, dtype=torch.float32) * scale).to(dtype).to(device())
        label = "x".join(str(s) for s in shape)
        cases.append({"id": f"{str(dtype).removeprefix('torch.')}_{label}_s{scale:g}", "inputs": (x,), "fn": lambda x=x: api(x)})
    return cases
