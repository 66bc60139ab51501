"""Kernel coverage on the CPU backend (helix_engine/gate/coverage.py): the elements an operator's
own Triton kernels store under TRITON_INTERPRET=1, so a torch result behind a dummy launch shows.

The kernels run in a child process, as in tests/e2e/test_examples.py: TRITON_INTERPRET=1 must be
set before triton defines any kernel, and operator code never runs in the test process. One
child runs every scenario and prints one JSON line; the tests read it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helix_engine.gate.coverage import coverage_ratio

ROOT = Path(__file__).resolve().parents[2]

DUMMY = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def touch_kernel(out_ptr):
    tl.store(out_ptr, 0.0)


def softmax(x):
    scratch = torch.empty(1, device=x.device)
    touch_kernel[(1,)](scratch)
    return torch.softmax(x, -1)
'''

MASKED = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def half_kernel(y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, offs.to(tl.float32), mask=(offs % 2) == 0)


def copy(x, block):
    y = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y


def evens(block):
    y = torch.zeros(block)
    half_kernel[(1,)](y, BLOCK=block)
    return y
'''

TUNED = '''\
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def tuned_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


# two configs, benchmarked by a stand-in timer (the CPU interpreter has no device benchmarker)
@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"],
                 do_bench=lambda fn, quantiles: (fn(), [1.0, 1.0, 1.0])[1])
@triton.jit
def benched_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.heuristics({"BLOCK": lambda args: 128})
@triton.jit
def heuristic_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def run(kernel, x):
    y = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y
'''

BORROWER = '''\
import torch
from masked_op import copy_kernel


def copy(x):
    y = torch.empty_like(x)
    copy_kernel[(1,)](x, y, x.numel(), BLOCK=64)
    return y
'''

CHILD = r'''
import importlib.util, json, sys
import numpy as np
import torch
from helix_engine.gate import coverage as cov_mod
from helix_engine.gate.coverage import CoverageUnavailable, KernelCoverage, coverage_ratio

folder = sys.argv[1]
sys.path.insert(0, folder)
out = {}

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

def counted(module, call):
    cov = KernelCoverage()
    cov.install(module)
    try:
        result = call()
        return {"stored": cov.stored_elements(), "launches": cov.launches(),
                "by_kernel": cov.stored_by_kernel(), "kernels": cov.kernels()}, result
    finally:
        cov.uninstall()

# 1. the softmax example's baseline: three kernels, all their stores counted
sm = load(sys.argv[2], "softmax_baseline")
x = torch.randn(8, 64, dtype=torch.float32)
out["softmax"], y = counted(sm, lambda: sm.softmax(x))
out["softmax"]["right"] = bool(torch.allclose(y, torch.softmax(x, -1), atol=1e-5))
out["softmax"]["run_restored"] = all("run" not in k.__dict__ for k in
                                     (sm.row_max_kernel, sm.exp_sum_kernel, sm.normalize_kernel))

# 2. a torch result behind a one-element dummy launch
dummy = load(f"{folder}/dummy_op.py", "dummy_op")
out["dummy"], y = counted(dummy, lambda: dummy.softmax(x))
out["dummy"]["right"] = bool(torch.allclose(y, torch.softmax(x, -1)))

# 3. masked stores: only the lanes the mask keeps
masked = load(f"{folder}/masked_op.py", "masked_op")
v = torch.randn(100)
out["masked"], y = counted(masked, lambda: masked.copy(v, 64))
out["masked"]["right"] = bool(torch.equal(y, v))
out["evens"], _ = counted(masked, lambda: masked.evens(16))

# 4. autotuned and heuristics kernels, counted through their .fn
tuned = load(f"{folder}/tuned_op.py", "tuned_op")
w = torch.randn(70)
cov = KernelCoverage()
cov.install(tuned)
out["tuned_kernels"] = sorted(cov.kernels())
y = tuned.run(tuned.tuned_kernel, w)
out["tuned"] = {"stored": cov.stored_elements(), "launches": cov.launches(), "right": bool(torch.equal(y, w * 2))}
cov.reset()
tuned.run(tuned.benched_kernel, w)
out["benched_first"] = {"stored": cov.stored_elements(), "launches": cov.launches()}
cov.reset()
tuned.run(tuned.benched_kernel, w)
out["benched_again"] = {"stored": cov.stored_elements(), "launches": cov.launches()}
cov.reset()
tuned.run(tuned.heuristic_kernel, w)
out["heuristic"] = {"stored": cov.stored_elements(), "launches": cov.launches()}
cov.uninstall()
cov.reset()
tuned.run(tuned.heuristic_kernel, w)
out["after_uninstall"] = {"stored": cov.stored_elements(), "launches": cov.launches(),
                          "builder_hook_left": "create_masked_store" in cov_mod._seams().builder.__dict__}

# 5. a kernel imported from another file is not the module's own
borrower = load(f"{folder}/borrower_op.py", "borrower_op")
out["borrowed"], _ = counted(borrower, lambda: borrower.copy(torch.randn(10)))

# 6. the interpreter's store path moved: the probe sees it, install raises and changes nothing
from triton.runtime import interpreter
cov_mod._SEAMS, cov_mod._PROBE_OK = None, False
builder = interpreter.interpreter_builder
builder.create_store = lambda ptr, val, cache_policy: interpreter._interpreter.store(
    ptr.data, val.data, np.ones_like(ptr.data, dtype=bool))
try:
    KernelCoverage().install(masked)
    out["moved"] = "installed"
except CoverageUnavailable as exc:
    out["moved"] = str(exc)
out["moved_untouched"] = "run" not in masked.copy_kernel.__dict__ and "create_masked_store" not in builder.__dict__
del builder.create_store

# 7. an unknown create_masked_store signature
cov_mod._SEAMS, cov_mod._PROBE_OK = None, False
original = type(builder).create_masked_store
type(builder).create_masked_store = lambda self, ptrs, value, mask: original(self, ptrs, value, mask, None)
try:
    KernelCoverage().install(masked)
    out["signature"] = "installed"
except CoverageUnavailable as exc:
    out["signature"] = str(exc)
type(builder).create_masked_store = original
print("RESULT " + json.dumps(out), flush=True)
'''

NOT_INTERPRETED = r'''
import types
from helix_engine.gate.coverage import CoverageUnavailable, KernelCoverage
try:
    KernelCoverage().install(types.ModuleType("op"))
    print("RESULT installed")
except CoverageUnavailable as exc:
    print("RESULT " + str(exc))
'''


def _child(code: str, *args: str, interpret: bool) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env.update(TRITON_INTERPRET="1", HELIX_DEVICE="cpu", HELIX_BACKEND="cpu")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return lines[-1][len("RESULT "):]


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("coverage_ops")
    for name, source in (("dummy_op", DUMMY), ("masked_op", MASKED), ("tuned_op", TUNED),
                         ("borrower_op", BORROWER)):
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    return json.loads(_child(CHILD, str(folder), str(ROOT / "examples" / "softmax" / "softmax.py"), interpret=True))


@pytest.mark.slow
def test_softmax_baseline_counts_every_store_of_its_three_kernels(found: dict[str, Any]) -> None:
    softmax = found["softmax"]
    assert softmax["right"] and softmax["run_restored"]
    assert softmax["launches"] == {"row_max_kernel": 1, "exp_sum_kernel": 1, "normalize_kernel": 1}
    # the output kernel writes all 8x64 elements; the others add their intermediates
    # (8 row maxima; the 8x64 exp buffer and 8 row sums)
    assert softmax["by_kernel"] == {"row_max_kernel": 8, "exp_sum_kernel": 520, "normalize_kernel": 512}
    assert softmax["stored"] == 1040 >= 512
    assert coverage_ratio(softmax["stored"], 8 * 64) > 1.0


@pytest.mark.slow
def test_torch_result_behind_a_dummy_launch_covers_nothing(found: dict[str, Any]) -> None:
    dummy = found["dummy"]
    assert dummy["right"]  # the numbers are right: only coverage tells
    assert dummy["stored"] == 1 and dummy["launches"] == {"touch_kernel": 1}
    assert coverage_ratio(dummy["stored"], 8 * 64) < 0.01


@pytest.mark.slow
def test_masked_off_lanes_are_not_counted(found: dict[str, Any]) -> None:
    # 100 elements in two programs of 64 lanes: 28 lanes of the second are masked off
    assert found["masked"]["right"]
    assert found["masked"]["stored"] == 100 and found["masked"]["launches"] == {"copy_kernel": 1}
    assert found["evens"]["stored"] == 8 and found["evens"]["launches"] == {"half_kernel": 1}


@pytest.mark.slow
def test_autotuned_and_heuristics_kernels_are_counted(found: dict[str, Any]) -> None:
    assert found["tuned_kernels"] == ["benched_kernel", "heuristic_kernel", "tuned_kernel"]
    assert found["tuned"] == {"stored": 70, "launches": {"tuned_kernel": 1}, "right": True}
    # the first call benchmarks both configs (two launches) and then runs the chosen one;
    # after reset() the tuned call alone counts
    assert found["benched_first"] == {"stored": 210, "launches": {"benched_kernel": 3}}
    assert found["benched_again"] == {"stored": 70, "launches": {"benched_kernel": 1}}
    assert found["heuristic"] == {"stored": 70, "launches": {"heuristic_kernel": 1}}


@pytest.mark.slow
def test_uninstall_puts_the_interpreter_back(found: dict[str, Any]) -> None:
    assert found["after_uninstall"] == {"stored": 0, "launches": {}, "builder_hook_left": False}


@pytest.mark.slow
def test_kernels_imported_from_another_file_are_not_the_modules(found: dict[str, Any]) -> None:
    assert found["borrowed"]["kernels"] == [] and found["borrowed"]["stored"] == 0


@pytest.mark.slow
def test_unexpected_interpreter_internals_raise_coverage_unavailable(found: dict[str, Any]) -> None:
    assert "probe counted 3 stored elements" in found["moved"]  # the unmasked store bypassed the hook
    assert found["moved_untouched"]
    assert "create_masked_store takes ['ptrs', 'value', 'mask']" in found["signature"]


@pytest.mark.slow
def test_compiled_kernels_are_not_measured() -> None:
    message = _child(NOT_INTERPRETED, interpret=False)
    assert message.startswith("Triton kernels are compiled, not interpreted") and "TRITON_INTERPRET=1" in message


def test_coverage_ratio() -> None:
    assert coverage_ratio(512, 512) == 1.0
    assert coverage_ratio(1, 512) == pytest.approx(1 / 512)
    assert coverage_ratio(1040, 512) > 2.0  # intermediates count too
    assert coverage_ratio(0, 0) == 1.0
    with pytest.raises(ValueError):
        coverage_ratio(-1, 4)
