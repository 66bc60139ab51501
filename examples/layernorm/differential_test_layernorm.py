# test-mode: differential
# compute-kind: compute
# api-name: layernorm
# api-kind: triton-wrapper
# kernels: layernorm_fwd_kernel

"""Differential test for layernorm.py: y, mean and rstd from the same inputs through the
baseline and a candidate. Cases cover power-of-two and ragged widths, a single row, a row
mean far from zero, a tiny eps with near-constant rows, and half precision."""

import torch

from helix_engine.harness import device


def build_operator_api(m):
    return getattr(m, "layernorm")


def _shapes():
    # (shape, dtype, offset, scale, eps)
    if device() == "cpu":
        return [((4, 64), torch.float32, 0.0, 1.0, 1e-5), ((3, 100), torch.float32, 0.0, 1.0, 1e-5),
                ((1, 300), torch.float32, 0.0, 2.0, 1e-5), ((5, 48), torch.float32, 3.0, 2.0, 1e-5),
                ((6, 32), torch.float16, 0.0, 1.0, 1e-5), ((2, 16), torch.float32, 0.5, 1.0, 1e-3)]
    return [((256, 1024), torch.float32, 0.0, 1.0, 1e-5), ((128, 1000), torch.float32, 0.0, 1.0, 1e-5),
            ((1, 4097), torch.float32, 0.0, 2.0, 1e-5), ((64, 768), torch.float32, 3.0, 2.0, 1e-5),
            ((512, 2048), torch.float16, 0.0, 1.0, 1e-5), ((32, 16), torch.float32, 0.5, 1.0, 1e-3)]


def build_differential_test_cases(api):
    cases = []
    for i, (shape, dtype, offset, scale, eps) in enumerate(_shapes()):
        torch.manual_seed(200 + i)
        x = (torch.randn(shape) * scale + offset).to(dtype).to(device())
        w = (torch.rand(shape[1]) + 0.5).to(dtype).to(device())
        b = torch.randn(shape[1]).to(dtype).to(device())
        label = "x".join(str(s) for s in shape)
        cases.append({"id": f"{str(dtype).removeprefix('torch.')}_{label}_{i}", "inputs": (x, w, b, eps),
                      "fn": lambda x=x, w=w, b=b, eps=eps: api(x, w, b, eps)})
    return cases
