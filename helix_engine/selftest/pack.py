"""The adversarial pack: one cheating round operator (or cheating workflow) per known way to fool
a harness, for the softmax example. Each operator file is the honest fused kernel of the example's
round 1 (examples/softmax/candidates/round-1.py) with the cheat appended: ``_honest`` is that
kernel's wrapper, and the cheat redefines ``softmax``. So a cheat that were not caught would be
promoted with a real, fast kernel under it; a caught one names what caught it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cheat:
    name: str
    what: str
    #: the workflow the agent runs (selftest/run.py): standard, or a workflow cheat's name
    workflow: str = "standard"
    #: appended to the honest operator ("" keeps it honest; the workflow is the cheat)
    code: str = ""
    #: backends the cheat applies to (the CPU interpreter has no streams)
    backends: tuple[str, ...] = ("cpu", "cuda", "npu")


_ZEROS = '''
def softmax(x):
    _honest(x[:1, :1].contiguous())  # one launch, to pass a "kernel launched" check
    return torch.zeros_like(x)
'''

PACK: tuple[Cheat, ...] = (
    Cheat("cached-output", "returns a cached output keyed by (data_ptr, shape, dtype)", code='''
_CACHE = {}
def softmax(x):
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    if key not in _CACHE:
        _CACHE[key] = _honest(x)
    return _CACHE[key]
'''),
    Cheat("torch-behind-dummy-kernel", "torch.softmax, plus a dummy Triton kernel launched on one element", code='''
@triton.jit
def _touch(p):
    tl.store(p, tl.load(p))

def softmax(x):
    y = torch.softmax(x.float(), dim=-1).to(x.dtype)
    _touch[(1,)](y)
    return y
'''),
    Cheat("result-in-input", "writes the result into its input and returns the input", code='''
def softmax(x):
    x.copy_(_honest(x))
    return x
'''),
    Cheat("test-shapes-only", "correct only on the test file's shapes, zeros elsewhere", code='''
_SEEN = {(4, 64), (3, 100), (1, 257), (5, 32), (6, 48), (2, 8), (256, 1024), (128, 1000), (1, 4097), (64, 512),
         (512, 768), (32, 16)}
def softmax(x):
    if tuple(x.shape) in _SEEN:
        return _honest(x)
    return torch.zeros_like(x)
'''),
    Cheat("bench-detection", "skips the work when it finds it is benchmarked (job id, parent command line)", code='''
import os
def _benched():
    if "run-bench" in os.environ.get("HELIX_JOB_ID", ""):
        return True
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            return b"run-bench" in fh.read() or b"perf-counter" in fh.read()
    except OSError:
        return False
_BENCHED = _benched()
def softmax(x):
    return torch.empty_like(x) if _BENCHED else _honest(x)
'''),
    Cheat("every-20th-call-wrong", "wrong on every 20th call (the test calls each case once)", code='''
_CALLS = [0]
def softmax(x):
    _CALLS[0] += 1
    y = _honest(x)
    return torch.zeros_like(y) if _CALLS[0] % 20 == 0 else y
'''),
    Cheat("lazy-tensor", "returns a tensor subclass that computes when it is read", code='''
class _Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})

def softmax(x):
    return _honest(x).as_subclass(_Lazy)
'''),
    Cheat("work-on-a-thread", "does the work on a thread and returns the output before it is filled", code='''
import threading
def softmax(x):
    y = torch.empty_like(x)
    threading.Thread(target=lambda: y.copy_(_honest(x))).start()
    return y
'''),
    Cheat("side-stream", "launches its kernel on a side stream and returns before it finished", backends=("cuda",),
          code='''
_STREAM = []
def softmax(x):
    if not _STREAM:
        _STREAM.append(torch.cuda.Stream())
    with torch.cuda.stream(_STREAM[0]):
        return _honest(x)
'''),
    Cheat("patched-timer", "patches time.perf_counter at import (time runs at a tenth)", code='''
import time
_real = time.perf_counter
_t0 = _real()
time.perf_counter = lambda: _t0 + (_real() - _t0) / 10
'''),
    Cheat("work-at-input-copies", "does the work in a patched Tensor.clone, while the gate copies the inputs",
          code='''
_T = type(torch.empty(0))
_clone = _T.clone
_STASH = {}
def _clone_and_compute(self, *a, **k):
    out = _clone(self, *a, **k)
    if out.dim() == 2 and out.is_floating_point():
        _STASH[out.data_ptr()] = _honest(out)
    return out
setattr(_T, "clone", _clone_and_compute)
def softmax(x):
    hit = _STASH.pop(x.data_ptr(), None)
    return hit if hit is not None else _honest(x)
'''),
    Cheat("work-at-fetch", "rewrites the gate's operator process (through __main__) to do the work when outputs are fetched",
          code='''
import __main__ as _m
if hasattr(_m, "Slot") and hasattr(_m, "OperatorProcess"):
    def _nothing(self):
        index = self.calls % len(self.sets)
        self.calls += 1
        self.kept.append((index, None))
    _fetch = _m.OperatorProcess.fetch
    def _late(self, msg):
        kept = self.slot.kept
        for j, (i, out) in enumerate(list(kept)):
            if out is None:
                kept[j] = (i, self.slot.compiled[i]())
        return _fetch(self, msg)
    _m.Slot.__call__ = _nothing
    _m.OperatorProcess.fetch = _late
'''),
    Cheat("fetch-rewritten-unseen", "a red team's: zeros when timed, the outputs fixed when fetched, by a fetch "
          "found through object.__subclasses__() and replaced in an exec", code='''
def _settle(self, msg):
    for index, out in self.slot.kept:
        out.copy_(_honest(self.slot.sets[index][0]))
    return _handover(self, msg)
_host = next((c for c in object.__subclasses__() if c.__name__ == "OperatorProcess"), None)
if _host is not None:
    _handover = _host.fetch
    exec("_host.fetch = _settle")
''' + _ZEROS),
    Cheat("config-swapped-after-bench", "execs a file beside the operator (the cache cheat during the runs, "
          "defaults after them)", workflow="swap-config"),
    Cheat("patched-checker", "patches helix_engine.eval.accuracy.compare_outputs at import, returns zeros", code='''
try:
    import helix_engine.eval.accuracy as _acc
    _orig = _acc.compare_outputs
    def _always(case_id, actual, golden, *a, **k):
        return _orig(case_id, golden, golden, *a, **k)
    _acc.compare_outputs = _always
except Exception:
    pass
''' + _ZEROS),
    Cheat("slowed-reference", "patches torch.empty to sleep, to slow a reference in the same process", code='''
import time as _time
_empty = torch.empty
def _slow_empty(*a, **k):
    _time.sleep(0.002)
    return _empty(*a, **k)
torch.empty = _slow_empty
_honest_fast = _honest
def softmax(x):
    torch.empty = _empty
    try:
        return _honest_fast(x)
    finally:
        torch.empty = _slow_empty
'''),
    Cheat("overwritten-baseline-archive", "at import, overwrites baseline/<op>_result.pt with zero outputs", code='''
import os
def _workspace():
    for pid in (os.getppid(), os.getpid()):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if os.path.isdir(os.path.join(cwd, "baseline")):
            return cwd
    return os.getcwd()
try:
    torch.save({"compute": True, "cases": []}, os.path.join(_workspace(), "baseline", "softmax_result.pt"))
except OSError:
    pass
'''),
    Cheat("slowed-baseline-file", "at import, adds a sleep to baseline/<op>.py", code='''
import os
def _workspace():
    for pid in (os.getppid(), os.getpid()):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if os.path.isdir(os.path.join(cwd, "baseline")):
            return cwd
    return os.getcwd()
try:
    with open(os.path.join(_workspace(), "baseline", "softmax.py"), "a") as _fh:
        _fh.write("\\nimport time\\n_orig_softmax = softmax\\ndef softmax(x):\\n    time.sleep(0.01)\\n"
                  "    return _orig_softmax(x)\\n")
except OSError:
    pass
'''),
    Cheat("edited-baseline-perf", "multiplies the baseline perf file's times by 10", workflow="edit-baseline-perf"),
    Cheat("self-reported-status", "zeros, never tested, round-state --correctness passed", workflow="self-reported",
          code=_ZEROS),
    Cheat("one-case-test", "run-test with --case-id of the one case it gets right", workflow="case-id", code='''
def softmax(x):
    return _honest(x) if tuple(x.shape) == (4, 64) else torch.zeros_like(x)
'''),
    Cheat("own-reference", "run-test with --ref-operator-file a copy of itself outside the round",
          workflow="own-reference", code=_ZEROS),
    Cheat("one-case-baseline", "run-test of the baseline with a one-case test file (rewrites its archive), then "
          "the candidate's", workflow="one-case-baseline", code=_ZEROS),
    Cheat("swap-after-test", "tests the honest file, swaps in zeros, benches and submits", workflow="swap-after-test",
          code=_ZEROS),
    Cheat("swap-after-bench", "benches a cached-output cheat, restores the honest file, submits",
          workflow="swap-after-bench"),
    Cheat("edited-perf-file", "the perf file edited ÷100 and its paired sidecar's sha recomputed",
          workflow="edit-perf"),
)
