"""The gate's defences, one cheat each, on a small torch-only operator (fast on the CPU): each
cheat's paired run-bench (or run-test) fails with the sentence that names what was found, and
the honest operator passes with no finding. The Triton versions of the same cheats, through the
whole workflow, are `helix selftest` (run by CI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.eval.bench import run_bench
from helix_engine.eval.test import run_test

HONEST = """\
import time
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr):
    pass


def _honest(x):
    time.sleep(0.01)  # a kernel of 10 ms: work a loaded box cannot hide in its noise (timer, hidden work)
    return x * 2.0


def scale(x):
    return _honest(x)
"""

BENCH = """\
# api-name: scale
# api-kind: torch-function
# kernels: scale_kernel
import torch

from helix_engine.harness import device


def build_operator_api(m):
    return m.scale


def build_bench_cases():
    return [{"id": f"n{n}", "n": n, "seed": n, "warmup": 1, "repeats": 6} for n in (256, 300)]


def build_bench_case_fn(api, case):
    torch.manual_seed(case["seed"])
    x = torch.randn(case["n"], device=device())
    return lambda: api(x)
"""

TEST = """\
# test-mode: differential
# api-name: scale
# api-kind: torch-function
import torch


def build_operator_api(m):
    return m.scale


def build_differential_test_cases(api):
    cases = []
    for n in (16, 33):
        torch.manual_seed(n)
        x = torch.randn(n)
        cases.append({"id": f"n{n}", "inputs": (x,), "fn": lambda x=x: api(x)})
    return cases
"""

CHEATS = {
    "cache": ("""
_CACHE = {}
def scale(x):
    key = x.data_ptr()
    if key not in _CACHE:
        _CACHE[key] = _honest(x)
    return _CACHE[key]
""", "reused input buffers refilled with new values"),
    "in-place": ("""
def scale(x):
    return x.mul_(2.0)
""", "shares storage with input #0"),
    "lazy": ("""
class Lazy(torch.Tensor):
    pass
def scale(x):
    return _honest(x).as_subclass(Lazy)
""", "tensor subclass (Lazy)"),
    "thread": ("""
import threading
def scale(x):
    y = torch.empty_like(x)
    threading.Thread(target=lambda: y.copy_(_honest(x))).start()
    return y
""", "started 1 Python thread"),
    "timer": ("""
import sys
_main = sys.modules["__main__"]  # the operator process's own clock, bound before this file was imported
if hasattr(_main, "_clock"):
    _real = _main._clock
    _main._clock = lambda: _real() / 10
""", "its timer was changed"),
    "workspace-write": ("""
import os
def scale(x):
    with open(os.path.join(os.readlink(f"/proc/{os.getppid()}/cwd"), "scribble.txt"), "w") as fh:
        fh.write("x")
    return _honest(x)
""", "wrote to the workspace (scribble.txt)"),
    "work-at-input-copies": ("""
_T = type(torch.empty(0))
_clone = _T.clone
_STASH = {}
def _clone_and_compute(self, *a, **k):  # the gate copies each input set per call: do the work then
    out = _clone(self, *a, **k)
    if out.dim() == 1 and out.numel() >= 256:
        _STASH[out.data_ptr()] = _honest(out)
    return out
setattr(_T, "clone", _clone_and_compute)
def scale(x):
    hit = _STASH.pop(x.data_ptr(), None)
    return hit if hit is not None else _honest(x)
""", "rewrote the gate's own code in it (Tensor.clone)"),
    "work-at-input-decode": ("""
_load = torch.load
_STASH = {}
def _key(t):
    return (t.numel(), float(t.reshape(-1)[0]), float(t.reshape(-1)[-1]))
def _load_and_compute(*a, **k):  # the gate's inputs arrive through torch.load: do the work then
    got = _load(*a, **k)
    for t in got if isinstance(got, list) else []:
        if isinstance(t, torch.Tensor) and t.dim() == 1 and t.numel() >= 256:
            _STASH[_key(t)] = _honest(t)
    return got
torch.load = _load_and_compute
def scale(x):
    hit = _STASH.get(_key(x))
    return hit.clone() if hit is not None else _honest(x)
""", "work hidden from the timer"),
    "work-at-fetch": ("""
import __main__ as _m
if hasattr(_m, "Slot") and hasattr(_m, "OperatorProcess"):  # the gate's operator process
    def _nothing(self):
        index = self.calls % len(self.sets)
        self.calls += 1
        self.kept.append((index, None))
    _fetch = _m.OperatorProcess.fetch
    def _late(self, msg):  # the deferred calls made when their outputs are asked for
        kept = self.slot.kept
        for j, (i, out) in enumerate(list(kept)):
            if out is None:
                kept[j] = (i, self.slot.compiled[i]())
        return _fetch(self, msg)
    _m.Slot.__call__ = _nothing
    _m.OperatorProcess.fetch = _late
""", "rewrote the gate's own code in it"),
    "fetch-rewritten-through-subclasses": ("""
def scale(x):  # the timed calls: zeros (no work)
    return torch.zeros_like(x)
