"""C = A @ B, written as a broadcast-multiply-reduce: no tl.dot.

One program per (row of A, BLOCK_N columns of C). It walks K in BLOCK_K chunks, multiplies a
chunk of the A row against a [BLOCK_K, BLOCK_N] tile of B and sums over K with tl.sum. It is
correct for any shape and easy to read, but every program re-reads a whole column strip of B
(B is read M times) and the math runs on the vector units instead of the tensor/cube units.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_rowwise_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    m = tl.program_id(0)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + m * stride_am + offs_k * stride_ak, mask=offs_k < K, other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.sum(a.to(tl.float32)[:, None] * b.to(tl.float32), axis=0)
    tl.store(c_ptr + m * stride_cm + offs_n * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=offs_n < N)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a: [M, K], b: [K, N] → [M, N] in a's dtype (fp32 accumulation)."""
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], "matmul expects [M,K] @ [K,N]"
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    block_n = min(64, triton.next_power_of_2(N))
    block_k = min(32, triton.next_power_of_2(K))
    grid = (M, triton.cdiv(N, block_n))
    matmul_rowwise_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                c.stride(0), c.stride(1), BLOCK_N=block_n, BLOCK_K=block_k)
    return c
