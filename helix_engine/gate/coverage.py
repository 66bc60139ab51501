"""Kernel coverage on the CPU backend: how many elements the operator's own Triton kernels store.

A round whose wrapper computes the result with PyTorch and launches a dummy kernel on one
element passes a numeric check; it does not pass this one. In the process that runs the operator
under ``TRITON_INTERPRET=1``, :class:`KernelCoverage` counts, for every Triton kernel defined in
the operator's module, its launches and the elements its ``tl.store`` calls write (lanes a mask
turns off are not counted). The gate compares the count with the output's size
(:func:`coverage_ratio`); a tiny ratio is a "pure PyTorch fallback".

What is counted: every store of the module's kernels during their launches, intermediates
included (a three-kernel softmax also stores its row maxima, exp buffer and row sums), stores
made by device functions a kernel calls, masked-off lanes excluded, a lane stored twice counted
twice; ``tl.atomic_*`` read-modify-writes are not stores and are not counted (``tl.atomic_store``
and tensor-descriptor stores are, the interpreter routes them through the same store). Launches
made by an autotuner while it benchmarks its configs are launches too: call :meth:`reset` after
a warm-up call so only the measured call counts. Kernels imported from another file, or kept
only inside a container the module does not bind at its top level, are not the module's kernels.

The mechanism, triton 3.9's interpreter (``triton/runtime/interpreter.py``): with
``TRITON_INTERPRET=1``, ``triton.jit`` gives an ``InterpretedFunction`` whose ``run`` executes
each program of the grid in Python, and every store lands in ``interpreter_builder
.create_masked_store(ptrs, value, mask, cache_policy)`` (``create_store`` passes an all-true mask
to it). ``install`` shadows ``run`` on each of the module's interpreted kernels (an instance
attribute: ``kernel[grid](...)``, autotuners and heuristics all call ``fn.run``) to mark "inside
this kernel's launch", and shadows ``create_masked_store`` on the builder instance to count the
mask's true lanes while a marked launch runs. Nothing is copied out of triton; ``uninstall``
puts both back. Before it changes anything, ``install`` launches a 4-lane probe kernel with 3
lanes masked on and checks it counted 3: if triton's internals moved, it raises
:class:`CoverageUnavailable` (the caller reports "coverage not measured") instead of counting
wrongly.
"""

from __future__ import annotations

import inspect
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

__all__ = ["CoverageUnavailable", "KernelCoverage", "coverage_ratio"]

_MAX_WRAPPERS = 16  # autotune(heuristics(jit(f))) nests a few .fn levels; a loop of .fn is a bug


class CoverageUnavailable(RuntimeError):
    """Kernel coverage cannot be measured in this process (no interpreter, or triton's
    interpreter internals are not what this module expects)."""


def coverage_ratio(stored: int, output_numel: int) -> float:
    """Stored elements per output element. 1.0 when the output is empty (nothing to cover); it
    can exceed 1.0, since intermediates are stored too. A dummy launch gives ~1/output_numel."""
    if stored < 0 or output_numel < 0:
        raise ValueError(f"counts must not be negative (stored={stored}, output_numel={output_numel})")
    if output_numel == 0:
        return 1.0
    return stored / output_numel


# ---------------------------------------------------------------- the interpreter's seams


class _Seams:
    """The interpreter objects coverage hooks, looked up and checked once per process."""

    def __init__(self) -> None:
        try:
            import triton
            from triton.runtime import interpreter
            from triton.runtime.jit import JITFunction, KernelInterface
        except Exception as exc:  # noqa: BLE001 - any import failure means "not measurable here"
            raise CoverageUnavailable(f"triton's interpreter cannot be imported ({exc!r})") from exc
        try:
            interpret = bool(triton.knobs.runtime.interpret)
        except AttributeError as exc:
            raise CoverageUnavailable("triton.knobs.runtime.interpret is missing: unknown triton layout") from exc
        if not interpret:
            raise CoverageUnavailable(
                "Triton kernels are compiled, not interpreted, in this process: coverage is measured only with "
                "TRITON_INTERPRET=1 set before the operator's kernels are defined")
        builder = getattr(interpreter, "interpreter_builder", None)
        interpreted = getattr(interpreter, "InterpretedFunction", None)
        if builder is None or interpreted is None:
            raise CoverageUnavailable("triton.runtime.interpreter has no interpreter_builder/InterpretedFunction")
        _expect_params(getattr(builder, "create_masked_store", None), ["ptrs", "value", "mask", "cache_policy"],
                       "interpreter_builder.create_masked_store")
        run_params = _params(getattr(interpreted, "run", None), "InterpretedFunction.run")
        if "grid" not in run_params or "warmup" not in run_params:
            raise CoverageUnavailable(f"InterpretedFunction.run takes {run_params}, not (*args, grid, warmup, **kwargs)")
        self.builder = builder
        self.interpreted: type = interpreted
        self.jit_function: type = JITFunction
        self.kernel_interface: type = KernelInterface


