"""The harness contract: metadata header, bench hooks, test hooks and kernel resolution.

Parent-side helpers (``read_metadata``, ``resolve_kernels``, ``find_*_file``) only read text.
The ``load_*`` functions import user code and therefore run only in the child worker. Every
contract violation raises ``HarnessContractError`` whose message names the file and the hook
and says what to change.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from helix_engine import python_source
from helix_engine.errors import HelixError

API_KINDS: tuple[str, ...] = ("triton-wrapper", "tilelang-wrapper", "torch-function", "torch-module")
STANDALONE_API_KINDS: tuple[str, ...] = ("triton-wrapper", "torch-function", "torch-module")
TEST_MODES: tuple[str, ...] = ("standalone", "differential")
DEFAULT_WARMUP = 5
DEFAULT_REPEATS = 50
_META_RE = re.compile(r"^#\s*([A-Za-z0-9][A-Za-z0-9_-]*)\s*:\s*(.*?)\s*$")


class HarnessContractError(HelixError):
    """A harness or operator file breaks the contract; the message names file and hook."""

    def __init__(self, file: Path | str, hook: str, problem: str) -> None:
        self.file = str(file)
        self.hook = hook
        super().__init__(f"{Path(file).name}: {hook}: {problem}")


# ------------------------------------------------------------------------------ metadata


def parse_metadata(text: str) -> dict[str, str]:
    """The leading run of ``# key: value`` lines (keys lower-cased).

    Blank lines before the first key are skipped; parsing stops at the first blank line after
    a key, or at the first line that is not a comment. Comment lines without ``key: value``
    (a shebang, prose) are skipped.
    """
    meta: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if meta:
                break
            continue
        if not line.startswith("#"):
            break
        match = _META_RE.match(line)
        if match:
            meta[match.group(1).lower()] = match.group(2)
    return meta


def read_metadata(path: Path) -> dict[str, str]:
    """Metadata header of a file; an unreadable file is a clear error."""
    return parse_metadata(_read_source(Path(path), "cannot read {path}: it {why}; check the path"))


def _read_source(path: Path, sentence: str) -> str:
    """A harness or operator file through the safe reader (a FIFO, device or link out of the
    workspace is refused, never waited on); HelixError with ``sentence`` otherwise."""
    from helix_engine.workspace.reading import owning_workspace, read_bytes_safe

    data, problem = read_bytes_safe(path, owning_workspace(path))
    if problem is not None:
        raise HelixError(sentence.format(path=path, why=problem.message))
    return (data or b"").decode("utf-8", errors="replace")


def metadata_kernels(meta: dict[str, str]) -> list[str]:
    raw = meta.get("kernels") or meta.get("kernel") or ""
    return [k.strip() for k in raw.split(",") if k.strip()]


def check_api_kind(meta: dict[str, str], file: Path, allowed: tuple[str, ...] = API_KINDS) -> str | None:
    kind = meta.get("api-kind")
    if kind is None or kind == "":
        return None
    if kind not in allowed:
        raise HarnessContractError(
            file, "api-kind", f"unknown api-kind {kind!r}; use one of: {', '.join(allowed)}"
        )
    return kind


# ------------------------------------------------------------------------ kernel resolution


def _is_jit(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id == "jit"
    if isinstance(target, ast.Attribute):
        return target.attr == "jit" and isinstance(target.value, ast.Name) and target.value.id == "triton"
    return False


def jit_functions(source: str, file: Path | str = "<operator>") -> list[str]:
    """Top-level functions decorated with ``triton.jit``, ``triton.jit(...)`` or bare ``jit``."""
    try:
        tree = python_source.parse(source, str(file))
    except SyntaxError as exc:
        from helix_engine.eval.usercode import UserCodeError, user_traceback

        raise UserCodeError(file, exc.lineno, f"SyntaxError: {exc.msg}", user_traceback(exc)) from None
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            _is_jit(d) for d in node.decorator_list
        ):
            names.append(node.name)
    return names


def referenced_names(source: str) -> set[str]:
    """Every name the operator's code uses: variables, attributes (``lib.kernel``) and imports
    (comments and strings are not code). Empty when the source does not parse."""
    try:
        tree = python_source.parse(source)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add((node.asname or node.name).rsplit(".", 1)[-1])
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def resolve_kernels(
    operator_file: Path, metadata: dict[str, str] | None = None
) -> tuple[list[str], str]:
    """Upstream's stable union of metadata ``kernels`` and the operator's jit functions, and its
    source, limited to the kernels of the measured operator.

    ``metadata`` is the header of the harness that names the kernels (bench or test file);
    when None, the operator's own header is used. An empty set is an error.

    The bench header is written once for the baseline; a round that fused three kernels into one
    still lists the three. When the operator defines jit kernels itself, a header name it neither
    defines nor uses in its code (a name, an attribute, an import) is dropped: its records name
    only kernels it can launch. A header name the operator uses is kept (a kernel imported from
    another module, which the AST of this file cannot see defined); an operator that defines no
    kernel keeps the whole header (its kernels live elsewhere). ``kernel_source`` stays
    upstream's: which of the two lists contributed a name.
    """
    operator_file = Path(operator_file)
    source = _read_source(operator_file, "cannot read operator {path}: it {why}")
    meta = parse_metadata(source) if metadata is None else metadata
    from_meta = metadata_kernels(meta)
    from_op = jit_functions(source, operator_file)
    if from_op:
        used = referenced_names(source)
        from_meta = [name for name in from_meta if name in from_op or name in used]
    names: list[str] = []
    for name in [*from_meta, *from_op]:
        if name not in names:
            names.append(name)
    if not names:
        raise HarnessContractError(
            operator_file,
            "kernels",
            "no kernels found: add `# kernels: <name>` to the bench header or decorate the kernel "
            "with @triton.jit in the operator",
        )
    if from_meta and from_op:
        source_kind = "metadata+operator"
    elif from_meta:
        source_kind = "metadata"
    else:
        source_kind = "operator"
    return names, source_kind


# ---------------------------------------------------------------------- importing user code


def import_file(path: Path, preferred_name: str | None = None) -> ModuleType:
    """Import a user file as a module (its folder goes on sys.path, as upstream does)."""
    path = Path(path).resolve()
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = preferred_name or path.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) != str(path):
        n = 2
        while f"{name}__helix{n}" in sys.modules:
            n += 1
        name = f"{name}__helix{n}"
    elif existing is not None:
        return existing
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise HelixError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        from helix_engine.eval.usercode import UserCodeError

        if isinstance(exc, UserCodeError):
            raise
        raise UserCodeError.from_exception(exc, path) from exc
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def require_hook(module: ModuleType, file: Path, hook: str, what: str) -> Callable[..., Any]:
    fn = getattr(module, hook, None)
    if fn is None:
        raise HarnessContractError(file, hook, f"the hook is missing; define {what}")
    if not callable(fn):
        raise HarnessContractError(file, hook, f"is not callable; define {what}")
    return fn


def operator_api_from_metadata(module: ModuleType, meta: dict[str, str], test_file: Path) -> Any:
    """Standalone tests: the API named by ``# api-name`` built per ``# api-kind``."""
    kind = check_api_kind(meta, test_file, STANDALONE_API_KINDS) or "triton-wrapper"
    name = meta.get("api-name")
    if not name:
        raise HarnessContractError(
            test_file, "api-name", "the header names no operator API; add `# api-name: <function or class>`"
        )
    obj = getattr(module, name, None)
    if obj is None:
        raise HarnessContractError(
            test_file, "api-name", f"the operator defines no {name!r}; fix `# api-name:`"
        )
    if kind == "torch-module":
        obj = obj()
        obj = _to_device(obj)
    if not callable(obj):
        raise HarnessContractError(test_file, "api-name", f"{name!r} is not callable")
    return obj


