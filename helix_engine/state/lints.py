"""Lints for the seed's hard rules, read from the operator's syntax tree (never by running it),
plus "same code as the parent" (Python tokens without comments and whitespace), which the round
checker needs. Upstream's kernel-continuity check lives in continuity.py.

Each lint is a Problem with severity "warning" that names file:line, so the cockpit can show it
inline and submit-round can return it as a note. The static anti-cheat lints (a torch result
behind a dummy launch, fallback paths, side streams, threads, patching and benchmark detection,
file writes, reaching into the process) live in anti_cheat.py and ride along with the hard-rule
ones; `anti_cheat_findings` gives them alone, for the gate to list, and `round_anti_cheat_findings`
adds those of the round's other Python files, which the gate's operator process receives too.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from helix_engine import python_source
from helix_engine.state import anti_cheat
from helix_engine.state.continuity import triton_launches
from helix_engine.workspace.models import Problem

NPU_BENCH_MODES = frozenset({"torch-npu-profiler", "msprof"})

# ------------------------------------------------------------------------- code equality


def code_tokens(source: str) -> list[tuple[int, str]] | None:
    """The token stream without comments, blank lines and layout whitespace; None when the
    source does not tokenize (then callers compare text with whitespace removed)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
    out: list[tuple[int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in skip:
                continue
            # INDENT text is whitespace: only the structure counts.
            out.append((tok.type, "" if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE) else tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return out


def same_code(a: str, b: str) -> bool:
    """True when two sources differ only in comments and whitespace."""
    ta, tb = code_tokens(a), code_tokens(b)
    if ta is not None and tb is not None:
        return ta == tb
    squash = lambda s: re.sub(r"\s+", "", s)  # noqa: E731
    return squash(a) == squash(b)


# ------------------------------------------------------------------------------ lints


@dataclass(frozen=True)
class _Aliases:
    tl: frozenset[str]
    triton: frozenset[str]
    jit: frozenset[str]


def _aliases(tree: ast.AST) -> _Aliases:
    tl, triton, jit = {"tl"}, {"triton"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton.language":
                    tl.add(alias.asname or "triton")
                elif alias.name == "triton":
                    triton.add(alias.asname or "triton")
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module == "triton" and alias.name == "language":
                    tl.add(alias.asname or "language")
                elif node.module == "triton" and alias.name == "jit":
                    jit.add(alias.asname or "jit")
    return _Aliases(frozenset(tl), frozenset(triton), frozenset(jit))


def _is_jit(decorator: ast.expr, aliases: _Aliases) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute) and target.attr == "jit":
        return isinstance(target.value, ast.Name) and target.value.id in aliases.triton
    return isinstance(target, ast.Name) and target.id in aliases.jit


def target_backend(workspace: Path | None, baseline_records: list | None = None) -> str | None:
    """npu | cuda | cpu: HELIX_BACKEND when set (not auto), else the baseline perf records'
    backend field, else "npu" when their bench_mode is an Ascend profiler mode."""
    env = os.environ.get("HELIX_BACKEND", "").strip().lower()
    if env and env != "auto":
        return env
    for record in baseline_records or []:
        backend = getattr(record, "backend", None)
        if backend:
            return str(backend).lower()
    for record in baseline_records or []:
        if getattr(record, "bench_mode", None) in NPU_BENCH_MODES:
            return "npu"
    return None


_BACKWARD = re.compile(r"(^|_)(bwd|backward|grad)(_|$)", re.IGNORECASE)


def _backward_kernels(tree: ast.AST, launches: list[ast.Call], names: set[str]) -> set[str]:
    """The kernels of a backward pass, off the forward call's hot path that the bench times: each
    of its launches sits (innermost) in a function named ``backward`` (an autograd.Function's) or
    ``*_bwd``/``*_backward``/``*_grad``; a kernel never launched here, when it is named so itself."""
    innermost: dict[int, str] = {}  # launch → the name of the innermost function around it
    wanted = {id(c) for c in launches}

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if id(child) in wanted:
                innermost[id(child)] = function
            visit(child, child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function)

    visit(tree, "")
    where: dict[str, set[str]] = {}
    for call in launches:
        ref = call.func.value if isinstance(call.func, ast.Subscript) else None
        kernel = ref.id if isinstance(ref, ast.Name) else ref.attr if isinstance(ref, ast.Attribute) else ""
        where.setdefault(kernel, set()).add(innermost.get(id(call), ""))
    return {k for k in names if (all(_BACKWARD.search(f) for f in where[k]) if k in where else _BACKWARD.search(k))}


def lint_source(source: str, file: str, *, backend: str | None = None) -> list[Problem]:
    """Hard-rule warnings for one operator source (empty when it does not parse: the
    checker's other stages already say what is wrong with such a file)."""
    try:
        tree = python_source.parse(source)
    except (SyntaxError, ValueError):
        return [Problem(file, "does not parse as Python; the hard-rule lints were skipped", None, "warning")]
    aliases = _aliases(tree)
    problems: list[Problem] = []
    kernels: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    launch_calls = triton_launches(tree)
    launches = len(launch_calls)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_is_jit(d, aliases) for d in node.decorator_list):
                kernels.append(node)
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in ("maximum", "minimum")
                and isinstance(func.value, ast.Name)
                and func.value.id in aliases.tl
                and not any(k.arg == "propagate_nan" for k in node.keywords)
            ):
                problems.append(
                    Problem(
                        file,
                        f"{func.value.id}.{func.attr}(...) without propagate_nan: NaN inputs may not "
                        "propagate; if NaN propagation is the intended semantics add "
                        "propagate_nan=tl.PropagateNan.ALL (a semantic change, not a no-op cleanup)",
                        node.lineno,
                        "warning",
                    )
                )
            if backend == "npu":
                for keyword in node.keywords:
                    if keyword.arg == "num_warps":
                        problems.append(_num_warps(file, keyword.value.lineno))
        elif isinstance(node, ast.Dict) and backend == "npu":
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value == "num_warps":
                    problems.append(_num_warps(file, key.lineno))
    backward = _backward_kernels(tree, launch_calls, {k.name for k in kernels})
    kernels = [k for k in kernels if k.name not in backward]  # the forward call's hot path is what is timed
    if len(kernels) > 1:
        kernels.sort(key=lambda k: k.lineno)
        names = ", ".join(f"{k.name} (line {k.lineno})" for k in kernels)
        problems.append(
            Problem(
                file,
                f"{len(kernels)} @triton.jit kernels: {names}; when they sit on the hot path, fuse "
                "them into one kernel first and optimize the fused kernel",
                kernels[1].lineno,
                "warning",
            )
        )
    if launches == 0:
        problems.append(
            Problem(
                file,
                "no Triton kernel launch (kernel[grid](...)) of a @triton.jit kernel is left in the "
                "code: the core computation must stay in Triton, not be replaced by PyTorch",
                1,
                "warning",
            )
        )
    problems.extend(anti_cheat.findings_for_tree(tree, file, launches=launch_calls))
    problems.sort(key=lambda p: (p.line or 0, p.message))
    return problems


def anti_cheat_findings(source: str, file: str) -> list[Problem]:
    """Only the static anti-cheat warnings of one operator source (see anti_cheat.py), sorted by
    line; empty when it does not parse (lint_source says so)."""
    try:
        tree = python_source.parse(source)
    except (SyntaxError, ValueError):
        return []
    return anti_cheat.findings_for_tree(tree, file)


def round_anti_cheat_findings(operator: Path, source: str, shown_dir: str) -> list[Problem]:
    """The static anti-cheat warnings of a round: its operator's (``source``, shown as
    ``shown_dir/<name>``) and then those of every other Python file the gate's operator process
    receives beside it, which the operator can import (``workspace.siblings.sibling_files``)."""
    return [*anti_cheat_findings(source, f"{shown_dir}/{Path(operator).name}"),
            *anti_cheat.sibling_findings(Path(operator), shown_dir)]


def _num_warps(file: str, line: int) -> Problem:
    return Problem(
        file,
        "num_warps is set, but the target backend is an Ascend NPU, where num_warps is a CUDA "
        "launch knob with no meaningful effect; do not spend rounds tuning it",
        line,
        "warning",
    )


def lint_operator(path: Path, *, backend: str | None = None, shown_as: str | None = None) -> list[Problem]:
    """Lint one operator file (read through the safe reader); unreadable files give a single warning."""
    from helix_engine.workspace.reading import owning_workspace, read_text_safe

    source, problem = read_text_safe(Path(path), owning_workspace(path))
    if problem is not None:
        return [Problem(shown_as or problem.file, f"cannot be read for linting ({problem.message})", None, "warning")]
    return lint_source(source or "", shown_as or Path(path).name, backend=backend)


def lint_round(round_dir: Path, *, operator: Path | None = None, source: str | None = None,
               baseline_records: list | None = None) -> list[Problem]:
    """The hard-rule warnings for a round's operator, with the workspace's target backend: the
    one function behind `helix lint`, the cockpit's badges and submit-round's ``lints`` (which
    passes the operator, source and baseline records it already read)."""
    from helix_engine.state import checks, measure

    round_dir = Path(round_dir)
    if operator is None:
        op_name, _, legacy = checks.expected_names(round_dir.parent)
        operator = checks.resolve_round_operator(round_dir, op_name, legacy) if round_dir.is_dir() else None
    if operator is None:
        return []
    if baseline_records is None:
        baseline_records = measure.baseline_records(round_dir.parent)
    backend = target_backend(round_dir.parent, baseline_records)
    shown = f"{round_dir.name}/{operator.name}"
    found = lint_operator(operator, backend=backend, shown_as=shown) if source is None else \
        lint_source(source, shown, backend=backend)
    return found + anti_cheat.sibling_findings(operator, round_dir.name)  # the helpers it can import


def lint_file(path: Path) -> list[Problem]:
    """`helix lint FILE`: a round's operator is linted as its round (the same answer as
    ``--round-dir``); any other file with the backend of the workspace it lies in, if any."""
    from helix_engine.state import measure
    from helix_engine.workspace import layout
    from helix_engine.workspace.reading import owning_workspace

    path = Path(path)
    if layout.round_number(path.resolve().parent.name) is not None:
        from helix_engine.state import checks

        round_dir = path.resolve().parent
        op_name, _, legacy = checks.expected_names(round_dir.parent)
        if checks.resolve_round_operator(round_dir, op_name, legacy) == path.resolve():
            return lint_round(round_dir)
    workspace = owning_workspace(path)
    backend = target_backend(workspace, measure.baseline_records(workspace))
    return lint_operator(path, backend=backend, shown_as=str(path))
