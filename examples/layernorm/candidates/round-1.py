"""LayerNorm forward, single pass with several rows per program.

Each program loads a [ROWS, BLOCK_N] block of x once, keeps it in registers for the mean, the
variance and the normalization, and loads weight and bias once for all its rows. x is read
once instead of three times, and short rows are packed so every program handles about 2K
elements instead of launching one small program per row.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, n_rows, n_cols,
                         eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]
    offs = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    xc = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_mask).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + rows, mean, mask=row_mask)
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    """Returns (y, mean, rstd) for a 2-D x normalized over its last dimension."""
    assert x.dim() == 2, "layernorm expects a 2-D tensor"
    x = x.contiguous()
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    block_n = triton.next_power_of_2(n_cols)
    rows = max(1, min(2048 // block_n, triton.next_power_of_2(n_rows)))
    grid = (triton.cdiv(n_rows, rows),)
    layernorm_fwd_kernel[grid](x, weight, bias, y, mean, rstd, x.stride(0), n_rows, n_cols, eps,
                               ROWS=rows, BLOCK_N=block_n)
    return y, mean, rstd
