"""Static anti-cheat lints of a round's operator (helix_engine/state/anti_cheat.py, issue 27 item 6):
each fires, at the line marked ``# <-``, with a sentence that says what was found and why it
matters to a gate; the near misses honest operators write do not fire; the shipped examples'
operators (baselines and candidates) give no finding at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_engine.state.lints import anti_cheat_findings, lint_source

from builders import operator_source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

HEAD = '''\
import os
import sys
import time
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def touch_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)

'''


def _marked(body: str) -> tuple[str, list[int]]:
    source = HEAD + body
    lines = [i for i, line in enumerate(source.splitlines(), start=1) if line.rstrip().endswith("# <-")]
    return source, lines


FIRES = {
    # 1. a torch result in the wrapper around a (dummy) launch
    "torch.softmax returned": ('''
def softmax(x):
    scratch = torch.empty(1, device=x.device)
    touch_kernel[(1,)](x, scratch, 1, BLOCK=1)
    return torch.softmax(x, -1)  # <-
''', ["softmax() launches a Triton kernel but its return at line", "is torch.softmax(...), computed by PyTorch",
      "a gate would time and check PyTorch's result, not a buffer the kernel wrote"]),
    "F.* through a name and a cast": ('''
def layer_norm(x, w, b):
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    out = F.layer_norm(x.float(), x.shape[-1:], w, b)  # <-
    return out.to(x.dtype)
''', ["layer_norm() launches a Triton kernel", "F.layer_norm(...), computed by PyTorch"]),
    "matmul operator": ('''
def matmul(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device)
    touch_kernel[(1,)](a, c, 1, BLOCK=1)
    return a @ b  # <-
''', ["matmul() launches a Triton kernel", "is a @ b, computed by PyTorch"]),
    "tensor method reduction": ('''
def row_sum(x):
    y = torch.empty(x.shape[0], device=x.device)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return x.sum(-1)  # <-
''', ["is x.sum(...), computed by PyTorch"]),
    "copied into the kernel's buffer": ('''
def softmax(x):
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    y.copy_(torch.softmax(x, -1))  # <-
    return y
''', ["is torch.softmax(...), computed by PyTorch"]),
    "out= argument": ('''
def softmax(x):
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    torch.softmax(x, -1, out=y)  # <-
    return y
''', ["is torch.softmax(...), computed by PyTorch"]),
    "clone then in-place math": ('''
def exp(x):
    y = x.clone()
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    y.exp_()  # <-
    return y
''', ["is y updated in place by y.exp_(...), computed by PyTorch"]),
    "through a local helper": ('''
def _compute(x):
    return x.softmax(-1)


def softmax(x):
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return _compute(x)  # <-
''', ["is _compute(...), whose result is x.softmax(...), computed by PyTorch"]),
    "dummy launch in another function": ('''
def _warm_up(x, y):
    touch_kernel[(1,)](x, y, 1, BLOCK=1)


def softmax(x):
    return torch.softmax(x, -1)  # <-
''', ["softmax() returns torch.softmax(...), computed by PyTorch, while this file's Triton launch (line 18)",
      "so a gate would time and check PyTorch"]),
    # 2. fallback paths
    "try/except fallback": ('''
def copy(x):
    y = torch.empty_like(x)
    try:
        touch_kernel[(1,)](x, y, x.numel(), BLOCK=1024)
    except Exception:  # <-
        y = x.clone()
    return y
''', ["a Triton launch (line 20) sits in a try block whose except handler is a fallback path",
      "so a gate would pass code whose kernel does not run"]),
    "contextlib.suppress": ('''
import contextlib


def copy(x):
    y = x.clone()
    with contextlib.suppress(Exception):  # <-
        touch_kernel[(1,)](x, y, x.numel(), BLOCK=1024)
    return y
''', ["a Triton launch runs under contextlib.suppress(...): a failing kernel is silently ignored"]),
    # 3. side streams
    "torch.cuda.Stream": ('''
def copy(x):
    y = torch.empty_like(x)
    side = torch.cuda.Stream()  # <-
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["torch.cuda.Stream(...) uses a side stream",
      "escapes the gate's timing events on the default stream"]),
    "with torch.npu.stream": ('''
def copy(x, side):
    y = torch.empty_like(x)
    with torch.npu.stream(side):  # <-
        touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["torch.npu.stream(...) uses a side stream"]),
    "set_stream": ('''
def copy(x, side):
    torch.cuda.set_stream(side)  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["torch.cuda.set_stream(...) uses a side stream"]),
    # 4. threads and processes
    "threading.Thread": ('''
import threading


def copy(x):
    y = torch.empty_like(x)
    threading.Thread(target=lambda: touch_kernel[(1,)](x, y, 1, BLOCK=1)).start()  # <-
    return y
''', ["threading.Thread(...) starts a thread, process or event loop", "can hide cost from the timer"]),
    "executor": ('''
from concurrent.futures import ProcessPoolExecutor


def copy(x):
    y = torch.empty_like(x)
    with ProcessPoolExecutor(2) as pool:  # <-
        pool.submit(print, 1)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["ProcessPoolExecutor(...) starts a thread, process or event loop"]),
    "multiprocessing": ('''
import multiprocessing as mp


def copy(x):
    mp.get_context("spawn")  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["mp.get_context(...) starts a thread, process or event loop"]),
    "os.fork": ('''
def copy(x):
    os.fork()  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["os.fork(...) starts a thread, process or event loop"]),
    "asyncio": ('''
import asyncio


def copy(x):
    loop = asyncio.new_event_loop()  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["asyncio.new_event_loop(...) starts a thread, process or event loop"]),
    # 5. patching and benchmark detection
    "timer assignment": ('''
time.perf_counter = lambda: 0.0  # <-
''', ["assigns time.perf_counter, which patches the time module: a patched clock makes the gate's timings "
      "meaningless"]),
    "timer setattr": ('''
setattr(time, "monotonic", lambda: 0.0)  # <-
''', ["setattr(time, ...) patches the time module"]),
    "mock.patch of the clock": ('''
from unittest import mock

_frozen = mock.patch("time.perf_counter_ns", return_value=0)  # <-
''', ["mock.patch('time.perf_counter_ns', ...) patches the time module"]),
    "sys.modules assignment": ('''
sys.modules["helix_engine.eval.timing"] = None  # <-
''', ["changes sys.modules: swapping modules in the operator's process can replace the timer, torch or the gate"]),
    "sys.modules read": ('''
UNDER_TEST = "pytest" in sys.modules  # <-
''', ["reads sys.modules: an operator that looks for loaded modules can detect the benchmark"]),
    "torch monkeypatch": ('''
torch.cuda.synchronize = lambda *a: None  # <-
''', ["assigns torch.cuda.synchronize, which monkeypatches a torch module"]),
    "torch setattr": ('''
setattr(F, "softmax", lambda x, dim: x)  # <-
''', ["setattr(F, ...) monkeypatches a torch module"]),
    "helix import": ('''
from helix_engine.eval import timing  # <-
''', ["from helix_engine.eval import ... imports the judge (helix_engine): an operator has no reason to"]),
    "helix patch": ('''
import helix_engine.harness  # <-

helix_engine.harness.device = lambda: "cpu"  # <-
''', ["import helix_engine.harness imports the judge", "assigns helix_engine.harness.device, which patches the judge"]),
    "HELIX_ env read": ('''
def copy(x):
    if os.environ.get("HELIX_JOB_ID"):  # <-
        return x
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["os.environ.get('HELIX_JOB_ID') reads an environment variable of the gate, a test runner or a profiler"]),
    "PYTEST env membership": ('''
UNDER_TEST = "PYTEST_CURRENT_TEST" in os.environ  # <-
''', ["'PYTEST_CURRENT_TEST' in os.environ reads an environment variable"]),
    "environment scan": ('''
JUDGED = any(k.startswith("HELIX") for k in os.environ)  # <-
''', ["scans os.environ: looking through the environment lets the operator detect the benchmark"]),
    "sys.argv": ('''
BENCH = "bench" in " ".join(sys.argv)  # <-
''', ["inspects sys.argv: the command line tells the operator whether it runs under the gate"]),
    "stack inspection": ('''
import inspect


def copy(x):
    callers = [f.function for f in inspect.stack()]  # <-
    caller = sys._getframe(1)  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["inspect.stack(...) inspects the call stack", "sys._getframe(...) inspects the call stack"]),
    # 7. reaching the process's own code
    "import __main__": ('''
import __main__  # <-


def copy(x):
    __main__.Slot.fetch = lambda self: None  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["import __main__ reaches __main__, the gate's operator-process module",
      "assigns __main__.Slot.fetch, an attribute of the imported __main__"]),
    "ctypes": ('''
import ctypes  # <-
''', ["import ctypes gives the operator raw memory and foreign calls"]),
    "import by a computed name": ('''
import importlib

_m = importlib.import_module("__ma" + "in__")  # <-
''', ["imports a module whose name is computed"]),
    # 8. function internals and frames
    "function code swap": ('''
def _fast():
    return 0.0


copy_fn = torch.Tensor.clone
copy_fn.__code__ = _fast.__code__  # <-
''', ["assigns copy_fn.__code__", "rewrite a function it did not write"]),
    "frame walking": ('''
def copy(x):
    try:
        raise RuntimeError
    except RuntimeError as exc:
        caller = exc.__traceback__.tb_frame.f_back  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["follows exc.__traceback__.tb_frame.f_back", "reaches the callers' variables"]),
    "getframe taken as a value": ('''
_frame = getattr(sys, "_getframe")  # <-
''', ["takes sys._getframe"]),
    # 9. attributes of classes and modules the operator did not create
    "setattr on an input's class": ('''
def copy(x):
    setattr(type(x), "clone", lambda self: self)  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["sets an attribute on type(x), a class or module this file did not define"]),
    "an imported class's attribute": ('''
from collections import OrderedDict

OrderedDict.__eq__ = lambda a, b: True  # <-
''', ["assigns OrderedDict.__eq__, an attribute of the imported collections"]),
    "through __class__": ('''
def copy(x):
    x.__class__.__eq__ = lambda a, b: True  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["an attribute of a class or module this file did not define"]),
    "a module's namespace": ('''
import builtins

vars(builtins)["print"] = None  # <-
builtins.__dict__.update(len=None)  # <-
''', ["in the namespace of builtins", "writes the namespace of builtins"]),
    "a helper that patches its argument": ('''
def _patch(cls):
    cls.clone = lambda self: self


_patch(torch.Tensor)  # <-
''', ["passes torch.Tensor, a class or module, to _patch(), which assigns attributes of its parameter cls"]),
    "code the lint cannot read": ('''
import base64
import runpy
import importlib.util

exec(base64.b64decode("aW1wb3J0IF9fbWFpbl9f"))  # <-
_code = compile("x = 1", "x", "exec")  # <-
runpy.run_path("/tmp/helper.txt")  # <-
_spec = importlib.util.spec_from_file_location("h", "/tmp/h.py")  # <-
''', ["exec(...) runs code the lint cannot read", "compile(...) runs code", "runpy.run_path(...) runs code",
      "importlib.util.spec_from_file_location(...) runs code"]),
    "the import path": ('''
sys.path.insert(0, "/tmp/elsewhere")  # <-
sys.path[0] = "/tmp"  # <-
''', ["sys.path.insert(...) changes where `import` looks", "assigns sys.path[0]: changes where `import` looks"]),
    "os under another name": ('''
import posix  # <-
''', ["import posix is the C module under os"]),
    "a class found among every class": ('''
_host = next((c for c in object.__subclasses__() if c.__name__ == "OperatorProcess"), None)  # <-
_host.fetch = None  # <-
''', ["reads object.__subclasses__: it lists every class the process has loaded",
      "assigns _host.fetch, an attribute of a class or module this file did not define"]),
    # 6. file writes
    "open for writing": ('''
def copy(x):
    with open("/tmp/out.txt", "w") as f:  # <-
        f.write("x")
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["open(...) writes to the file system: an operator that writes files can leave behind or overwrite what "
      "the gate reads"]),
    "Path.write_text and torch.save": ('''
from pathlib import Path


def copy(x):
    Path("/tmp/result.json").write_text("{}")  # <-
    torch.save(x, "/tmp/x.pt")  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["Path('/tmp/result.json').write_text(...) writes to the file system", "torch.save(...) writes to the file"]),
    "shutil and os": ('''
import shutil


def copy(x):
    shutil.copy("a.json", "b.json")  # <-
    os.replace("b.json", "c.json")  # <-
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=1)
    return y
''', ["shutil.copy(...) writes to the file system", "os.replace(...) writes to the file system"]),
}


@pytest.mark.parametrize("name", list(FIRES))
def test_each_lint_fires_on_its_line(name: str) -> None:
    body, fragments = FIRES[name]
    source, lines = _marked(body)
    found = anti_cheat_findings(source, "opt-round-3/op.py")
    assert sorted({p.line for p in found}) == lines, [str(p) for p in found]
    assert all(p.severity == "warning" and p.file == "opt-round-3/op.py" for p in found)
    text = "\n".join(str(p) for p in found)
    for fragment in fragments:
        assert fragment in text
    assert str(found[0]).startswith(f"opt-round-3/op.py:{lines[0]}: ")


NEAR_MISSES = {
    "views and casts of the kernel's buffer": '''
def op(x):
    out = torch.empty(x.numel(), device=x.device)
    touch_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out.view(x.shape).to(x.dtype).contiguous()
''',
    "torch preprocessing of the inputs": '''
def op(x):
    x = torch.exp(x.float().contiguous())
    mean = x.mean(-1)
    out = torch.empty_like(x)
    touch_kernel[(1,)](x, out, mean.numel(), BLOCK=min(64, triton.next_power_of_2(x.shape[-1])))
    return out
''',
    "torch epilogue on the kernel's buffer": '''
def op(x):
    partial = torch.zeros((4, x.shape[0]), device=x.device)
    touch_kernel[(4,)](x, partial, 1, BLOCK=64)
    return partial.sum(0) / x.shape[1]
''',
    "epilogue on a buffer a launching helper writes": '''
def _launch(x, y):
    touch_kernel[(1,)](x, y, 1, BLOCK=64)


def op(x):
    y = torch.empty_like(x)
    _launch(x, y)
    return y.sum(-1)
''',
    "empty input shortcut": '''
def op(x):
    if x.numel() == 0:
        return torch.empty_like(x)
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=64)
    return y
''',
    "reference and private helpers": '''
def op(x):
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=64)
    return y


def reference(x):
    return torch.softmax(x, -1)


def _check(x):
    return torch.softmax(x, -1)
''',
    "module forward": '''
class Op(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        touch_kernel[(1,)](x, y, 1, BLOCK=64)
        return y
''',
    "ordinary environment, clock and file reads": '''
def op(x):
    if os.environ.get("TRITON_INTERPRET") == "1" or os.getenv("HOME"):
        pass
    debug = os.environ.get("MY_OP_DEBUG", "0")
    os.environ["TRITON_CACHE_DIR"] = "/tmp"
    started = time.perf_counter()
    with open(__file__) as f:
        f.read()
    with open(__file__, "rb") as f:
        f.read()
    name = "a.b".replace(".", "_")
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=64)
    return y
''',
    "locks, current stream, backend flags": '''
import threading

_lock = threading.Lock()
torch.backends.cuda.matmul.allow_tf32 = False


def op(x):
    stream = torch.cuda.current_stream() if torch.cuda.is_available() else None
    with _lock:
        y = torch.empty_like(x)
        touch_kernel[(1,)](x, y, 1, BLOCK=64)
    return y
''',
    "try around an import, re-raising around a launch": '''
try:
    import torch_npu
except ImportError:
    torch_npu = None


def op(x):
    y = torch.empty_like(x)
    try:
        touch_kernel[(1,)](x, y, 1, BLOCK=64)
    except RuntimeError as exc:
        raise RuntimeError("kernel failed") from exc
    finally:
        pass
    return y
''',
    "own instances, classes and fresh modules": '''
import types
import importlib.util


class Cache:
    hits = 0

    def __init__(self):
        self.table = {}
        setattr(self, "misses", 0)


_cache = Cache()
_cache.table = {}
Cache.hits = 1
state = types.SimpleNamespace()
state.ready = True
setattr(state, "calls", 0)
_mod = types.ModuleType("generated")
_mod.__dict__["x"] = 1
vars(_mod).update(y=2)


def op(x):
    y = torch.empty_like(x)
    touch_kernel[(1,)](x, y, 1, BLOCK=64)
    return y
''',
    "configuration namespaces": '''
torch.backends.cudnn.benchmark = False
torch._dynamo.config.cache_size_limit = 64
triton.knobs.cache.dir = "/tmp/tc"
''',
    "a buffer allocated one way or another": '''
def op(x, scratch=None):
    c = torch.empty_like(x) if x.shape[0] > 1 else torch.empty_like(x)
    p = torch.empty_like(x) if scratch is None else scratch
    touch_kernel[(1,)](x, c, 1, BLOCK=64)
    touch_kernel[(1,)](x, p, 1, BLOCK=64)
    return c.sum(0) + p.sum(0)
''',
    "compiles that run nothing": '''
import re

_PATTERN = re.compile(r"\\d+")
''',
    "builtins and grid lambdas": '''
def op(x):
    rows = max(1, min(2048 // 64, triton.next_power_of_2(x.shape[0])))
    y = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)
    touch_kernel[grid](x, y, x.numel(), BLOCK=64)
    return y, rows
''',
}


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_misses_do_not_fire(name: str) -> None:
    found = anti_cheat_findings(HEAD + NEAR_MISSES[name], "op.py")
    assert found == [], [str(p) for p in found]


def _example_operators() -> list[Path]:
    operators = []
    for folder in sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        operators.append(folder / f"{folder.name}.py")
        operators.extend(sorted((folder / "candidates").glob("round-*.py")))
    return operators


def test_the_examples_honest_operators_give_no_new_warning() -> None:
    operators = _example_operators()
    assert len(operators) == 9 and all(p.is_file() for p in operators)
    for path in operators:
        source = path.read_text(encoding="utf-8")
        assert anti_cheat_findings(source, path.name) == [], path
        # and lint_source (helix lint, submit-round's lints) says only what the hard rules say
        assert all("fuse" in p.message or "propagate_nan" in p.message for p in lint_source(source, path.name)), path
    assert anti_cheat_findings(operator_source(), "opt_add.py") == []


def test_findings_ride_along_with_the_hard_rule_lints() -> None:
    source, [line] = _marked(FIRES["torch.softmax returned"][0])
    found = anti_cheat_findings(source, "op.py")
    assert [p for p in lint_source(source, "op.py") if p.line == line] == found


def test_unparseable_source_gives_no_anti_cheat_finding() -> None:
    assert anti_cheat_findings("def broken(:\n", "op.py") == []


def test_the_round_s_other_python_files_are_linted_as_its_own(tmp_path: Path) -> None:
    """A cheat keeps the operator clean and does the patching in a helper it imports (the gate's
    operator process receives the folder's other *.py files): each is linted, by its own name; a
    helper named after a module the process imports (torch.py) is said; a symlink or an
    unparseable file is not one the process receives or imports."""
    from helix_engine.state.lints import lint_round, round_anti_cheat_findings

    round_dir = tmp_path / "opt-round-2"
    round_dir.mkdir()
    op = round_dir / "opt_add.py"
    op.write_text(operator_source().replace("import torch\n", "import torch\nimport helper\n", 1), encoding="utf-8")
    (round_dir / "helper.py").write_text(
        "import torch\n\n\ndef fast(x):\n    return x\n\n\nsetattr(torch.Tensor, 'clone', fast)\n", encoding="utf-8")
    (round_dir / "torch.py").write_text("", encoding="utf-8")
    (round_dir / "broken.py").write_text("def (:\n", encoding="utf-8")
    (tmp_path / "elsewhere.py").write_text("import ctypes\n", encoding="utf-8")
    (round_dir / "linked.py").symlink_to(tmp_path / "elsewhere.py")
    found = round_anti_cheat_findings(op, op.read_text(encoding="utf-8"), "opt-round-2")
    shown = [str(p) for p in found]
    assert [p.file for p in found] == ["opt-round-2/helper.py", "opt-round-2/torch.py"], shown
    assert shown[0].startswith("opt-round-2/helper.py:8: setattr(torch.Tensor, ...)"), shown
    assert "is named after the module torch" in shown[1]
    assert [str(p) for p in lint_round(round_dir, operator=op) if p.file != "opt-round-2/opt_add.py"] == shown
