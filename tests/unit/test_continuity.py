"""Upstream's kernel-continuity check (round checker stage 6) read from the syntax tree: every
launch form Triton accepts passes, a round with no launch left fails with upstream's sentence."""

from __future__ import annotations

import pytest

from helix_engine.state.continuity import (
    CONTINUITY_ISSUE,
    continuity_issue,
    kernel_continuity_ok,
)

HEAD = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


'''

LAUNCHES = {
    "tuple grid": "def f(x):\n    kernel[(1,)](x, 1, BLOCK=8)\n",
    "nested brackets": "def f(x):\n    kernel[(x.shape[0],)](x, x.shape[0], BLOCK=8)\n",
    "deeply nested": "def f(x):\n    kernel[(x.shape[0] * x.stride()[1], sizes[idx[0]])](x, 1, BLOCK=8)\n",
    "call in grid": "def f(x):\n    kernel[(triton.cdiv(x.numel(), 256),)](x, x.numel(), BLOCK=256)\n",
    "named grid": "def f(x, grid):\n    kernel[grid](x, 1, BLOCK=8)\n",
    "grid lambda name": "def f(x):\n    grid = lambda meta: (triton.cdiv(x.numel(), meta['BLOCK']),)\n"
                        "    kernel[grid](x, x.numel(), BLOCK=8)\n",
    "inline lambda": "def f(x):\n    kernel[lambda meta: (triton.cdiv(x.numel(), meta['BLOCK']),)](x, 1, BLOCK=8)\n",
    "multi-line launch": ("def f(x):\n    kernel[\n        (x.shape[0],\n         x.shape[1])\n    ](\n"
                          "        x, 1, BLOCK=8,\n    )\n"),
    "returned launch": "def f(x):\n    return kernel[(1,)](x, 1, BLOCK=8)\n",
    "kernel bound to another name": "launch = kernel\n\ndef f(x):\n    launch[(x.shape[0],)](x, 1, BLOCK=8)\n",
    "kernel chosen by if": "def f(x, fast):\n    k = kernel if fast else kernel\n    k[(1,)](x, 1, BLOCK=8)\n",
    "kernel passed to a helper": "def run(k, x):\n    k[(x.shape[0],)](x, 1, BLOCK=8)\n\ndef f(x):\n    run(kernel, x)\n",
    "kernel kept on self": "class Op:\n    def __init__(self):\n        self.k = kernel\n\n"
                           "    def __call__(self, x):\n        self.k[(1,)](x, 1, BLOCK=8)\n",
    "kernel table": "KERNELS = {'fwd': kernel}\n\ndef f(x):\n    KERNELS['fwd'][(1,)](x, 1, BLOCK=8)\n",
}


@pytest.mark.parametrize("body", list(LAUNCHES.values()), ids=list(LAUNCHES))
def test_every_launch_form_passes(body: str) -> None:
    assert continuity_issue(HEAD + body, "opt_op.py") is None


OTHER_KERNELS = {
    "autotune decorator": '''\
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({'BLOCK': 64})], key=['n'])
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


def f(x):
    k[lambda meta: (triton.cdiv(x.numel(), meta['BLOCK']),)](x, x.numel())
''',
    "jit by call": '''\
import triton as tr
import triton.language as tl


def _body(x_ptr, n):
    pass


k = tr.autotune(configs=[], key=[])(tr.jit(_body))


def f(x):
    k[(x.shape[0],)](x, 1)
''',
    "from triton import jit": '''\
from triton import jit
import triton.language as tl


@jit
def k(x_ptr):
    pass


def f(x):
    k[(x.shape[0],)](x)
''',
    "imported kernel": '''\
import triton
from .kernels import softmax_kernel


def f(x):
    softmax_kernel[(x.shape[0],)](x)
''',
    "attribute of an imported module": '''\
import triton
import my_kernels as mk
from . import more_kernels


def f(x):
    mk.softmax_kernel[(x.shape[0],)](x)
    more_kernels.fwd.kernel[(1,)](x)
''',
    "tilelang": "import tilelang.language as T\n\nwith T.Kernel(T.ceildiv(n, 128), threads=(128, 1)) as bx:\n    pass\n",
}


@pytest.mark.parametrize("source", list(OTHER_KERNELS.values()), ids=list(OTHER_KERNELS))
def test_other_kernel_bindings_pass(source: str) -> None:
    assert kernel_continuity_ok(source)


FAILING = {
    "pure pytorch": "import torch\n\ndef relu(x):\n    return torch.relu(x)\n",
    "launch only in a comment": HEAD + "def f(x):\n    return torch.relu(x)  # kernel[grid](x)\n",
    "launch only in a string": HEAD + "DOC = 'kernel[(1,)](x)'\n\ndef f(x):\n    return torch.relu(x)\n",
    "kernel defined, never launched": HEAD + "def f(x):\n    return torch.relu(x)\n",
    "subscript call of a non-kernel": HEAD + "OPS = {'r': torch.relu}\n\ndef f(x):\n    return OPS['r'](x)\n",
    "torch attribute subscripted": HEAD + "def f(x):\n    return torch.ops.aten.relu['default'](x)\n",
    "launch without any triton signal": "from .kernels import k\n\ndef f(x):\n    k[(1,)](x)\n",
    "tilelang without the block": "import tilelang.language as T\n\nT.Kernel(8)\n",
}


@pytest.mark.parametrize("source", list(FAILING.values()), ids=list(FAILING))
def test_no_launch_fails_with_upstream_sentence(source: str) -> None:
    assert continuity_issue(source, "opt_op.py") == CONTINUITY_ISSUE
    assert CONTINUITY_ISSUE == "round operator no longer preserves a recognizable Ascend kernel launch path"


def test_unparseable_file_is_a_clear_problem() -> None:
    issue = continuity_issue(HEAD + "def f(x:\n    kernel[(1,)](x)\n", "opt_op.py")
    assert issue is not None and issue != CONTINUITY_ISSUE
    assert issue.startswith("opt_op.py does not parse as Python (line 11: ")
    assert "fix the syntax error" in issue
