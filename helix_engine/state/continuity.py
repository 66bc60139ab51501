"""Upstream's kernel-continuity check (round checker stage 6), read from the syntax tree.

Upstream asks for a ``name[grid](`` launch plus a Triton signal, or a TileLang
``with T.Kernel(...) as`` block plus a TileLang signal. It does so with a regex that stops at the
first ``]``, so an ordinary launch such as ``kernel[(x.shape[0],)](x)`` was rejected, while a
launch kept only in a comment passed. Here a launch is a call whose callee subscripts a jitted
kernel, in every form Triton accepts: any grid expression (nested brackets, calls, lambdas,
names), a kernel reached through an attribute (``mod.kernel[grid](...)``), a kernel bound to
another name, or handed to a helper as an argument.

A kernel is a name bound to a function decorated with ``triton.jit``/``autotune``/``heuristics``
(any alias), to the result of calling one of those, or a name imported from another module (the
file cannot see inside it; upstream accepts any name there too).
"""

from __future__ import annotations

import ast

from helix_engine import python_source

CONTINUITY_ISSUE = "round operator no longer preserves a recognizable Ascend kernel launch path"
_KERNEL_DECORATORS = frozenset({"jit", "autotune", "heuristics"})
# Libraries that hold no Triton kernel: ``torch.x[i](...)`` is not a launch.
_NOT_KERNEL_HOMES = frozenset({
    "torch", "torch_npu", "numpy", "math", "os", "sys", "functools", "itertools", "typing", "collections",
    "dataclasses", "operator",
})


def continuity_issue(source: str, file: str) -> str | None:
    """None when the source keeps a Triton or TileLang launch path; else the issue sentence
    (upstream's text, or a syntax-error sentence when the file does not parse)."""
    try:
        tree = python_source.parse(source)
    except (SyntaxError, ValueError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        return (f"{file} does not parse as Python ({where}{reason}), so its kernel launch path cannot be "
                "checked; fix the syntax error and submit the round again")
    if (triton_launches(tree) and _triton_signal(tree)) or _tilelang_ok(tree):
        return None
    return CONTINUITY_ISSUE


def kernel_continuity_ok(source: str) -> bool:
    return continuity_issue(source, "<operator>") is None


# ------------------------------------------------------------------------------ Triton


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` → ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


class _Names:
    """What the module binds: triton aliases, names imported from triton, imported modules and
    names, and (after ``_bind``) the names that hold a kernel."""

    def __init__(self, tree: ast.AST) -> None:
        self.triton: set[str] = {"triton"}
        self.from_triton: set[str] = set()
        self.modules: set[str] = set()
        self.imported: set[str] = set()
        self.kernels: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    root = alias.name.split(".")[0]
                    if alias.name == "triton" and alias.asname:
                        self.triton.add(alias.asname)
                    if root != "triton" and root not in _NOT_KERNEL_HOMES:
                        self.modules.add(alias.asname or root)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                for alias in node.names:
                    name = alias.asname or alias.name
                    if module.split(".")[0] == "triton":
                        self.from_triton.add(name)
                    elif alias.name != "*" and module.split(".")[0] not in _NOT_KERNEL_HOMES:
                        # A kernel defined elsewhere (from .kernels import k) or a module (from . import kernels).
                        self.imported.add(name)
                        self.modules.add(name)

    def is_kernel_factory(self, node: ast.expr) -> bool:
        """``triton.jit``, ``triton.autotune(...)``, ``jit`` (from triton import jit), …"""
        target = node.func if isinstance(node, ast.Call) else node
        parts = _dotted(target)
        if parts is None or parts[-1] not in _KERNEL_DECORATORS:
            return False
        if len(parts) == 1:
            return parts[0] in self.from_triton
        return parts[0] in self.triton or parts[0] in self.from_triton

    def makes_kernel(self, value: ast.expr) -> bool:
        """An expression whose value is a kernel: a kernel name, a kernel-factory call such as
        ``triton.autotune(configs)(triton.jit(f))``, ``a if c else b`` of kernels, or a dict,
        list or tuple holding kernels (then ``table[key][grid](...)`` is a launch)."""
        if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)):
            return self.is_kernel_ref(value)
        if isinstance(value, ast.IfExp):
            return self.makes_kernel(value.body) or self.makes_kernel(value.orelse)
        if isinstance(value, ast.Call):
            return self.is_kernel_factory(value.func)
        if isinstance(value, ast.Dict):
            return any(self.makes_kernel(v) for v in value.values)
        if isinstance(value, (ast.List, ast.Tuple)):
            return any(self.makes_kernel(v) for v in value.elts)
        return False

    def is_kernel_ref(self, node: ast.expr) -> bool:
        """The callee of ``X[grid](...)``: a kernel name, or an attribute chain rooted in an
        imported module or naming a kernel of this file (``mod.kernel``, ``self.kernel``), or an
        item of a kernel table (``table["fwd"]``)."""
        if isinstance(node, ast.Subscript):
            return self.is_kernel_ref(node.value)
        if isinstance(node, ast.Name):
            return node.id in self.kernels or node.id in self.imported
        parts = _dotted(node)
        if parts is None:
            return False
        return parts[0] in self.modules or parts[-1] in self.kernels


def _bind(tree: ast.AST, names: _Names) -> None:
    """Collect kernel names until nothing changes: decorated defs, assignments of kernels, and
    parameters of local functions that are called with a kernel argument."""
    functions: dict[str, ast.arguments] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node.args
            if any(names.is_kernel_factory(d) for d in node.decorator_list):
                names.kernels.add(node.name)
    changed = True
    while changed:
        before = len(names.kernels)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if names.makes_kernel(node.value):
                    for target in targets:
                        parts = _dotted(target)
                        if parts is not None:
                            names.kernels.add(parts[-1])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                params = functions[node.func.id]
                positional = [a.arg for a in params.posonlyargs + params.args]
                for index, arg in enumerate(node.args):
                    if index < len(positional) and names.makes_kernel(arg):
                        names.kernels.add(positional[index])
                for keyword in node.keywords:
                    if keyword.arg and names.makes_kernel(keyword.value):
                        names.kernels.add(keyword.arg)
        changed = len(names.kernels) != before


def triton_launches(tree: ast.AST) -> list[ast.Call]:
    """Every ``kernel[grid](...)`` call of the module, in source order."""
    names = _Names(tree)
    _bind(tree, names)
    found = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) and names.is_kernel_ref(node.func.value)
    ]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _triton_signal(tree: ast.AST) -> bool:
    """Upstream's Triton signal: triton imported, a triton decorator, or ``tl.``/``triton.language``."""
    return any(
        _imports(node, "triton")
        or (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "tl")
        for node in ast.walk(tree)
    )


# ---------------------------------------------------------------------------- TileLang


def _tilelang_ok(tree: ast.AST) -> bool:
    """A ``with T.Kernel(...) as x`` block plus a TileLang signal (import tilelang,
    ``@T.prim_func``, ``tilelang.language`` or ``T.`` in use)."""
    launch = signal = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                call = item.context_expr
                if (
                    item.optional_vars is not None
                    and isinstance(call, ast.Call)
                    and _dotted(call.func) == ["T", "Kernel"]
                ):
                    launch = True
        elif _imports(node, "tilelang") or (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "T"
        ):
            signal = True
    return launch and signal


def _imports(node: ast.AST, package: str) -> bool:
    """``import package[.x]`` or ``from package[.x] import …``."""
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == package for a in node.names)
    return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package
