"""Row softmax, fused: one kernel; each program owns a block of rows held in registers.

x is read once and y written once; the max, the exponentials and the sum never leave the
program. Compared with the three-kernel parent this removes two launches, the fp32 exp buffer
(one full-size write and read) and the second read of x. Short rows are packed ROWS to a
program (about 2K elements each), so a narrow softmax is not one tiny program per row.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                   ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_ok = (cols < n_cols)[None, :]
    mask = (rows < n_rows)[:, None] & col_ok
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0)
    # padding columns must not win the max; padding rows stay finite (0) so they make no NaN
    x = tl.where(col_ok, x.to(tl.float32), -float("inf"))
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor (fp32 accumulation)."""
    assert x.dim() == 2, "softmax expects a 2-D tensor"
    x = x.contiguous()
    n_rows, n_cols = x.shape
    block_n = triton.next_power_of_2(n_cols)
    rows = max(1, min(2048 // block_n, triton.next_power_of_2(n_rows)))
    y = torch.empty_like(x)
    softmax_kernel[(triton.cdiv(n_rows, rows),)](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                                 ROWS=rows, BLOCK_N=block_n)
    return y