def _to_device(module_obj: Any) -> Any:
    from helix_engine.harness import device

    dev = device()
    to = getattr(module_obj, "to", None)
    if dev != "cpu" and callable(to):
        return to(dev)
    return module_obj


# ------------------------------------------------------------------------------ bench hooks


@dataclass
class BenchCase:
    id: str
    warmup: int
    repeats: int
    raw: dict[str, Any]
    #: bytes/flops the case declares (perf/roofline.py), None when it declares none
    work: Any = None


@dataclass
class BenchHarness:
    bench_file: Path
    operator_file: Path
    operator_module: ModuleType
    bench_module: ModuleType
    api: Any
    cases: list[BenchCase]
    kernel_names: list[str]
    kernel_source: str
    metadata: dict[str, str] = field(default_factory=dict)

    def build_fn(self, case: BenchCase) -> Callable[[], Any]:
        hook = require_hook(self.bench_module, self.bench_file, "build_bench_case_fn",
                            "build_bench_case_fn(api, case) returning a zero-argument closure")
        fn = hook(self.api, case.raw)
        if not callable(fn):
            raise HarnessContractError(
                self.bench_file, "build_bench_case_fn",
                f"case {case.id!r}: returned {type(fn).__name__}, expected a zero-argument closure",
            )
        return fn