def _settle(self, msg):  # a red team's: the outputs fixed up when the gate fetches them
    for index, out in self.slot.kept:
        out.copy_(self.slot.sets[index][0] * 2.0)
    return _handover(self, msg)
_host = next((c for c in object.__subclasses__() if c.__name__ == "OperatorProcess"), None)
if _host is not None:
    _handover = _host.fetch
    exec("_host.fetch = _settle")  # out of the lint's sight
""", "rewrote the gate's own code in it (OperatorProcess.fetch)"),
    "code-object-swap": ("""
def _free(self):  # Slot.__call__'s code swapped for one that keeps the input as the output
    index = self.calls % len(self.sets)
    self.calls += 1
    out = self.sets[index][0]
    self.kept.append((index, out))
    return out
_slot = next((c for c in object.__subclasses__() if c.__name__ == "Slot"), None)
if _slot is not None:
    exec("_slot.__call__.__code__ = _free.__code__")
""", "rewrote the gate's own code in it (Slot.__call__)"),
    "nth-call": ("""
_N = [0]
def scale(x):
    _N[0] += 1
    return _honest(x) * (0.0 if _N[0] % 9 == 0 else 1.0)
""", "differs from the reference's on the same inputs"),
}


def _workspace(tmp_path: Path, candidate: str) -> Path:
    ws = tmp_path / "ws"
    (ws / "baseline").mkdir(parents=True)
    (ws / "opt-round-1").mkdir()
    (ws / "baseline" / "scale.py").write_text(HONEST)
    (ws / "opt-round-1" / "opt_scale.py").write_text(candidate)
    (ws / "bench_scale.py").write_text(BENCH)
    (ws / "differential_test_scale.py").write_text(TEST)
    return ws


def test_the_honest_operator_passes_the_gate(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, HONEST)
    out = run_bench(ws / "opt-round-1" / "opt_scale.py", baseline_operator_file=ws / "baseline" / "scale.py")
    assert out.exit_code == 0, out.text
    tested = run_test(ws / "opt-round-1" / "opt_scale.py", ref_operator_file=ws / "baseline" / "scale.py")
    assert tested.exit_code == 0, tested.text


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_cheat_fails_its_paired_bench_with_what_was_found(tmp_path: Path, name: str) -> None:
    code, words = CHEATS[name]
    ws = _workspace(tmp_path, HONEST + code)
    out = run_bench(ws / "opt-round-1" / "opt_scale.py", baseline_operator_file=ws / "baseline" / "scale.py")
    assert out.exit_code != 0, out.text
    assert words in out.text, out.text
    record = json.loads((ws / ".helix" / "gate" / "opt-round-1.run-bench.json").read_text()) \
        if (ws / ".helix" / "gate" / "opt-round-1.run-bench.json").exists() else {"passed": False}
    assert record["passed"] is False  # no evidence submit-round would accept


def test_a_patched_time_module_is_put_back_and_refused(tmp_path: Path) -> None:
    """Patching time.perf_counter in the operator's process (the clock the process's own code reads)
    is undone before the gate answers, and the run fails with what was rewritten."""
    cheat = HONEST + """
_real = time.perf_counter
time.perf_counter = lambda: _real() / 10
"""
    ws = _workspace(tmp_path, cheat)
    out = run_bench(ws / "opt-round-1" / "opt_scale.py", baseline_operator_file=ws / "baseline" / "scale.py")
    assert out.exit_code != 0
    assert "the candidate's process rewrote the gate's own code in it (time.perf_counter)" in out.text, out.text


def test_a_held_out_run_catches_a_table_of_the_test_outputs(tmp_path: Path) -> None:
    """Right on the test's inputs only (it recognises their sizes): the visible test passes, the
    held-out one (new values, nearby sizes) fails."""
    cheat = HONEST + """
def scale(x):
    return _honest(x) if x.numel() in (16, 33) else torch.zeros_like(x)
"""
    ws = _workspace(tmp_path, cheat)
    op, ref = ws / "opt-round-1" / "opt_scale.py", ws / "baseline" / "scale.py"
    assert run_test(op, ref_operator_file=ref).exit_code == 0
    held = run_test(op, ref_operator_file=ref, held_out=True)
    assert held.exit_code == 1 and "held-out" in held.text, held.text


AUTOTUNED = """\
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def scale(x):
    y = torch.empty_like(x)
    scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y
"""


def test_an_autotuned_kernel_on_the_interpreter_fails_with_what_to_do(tmp_path: Path) -> None:
    """Triton's autotuner needs a device driver to time its configs; the CPU interpreter has none
    and Triton's own error ("0 active drivers") does not say so."""
    ws = _workspace(tmp_path, AUTOTUNED)
    out = run_test(ws / "opt-round-1" / "opt_scale.py", ref_operator_file=ws / "baseline" / "scale.py")
    assert out.exit_code != 0
    assert "active drivers" in out.text and "the CPU interpreter (TRITON_INTERPRET=1) has none" in out.text, out.text
