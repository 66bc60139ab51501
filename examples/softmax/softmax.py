"""Row softmax, written the straightforward way: three kernels, one per step of the formula.

softmax(x)[i, j] = exp(x[i, j] - max_j x[i, :]) / sum_j exp(x[i, j] - max_j x[i, :])

1. ``row_max_kernel``      reads x, writes one max per row
2. ``exp_sum_kernel``      reads x and the max, writes exp(x - max) and one sum per row
3. ``normalize_kernel``    reads exp(x - max) and the sum, writes the output

Each kernel is a correct, idiomatic one-program-per-row Triton kernel; the cost is three
launches and two full-size round trips through memory (x is read twice, the exp buffer is
written and read once more). This is the baseline the demo optimizes.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_max_kernel(x_ptr, max_ptr, n_cols, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    tl.store(max_ptr + row, tl.max(x, axis=0))


@triton.jit
def exp_sum_kernel(x_ptr, max_ptr, e_ptr, sum_ptr, n_cols, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.load(max_ptr + row)
    e = tl.exp(x - m)
    tl.store(e_ptr + row * n_cols + cols, e, mask=mask)
    tl.store(sum_ptr + row, tl.sum(e, axis=0))


@triton.jit
def normalize_kernel(e_ptr, sum_ptr, y_ptr, n_cols, y_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    e = tl.load(e_ptr + row * n_cols + cols, mask=mask, other=0.0)
    s = tl.load(sum_ptr + row)
    y = e / s
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor (fp32 accumulation)."""
    assert x.dim() == 2, "softmax expects a 2-D tensor"
    x = x.contiguous()
    n_rows, n_cols = x.shape
    block_n = triton.next_power_of_2(n_cols)
    row_max = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    row_sum = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    e = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    y = torch.empty_like(x)
    grid = (n_rows,)
    row_max_kernel[grid](x, row_max, n_cols, x.stride(0), BLOCK_N=block_n)
    exp_sum_kernel[grid](x, row_max, e, row_sum, n_cols, x.stride(0), BLOCK_N=block_n)
    normalize_kernel[grid](e, row_sum, y, n_cols, y.stride(0), BLOCK_N=block_n)
    return y