def _params(fn: Any, what: str) -> list[str]:
    if not callable(fn):
        raise CoverageUnavailable(f"{what} is missing from triton's interpreter")
    try:
        return [p for p in inspect.signature(fn).parameters if p != "self"]
    except (TypeError, ValueError) as exc:
        raise CoverageUnavailable(f"{what} has no readable signature ({exc})") from exc


def _expect_params(fn: Any, expected: list[str], what: str) -> None:
    found = _params(fn, what)
    if found != expected:
        raise CoverageUnavailable(f"{what} takes {found}, not {expected}: unknown triton interpreter")


_SEAMS: _Seams | None = None
_LOCK = threading.RLock()  # install runs the probe, whose uninstall takes it again
_ACTIVE = threading.local()  # .stack: the (coverage, kernel name) of the launches running in this thread
_HOOK_USERS = 0  # installed KernelCoverage objects; the builder hook is removed when it drops to 0
_PROBE_OK = False


def _seams() -> _Seams:
    global _SEAMS
    if _SEAMS is None:
        _SEAMS = _Seams()
    return _SEAMS


def _stack() -> list[tuple[KernelCoverage, str]]:
    stack = getattr(_ACTIVE, "stack", None)
    if stack is None:
        stack = _ACTIVE.stack = []
    return stack