def _int_field(case: dict[str, Any], key: str, default: int, minimum: int, file: Path, cid: str) -> int:
    value = case.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        bound = "≥0" if minimum == 0 else ">0"
        raise HarnessContractError(
            file, "build_bench_cases", f"case {cid!r}: {key}={value!r} is invalid; use an int {bound}"
        )
    return value


def validate_bench_cases(cases: Any, file: Path) -> list[BenchCase]:
    hook = "build_bench_cases"
    if isinstance(cases, (str, bytes, dict)) or not hasattr(cases, "__iter__"):
        raise HarnessContractError(file, hook, f"returned {type(cases).__name__}; return a list of dicts")
    out: list[BenchCase] = []
    seen: set[str] = set()
    for index, case in enumerate(cases):
        if not isinstance(case, dict):
            raise HarnessContractError(file, hook, f"case #{index} is {type(case).__name__}, expected a dict")
        cid = case.get("id")
        if not isinstance(cid, str) or not cid.strip():
            raise HarnessContractError(file, hook, f"case #{index} has an empty or missing id; give every case a unique "
                                                   "non-empty string id")
        if cid in seen:
            raise HarnessContractError(file, hook, f"duplicate case id {cid!r}; case ids must be unique")
        seen.add(cid)
        warmup = _int_field(case, "warmup", DEFAULT_WARMUP, 0, file, cid)
        repeats = _int_field(case, "repeats", DEFAULT_REPEATS, 1, file, cid)
        out.append(BenchCase(id=cid, warmup=warmup, repeats=repeats, raw=case))
    if not out:
        raise HarnessContractError(file, hook, "returned no cases; return at least one case dict")
    return out


def load_bench_harness(bench_file: Path, operator_file: Path) -> BenchHarness:
    """Import bench and operator, build the API and validate the cases (child side)."""
    bench_file, operator_file = Path(bench_file), Path(operator_file)
    meta = read_metadata(bench_file)
    check_api_kind(meta, bench_file)
    kernel_names, kernel_source = resolve_kernels(operator_file, meta)
    op_module = import_file(operator_file)
    bench_module = import_file(bench_file)
    build_api = require_hook(bench_module, bench_file, "build_operator_api",
                             "build_operator_api(operator_module) returning the callable")
    require_hook(bench_module, bench_file, "build_bench_cases", "build_bench_cases() returning a list of case dicts")
    require_hook(bench_module, bench_file, "build_bench_case_fn",
                 "build_bench_case_fn(api, case) returning a zero-argument closure")
    api = build_api(op_module)
    cases = validate_bench_cases(bench_module.build_bench_cases(), bench_file)
    _attach_work(bench_module, bench_file, cases)
    return BenchHarness(bench_file, operator_file, op_module, bench_module, api, cases,
                        kernel_names, kernel_source, meta)


