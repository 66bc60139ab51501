"""The seed's hard rules as AST lints (file:line warnings) and the code-equality rule."""

from __future__ import annotations

import pytest

from helix_engine.state.continuity import kernel_continuity_ok
from helix_engine.state.lints import lint_source, same_code, target_backend
from helix_engine.workspace.models import PerfRecord

CLEAN = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(out_ptr + offs, y, mask=mask)


def relu(x):
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out
'''


def test_clean_operator_has_no_warnings() -> None:
    assert lint_source(CLEAN, "opt_relu.py", backend="npu") == []


def test_maximum_without_propagate_nan_names_the_line() -> None:
    source = CLEAN.replace("tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)", "tl.minimum(tl.maximum(x, 0.0), 6.0)")
    problems = lint_source(source, "opt-round-1/opt_relu.py")
    assert [(p.line, p.severity) for p in problems] == [(11, "warning"), (11, "warning")]
    assert all("propagate_nan" in p.message for p in problems)
    assert {m.split("(")[0] for m in (p.message for p in problems)} == {"tl.minimum", "tl.maximum"}
    assert str(problems[0]).startswith("opt-round-1/opt_relu.py:11: ")


def test_maximum_through_an_alias_is_seen() -> None:
    source = CLEAN.replace("import triton.language as tl", "import triton.language as tlang\ntl = tlang").replace(
        "tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)", "tlang.maximum(x, 0.0)")
    assert any("tlang.maximum" in p.message for p in lint_source(source, "f.py"))


def test_two_jit_kernels_suggest_fusing() -> None:
    source = CLEAN + '''

@triton.jit(do_not_specialize=["n"])
def scale_kernel(x_ptr, n):
    pass


def both(x):
    relu_kernel[(1,)](x, x, 1, BLOCK=1)
    scale_kernel[(1,)](x, 1)
'''
    problems = [p for p in lint_source(source, "f.py") if "fuse" in p.message]
    assert len(problems) == 1
    assert problems[0].line == source.splitlines().index("def scale_kernel(x_ptr, n):") + 1
    assert "relu_kernel (line 7)" in problems[0].message and "2 @triton.jit kernels" in problems[0].message


LAYERNORM_FWD_BWD = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_fwd_fused(X, Y, N, BLOCK: tl.constexpr):
    pass
@triton.jit
def _layer_norm_bwd_dx_fused(X, Y, N, BLOCK: tl.constexpr):
    pass
@triton.jit
def _layer_norm_bwd_dwdb(X, Y, N, BLOCK: tl.constexpr):
    pass
class LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)
        _layer_norm_fwd_fused[(1,)](x, y, 1, BLOCK=1)
        return y
    @staticmethod
    def backward(ctx, dy):
        dx = torch.empty_like(dy)
        _layer_norm_bwd_dx_fused[(1,)](dy, dx, 1, BLOCK=1)
        _layer_norm_bwd_dwdb[(1,)](dy, dx, 1, BLOCK=1)
        return dx
layer_norm = LayerNorm.apply
"""


def test_the_fuse_hint_counts_only_kernels_on_the_forward_path() -> None:
    """The Triton tutorial's LayerNorm: one forward kernel and two that only its autograd backward
    launches (the bench times the forward call): no hint to fuse; three forward kernels: one."""
    assert [p for p in lint_source(LAYERNORM_FWD_BWD, "ln.py") if "fuse" in p.message] == []
    forward_only = LAYERNORM_FWD_BWD.replace("def backward", "def also_forward")
    hinted = [p for p in lint_source(forward_only, "ln.py") if "fuse" in p.message]
    assert len(hinted) == 1 and "3 @triton.jit kernels" in hinted[0].message


@pytest.mark.parametrize(
    "snippet",
    ["relu_kernel[grid](x, out, n, BLOCK=256, num_warps=4)",
     "cfg = triton.Config({'BLOCK': 128}, num_warps=8)",
     "cfg = {'BLOCK': 128, 'num_warps': 8}"],
)
def test_num_warps_only_warns_on_npu(snippet: str) -> None:
    source = CLEAN + "\n\ndef extra(x, out, n, grid):\n    " + snippet + "\n"
    line = source.splitlines().index("    " + snippet) + 1
    npu = [p for p in lint_source(source, "f.py", backend="npu") if "num_warps" in p.message]
    assert [p.line for p in npu] == [line]
    assert [p for p in lint_source(source, "f.py", backend="cuda") if "num_warps" in p.message] == []


def test_pytorch_replacement_is_flagged() -> None:
    source = CLEAN.replace("relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)",
                           "out = torch.relu(x)  # relu_kernel[grid](...) kept only in a comment")
    problems = lint_source(source, "f.py")
    assert [p.line for p in problems if "PyTorch" in p.message] == [1]
    # Upstream's regex check was fooled by the comment; the syntax-tree check is not.
    assert not kernel_continuity_ok(source)


def test_unparseable_source_gives_one_warning() -> None:
    [problem] = lint_source("def broken(:\n", "f.py")
    assert "does not parse" in problem.message


def test_kernel_continuity_upstream_rule() -> None:
    assert kernel_continuity_ok(CLEAN)
    assert not kernel_continuity_ok("import torch\n\ndef relu(x):\n    return torch.relu(x)\n")
    tilelang = "import tilelang.language as T\nwith T.Kernel(8) as bx:\n    pass\n"
    assert kernel_continuity_ok(tilelang)


def test_same_code_ignores_comments_and_whitespace_only() -> None:
    reformatted = CLEAN.replace("    mask = offs < n", "    # a new comment\n\n    mask   =   offs<n  # trailing")
    assert same_code(CLEAN, reformatted)
    assert not same_code(CLEAN, CLEAN.replace("BLOCK=256", "BLOCK=512"))
    # Syntax errors fall back to a whitespace-insensitive text comparison.
    assert same_code("def f(:\n  x", "def f(:\n\tx")
    assert not same_code("def f(:\n  x", "def f(:\n  y")


def test_target_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_BACKEND", raising=False)
    npu_record = PerfRecord(case_label="a", bench_mode="torch-npu-profiler")
    assert target_backend(None, [npu_record]) == "npu"
    assert target_backend(None, [PerfRecord(case_label="a", bench_mode="device-event", backend="cuda")]) == "cuda"
    assert target_backend(None, []) is None
    monkeypatch.setenv("HELIX_BACKEND", "cpu")
    assert target_backend(None, [npu_record]) == "cpu"
    monkeypatch.setenv("HELIX_BACKEND", "auto")
    assert target_backend(None, [npu_record]) == "npu"


def test_lint_round_uses_the_workspace_backend(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    from helix_engine.state.lints import lint_round

    from state_fixtures import new_workspace, put_round, scaled

    monkeypatch.delenv("HELIX_BACKEND", raising=False)
    ws = new_workspace(tmp_path)
    rdir = put_round(ws, 1, scaled(0.8))
    assert lint_round(rdir) == []
    code = (rdir / "opt_add.py").read_text().replace("BLOCK=512)", "BLOCK=512, num_warps=4)")
    (rdir / "opt_add.py").write_text(code)
    [problem] = lint_round(rdir)
    assert problem.file == "opt-round-1/opt_add.py" and "num_warps" in problem.message
    monkeypatch.setenv("HELIX_BACKEND", "cuda")
    assert lint_round(rdir) == []
    assert lint_round(ws / "opt-round-9") == []