def _hook_builder(seams: _Seams) -> None:
    """Shadow create_masked_store on the builder instance (once, however many installs)."""
    global _HOOK_USERS
    if _HOOK_USERS == 0:
        original = seams.builder.create_masked_store

        def create_masked_store(ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
            stack = _stack()
            if stack:
                coverage, name = stack[-1]
                coverage._count(name, _true_lanes(mask, ptrs))
            return original(ptrs, value, mask, cache_policy)

        create_masked_store.__helix_coverage__ = True  # type: ignore[attr-defined]
        seams.builder.create_masked_store = create_masked_store
    _HOOK_USERS += 1


def _unhook_builder(seams: _Seams) -> None:
    global _HOOK_USERS
    _HOOK_USERS -= 1
    if _HOOK_USERS == 0 and getattr(seams.builder.__dict__.get("create_masked_store"), "__helix_coverage__", False):
        del seams.builder.create_masked_store  # the class's method shows again


def _true_lanes(mask: Any, ptrs: Any) -> int:
    """The mask's true lanes (broadcast to the pointers' shape, as the store applies it)."""
    import numpy as np

    data = np.asarray(getattr(mask, "data", mask), dtype=bool)
    shape = np.shape(getattr(ptrs, "data", ptrs))
    if data.shape != shape:
        data = np.broadcast_to(data, shape)
    return int(np.count_nonzero(data))


# ---------------------------------------------------------------------------- the counter


class KernelCoverage:
    """Counts launches and stored elements of one operator module's Triton kernels."""

    def __init__(self) -> None:
        self._launches: Counter[str] = Counter()
        self._stored: Counter[str] = Counter()
        self._patched: list[tuple[Any, bool, Any]] = []  # (kernel, had its own run, that run)
        self._seams: _Seams | None = None
        #: False: launches run as if uncounted (the operator process counts only the probe call,
        #: so its timed calls do not pay for the counting)
        self.counting = True

    # -- public API

    def install(self, module: ModuleType) -> None:
        """Count the launches of every Triton kernel defined in ``module`` (autotuned and
        heuristics kernels through their ``.fn``). Raises :class:`CoverageUnavailable` when
        coverage cannot be measured in this process; then nothing is changed."""
        with _LOCK:
            seams = _seams()
            _probe(seams)
            kernels = list(_module_kernels(module, seams))
            already = {id(k) for k, _, _ in self._patched}
            if self._seams is None:
                _hook_builder(seams)
                self._seams = seams
            for name, kernel in kernels:
                if id(kernel) not in already:
                    self._wrap(name, kernel)
                    already.add(id(kernel))

    def uninstall(self) -> None:
        """Put the kernels' ``run`` and the interpreter's store back as they were."""
        with _LOCK:
            for kernel, had_own, own in reversed(self._patched):
                if had_own:
                    kernel.run = own
                else:
                    kernel.__dict__.pop("run", None)
            self._patched.clear()
            if self._seams is not None:
                _unhook_builder(self._seams)
                self._seams = None

    def reset(self) -> None:
        self._launches.clear()
        self._stored.clear()

    def stored_elements(self) -> int:
        """Elements written by tl.store in the counted launches (masked-off lanes excluded)."""
        return sum(self._stored.values())

    def stored_by_kernel(self) -> dict[str, int]:
        return dict(self._stored)

    def launches(self) -> dict[str, int]:
        """Launches per kernel name (``kernel[grid](...)`` calls that ran, warm-ups excluded)."""
        return dict(self._launches)

    def kernels(self) -> list[str]:
        """The names of the kernels being counted."""
        return [_kernel_name(k) for k, _, _ in self._patched]

    # -- internals

    def _count(self, name: str, lanes: int) -> None:
        self._stored[name] += lanes

    def _wrap(self, name: str, kernel: Any) -> None:
        had_own = "run" in kernel.__dict__
        own = kernel.__dict__.get("run")
        original: Callable[..., Any] = kernel.run
        coverage = self

        def run(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup") or not coverage.counting:
                return original(*args, **kwargs)
            coverage._launches[name] += 1
            stack = _stack()
            stack.append((coverage, name))
            try:
                return original(*args, **kwargs)
            finally:
                stack.pop()

        kernel.run = run
        self._patched.append((kernel, had_own, own))


def _kernel_name(kernel: Any) -> str:
    fn = getattr(kernel, "fn", None)
    return str(getattr(fn, "__name__", None) or getattr(kernel, "__name__", "kernel"))


def _candidates(module: ModuleType) -> Iterator[Any]:
    """The module's top-level values, the items of its top-level containers and the attributes
    of the classes it defines."""
    for value in list(vars(module).values()):
        yield value
        if isinstance(value, dict):
            yield from list(value.values())
        elif isinstance(value, (list, tuple)):
            yield from value
        elif isinstance(value, type) and getattr(value, "__module__", None) == module.__name__:
            yield from list(vars(value).values())


def _module_kernels(module: ModuleType, seams: _Seams) -> Iterator[tuple[str, Any]]:
    """(name, InterpretedFunction) for each kernel defined in ``module``'s own file."""
    seen: set[int] = set()
    for value in _candidates(module):
        if not isinstance(value, seams.kernel_interface):
            continue
        kernel = _unwrap(value, seams)
        if id(kernel) in seen or not _defined_in(kernel.fn, module):
            continue
        seen.add(id(kernel))
        yield _kernel_name(kernel), kernel


def _unwrap(value: Any, seams: _Seams) -> Any:
    """Autotuner/Heuristics → … → the InterpretedFunction at the bottom."""
    current = value
    for _ in range(_MAX_WRAPPERS):
        if isinstance(current, seams.interpreted):
            return current
        if isinstance(current, seams.jit_function):
            raise CoverageUnavailable(
                f"kernel {_kernel_name(current)} is a compiled JITFunction, not interpreted: set TRITON_INTERPRET=1 "
                "before the operator is imported")
        inner = getattr(current, "fn", None)
        if inner is None:
            raise CoverageUnavailable(f"{type(value).__name__} {value!r} wraps no .fn: unknown triton kernel wrapper")
        current = inner
    raise CoverageUnavailable(f"{type(value).__name__} nests more than {_MAX_WRAPPERS} .fn levels")


def _defined_in(fn: Any, module: ModuleType) -> bool:
    if getattr(fn, "__module__", None) == module.__name__:
        return True
    code = getattr(fn, "__code__", None)
    path = getattr(module, "__file__", None)
    return code is not None and path is not None and _same_file(code.co_filename, path)


def _same_file(a: str, b: str) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


# ------------------------------------------------------------------------------ the probe


def _probe(seams: _Seams) -> None:
    """Launch a 4-lane kernel storing 3 lanes and check the hooks count exactly 3 (once per
    process); CoverageUnavailable when they do not."""
    global _PROBE_OK
    if _PROBE_OK:
        return
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def _helix_coverage_probe(out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803 - Triton's constexpr style
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, offs.to(tl.float32), mask=offs < n)
            tl.store(out_ptr + BLOCK, 1.0)

        if not isinstance(_helix_coverage_probe, seams.interpreted):
            raise CoverageUnavailable("triton.jit did not give an InterpretedFunction under TRITON_INTERPRET=1")
        kernel: Any = _helix_coverage_probe  # triton's annotations do not type the launch syntax
        probe = KernelCoverage()
        _hook_builder(seams)
        probe._seams = seams
        try:
            probe._wrap("probe", kernel)
            out = torch.zeros(5)
            kernel[(1,)](out, 3, BLOCK=4)
        finally:
            probe.uninstall()
        counted, launched = probe.stored_elements(), probe.launches()
        written = out.tolist()
    except CoverageUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever broke, coverage is not measurable here
        raise CoverageUnavailable(f"the interpreter probe failed ({exc!r})") from exc
    if counted != 4 or launched != {"probe": 1} or written != [0.0, 1.0, 2.0, 0.0, 1.0]:
        raise CoverageUnavailable(
            f"the interpreter probe counted {counted} stored elements and launches {launched} (expected 4 and "
            f"{{'probe': 1}}, wrote {written}): triton's interpreter no longer stores through "
            "interpreter_builder.create_masked_store")
    _PROBE_OK = True