def _attach_work(bench_module: ModuleType, bench_file: Path, cases: list[BenchCase]) -> None:
    """Each case's declared bytes/flops (``build_bench_case_work(case)`` or the case's own keys);
    a malformed declaration is a contract error that names the case."""
    from helix_engine.perf.roofline import WORK_HOOK, case_work

    hook = WORK_HOOK if callable(getattr(bench_module, WORK_HOOK, None)) else "build_bench_cases"
    for case in cases:
        try:
            case.work = case_work(bench_module, case.raw)
        except ValueError as exc:
            raise HarnessContractError(bench_file, hook, f"case {case.id!r}: {exc}") from None


# ------------------------------------------------------------------------------- test hooks


@dataclass
class DifferentialCase:
    id: str
    inputs: Any
    fn: Callable[[], Any]


def load_standalone_test(test_file: Path, operator_file: Path) -> tuple[Callable[[Any], Any], Any]:
    """(main, operator_api) for a standalone test (child side)."""
    meta = read_metadata(test_file)
    op_module = import_file(operator_file)
    test_module = import_file(test_file)
    main = require_hook(test_module, test_file, "main", "main(operator_api) that raises on failure")
    builder = getattr(test_module, "build_operator_api", None)
    api = builder(op_module) if callable(builder) else operator_api_from_metadata(op_module, meta, test_file)
    return main, api


def load_differential_cases(test_file: Path, operator_file: Path) -> tuple[list[DifferentialCase], bool]:
    """The differential cases and the ``compute`` flag (``# compute-kind``)."""
    meta = read_metadata(test_file)
    check_api_kind(meta, test_file)
    compute_kind = meta.get("compute-kind", "compute") or "compute"
    if compute_kind not in ("compute", "non-compute"):
        raise HarnessContractError(test_file, "compute-kind", f"unknown value {compute_kind!r}; use compute or non-compute")
    op_module = import_file(operator_file)
    test_module = import_file(test_file, f"{Path(test_file).stem}__{Path(operator_file).stem}")
    build_api = require_hook(test_module, test_file, "build_operator_api", "build_operator_api(operator_module)")
    build_cases = require_hook(test_module, test_file, "build_differential_test_cases",
                               "build_differential_test_cases(api) returning [{'id','inputs','fn'}]")
    raw_cases = build_cases(build_api(op_module))
    hook = "build_differential_test_cases"
    if raw_cases is None or isinstance(raw_cases, (str, bytes, dict)) or not hasattr(raw_cases, "__iter__"):
        raise HarnessContractError(test_file, hook, f"returned {type(raw_cases).__name__}; return a list of case dicts")
    cases: list[DifferentialCase] = []
    seen: set[str] = set()
    for index, case in enumerate(raw_cases):
        if not isinstance(case, dict):
            raise HarnessContractError(test_file, hook, f"case #{index} is {type(case).__name__}, expected a dict")
        cid = case.get("id")
        if not isinstance(cid, str) or not cid.strip():
            raise HarnessContractError(test_file, hook, f"case #{index} has an empty or missing id; give every case a "
                                                        "unique non-empty string id")
        if cid in seen:
            raise HarnessContractError(test_file, hook, f"duplicate case id {cid!r}; case ids must be unique")
        seen.add(cid)
        inputs = case.get("inputs", ())
        if not isinstance(inputs, (tuple, list)):
            raise HarnessContractError(test_file, hook, f"case {cid!r}: inputs must be a tuple or list")
        fn = case.get("fn")
        if not callable(fn):
            raise HarnessContractError(test_file, hook, f"case {cid!r}: fn must be a zero-argument callable")
        cases.append(DifferentialCase(cid, inputs, fn))
    if not cases:
        raise HarnessContractError(test_file, hook, "returned no cases; return at least one case dict")
    return cases, compute_kind == "compute"


from helix_engine.eval.discovery import find_bench_file, find_test_file, test_mode_of  # noqa: E402,F401 - re-exported
