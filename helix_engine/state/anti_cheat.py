"""Static anti-cheat lints of a round's operator, read from its syntax tree (never by running it).

The operator is an adversary (DESIGN principle 9): code written to pass the gate. These lints name,
at file:line, the shapes such code takes when it games the gate instead of speeding up the kernel:

1. PyTorch computing the result in the wrapper around a (dummy) Triton launch;
2. a try/except (or ``contextlib.suppress``) fallback path around a Triton launch;
3. side streams (``torch.cuda.Stream``, ``torch.cuda.stream(...)``, ``set_stream``, NPU alike);
4. threads, processes and event loops;
5. patching the timer, ``sys.modules``, torch or helix itself, importing helix, and detecting
   the benchmark (HELIX_*/PYTEST/profiler variables, ``sys.argv``, stack inspection);
6. writes to the file system;
7. reaching the process's own code: ``__main__`` (the gate's operator-process module), ``ctypes``,
   imports by a computed name;
8. function internals (``__code__``, ``__defaults__``, ``__globals__``, closure cells) and frames
   (``tb_frame``, ``f_back``, ``f_globals``, ``sys._getframe`` or ``gc.get_objects`` taken as values);
9. writing attributes of classes and modules the operator did not create: ``setattr(type(t), ...)``,
   ``torch.Tensor.x =``, ``SomeImportedClass.x =``, ``builtins.x =``, ``mod.__dict__[k] =``,
   ``vars(mod)[k] =`` (its own instances' and classes' attributes are honest).

The gate's operator process imports the round's other ``*.py`` files too (``import helper``):
``sibling_findings`` lints each of them, as ``opt-round-N/helper.py:line``.

Each is a ``Problem`` of severity "warning": the gate lists them, it does not fail on them; the
dynamic checks (held-out inputs, kernel coverage) are what fail a round. Precision matters more
than recall: the honest operators of ``examples/`` give no finding, and a shape that honest code
also takes (a torch epilogue on a buffer the kernel wrote, an allocation, a view, reading the
clock) is never one.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from helix_engine import python_source
from helix_engine.state.continuity import triton_launches
from helix_engine.workspace.problem import Problem
from helix_engine.workspace.siblings import sibling_files

# ----------------------------------------------------------------------------- vocabulary

#: Torch functions and tensor methods that compute values (``torch.X``, ``x.X()``, in place ``x.X_()``).
COMPUTE = frozenset({
    "softmax", "log_softmax", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sum", "nansum", "mean",
    "nanmean", "max", "min", "amax", "amin", "aminmax", "maximum", "minimum", "fmax", "fmin", "argmax", "argmin",
    "prod", "cumsum", "cumprod", "cummax", "cummin", "logsumexp", "logcumsumexp", "var", "std", "var_mean",
    "std_mean", "norm", "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "dot", "vdot", "inner",
    "outer", "einsum", "tensordot", "kron", "chain_matmul", "layer_norm", "group_norm", "batch_norm",
    "instance_norm", "rms_norm", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode", "where", "sigmoid",
    "tanh", "relu", "gelu", "silu", "erf", "erfc", "sqrt", "rsqrt", "reciprocal", "pow", "square", "abs", "neg",
    "negative", "clamp", "clip", "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
    "floor_divide", "remainder", "fmod", "lerp", "addcmul", "addcdiv", "sin", "cos", "tan", "floor", "ceil",
    "round", "trunc", "sign", "cross", "cdist", "dist", "linear", "bilinear", "dropout", "embedding", "scatter",
    "scatter_add", "scatter_reduce", "gather", "index_select", "masked_fill", "masked_scatter", "take",
    "take_along_dim", "bincount", "histc", "cosine_similarity", "scaled_dot_product_attention",
    "diff", "trace", "tril", "triu", "renorm", "hardtanh", "softplus", "mish", "logit", "xlogy", "hypot",
    "atan2", "sinh", "cosh", "asin", "acos", "atan", "frac",
})
#: Torch calls that allocate, describe or copy memory: never "compute" (their value carries no taint).
ALLOCATE = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "arange", "linspace", "logspace", "eye", "tensor", "as_tensor", "as_strided", "from_numpy", "frombuffer",
    "device", "dtype", "finfo", "iinfo", "Size", "Generator", "manual_seed", "seed", "rand", "randn", "randint",
    "randperm", "rand_like", "randn_like", "randint_like", "is_tensor", "numel", "get_default_dtype",
    "result_type", "promote_types", "can_cast", "is_floating_point", "is_complex", "synchronize",
})
#: Tensor methods that give a view, a cast or a copy of their receiver (the taint passes through).
PASS_THROUGH = frozenset({
    "view", "reshape", "contiguous", "to", "t", "transpose", "permute", "expand", "expand_as", "flatten",
    "squeeze", "unsqueeze", "float", "half", "bfloat16", "double", "int", "long", "type", "type_as", "view_as",
    "reshape_as", "clone", "detach", "cpu", "cuda", "npu", "narrow", "select", "unflatten", "movedim", "item",
    "tolist", "numpy", "values", "indices", "T", "mT", "real", "imag", "as_strided", "split", "chunk", "unbind",
})
#: Tensor methods and attributes that describe a tensor or allocate a new one (no taint).
DESCRIBE = frozenset({
    "stride", "shape", "numel", "size", "dim", "ndim", "element_size", "dtype", "device", "is_contiguous",
    "data_ptr", "storage_offset", "untyped_storage", "nbytes", "itemsize", "is_cuda", "layout", "new_empty",
    "new_zeros", "new_ones", "new_full", "new_tensor", "zero_", "fill_", "requires_grad_", "nelement",
})
#: Words of a public function's name that mark it a reference or check, not an entry point (rule 1b).
_REFERENCE_WORDS = frozenset({
    "ref", "reference", "torch", "naive", "eager", "check", "verify", "test", "golden", "expected", "oracle",
})

_STREAM = re.compile(r"^torch(_npu)?(\.\w+)?\.(Stream|stream|set_stream|ExternalStream|StreamContext)$")
_EXECUTOR = re.compile(r"^concurrent\.futures(\.\w+)*\.\w*Executor$")
_THREADS = frozenset({
    "threading.Thread", "threading.Timer", "_thread.start_new_thread", "_thread.start_new", "os.fork",
    "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "os.system", "os.popen",
})
_THREAD_PREFIXES = ("multiprocessing.", "torch.multiprocessing.", "subprocess.", "asyncio.")
_FRAMES = frozenset({
    "inspect.stack", "inspect.currentframe", "inspect.getouterframes", "inspect.getinnerframes", "inspect.trace",
    "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys.addaudithook",
    "threading.settrace", "threading.setprofile", "traceback.extract_stack", "traceback.format_stack",
    "traceback.print_stack", "traceback.walk_stack", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})
_WRITES = frozenset({
    "torch.save", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt",
    "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.copymode", "shutil.copystat",
    "shutil.move", "shutil.rmtree", "shutil.chown", "shutil.make_archive",
    "os.remove", "os.unlink", "os.rename", "os.renames", "os.replace", "os.rmdir", "os.removedirs", "os.mkdir",
    "os.makedirs", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown", "os.utime", "os.mkfifo",
    "os.write", "tempfile.mkstemp", "tempfile.mkdtemp", "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile",
    "tempfile.SpooledTemporaryFile", "tempfile.TemporaryDirectory",
})
#: Methods that write the file system whatever their receiver is called (``Path`` methods, ``ndarray.tofile``).
_WRITE_METHODS = frozenset({
    "write_text", "write_bytes", "touch", "mkdir", "rmdir", "unlink", "symlink_to", "hardlink_to", "tofile",
})
_OPEN_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"})
#: Environment names that tell an operator it runs under the gate, a test runner or a profiler.
_DETECT_ENV = re.compile(r"^(HELIX|PYTEST)|BENCH|PROFIL|NSYS|^NCU|KINETO|MSPROF", re.IGNORECASE)
_ENV_GETTERS = frozenset({"os.environ.get", "os.getenv", "os.environ.setdefault", "os.environ.pop",
                          "os.environ.__getitem__", "os.environ.__contains__", "os.getenvb", "os.environb.get"})
_MOCK_PATCH = frozenset({"unittest.mock.patch", "mock.patch", "unittest.mock.patch.object", "mock.patch.object"})
_IMPORT_BY_NAME = frozenset({"importlib.import_module", "builtins.__import__", "__import__", "importlib.__import__"})
#: Modules that hand the operator raw memory and foreign calls (any object's bytes, the gate's included).
_NATIVE = frozenset({"ctypes", "_ctypes", "cffi"})
#: A function's code, defaults, globals and closure cells: how code rewrites a function it did not write.
_FUNCTION_INTERNALS = frozenset({
    "__code__", "__defaults__", "__kwdefaults__", "__globals__", "__closure__", "cell_contents",
})
#: The links from a traceback, frame or generator to frames: how code reaches its callers' variables.
_FRAME_LINKS = frozenset({
    "__traceback__", "tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "gi_frame",
    "cr_frame", "ag_frame",
})
#: What runs code the lint cannot read: source text built or read at run time, code objects, loaders
#: of files by path, and deserializers that call what the data names.
_CODE_RUNNERS = frozenset({
    "exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile", "runpy.run_path",
    "runpy.run_module", "importlib.util.spec_from_file_location", "importlib.machinery.SourceFileLoader",
    "importlib.machinery.SourcelessFileLoader", "importlib.machinery.ExtensionFileLoader",
    "importlib.machinery.SourceFileLoader.load_module", "types.FunctionType", "types.CodeType", "marshal.loads",
    "marshal.load", "pickle.loads", "pickle.load", "code.interact", "code.InteractiveInterpreter",
    "zipimport.zipimporter",
})
#: The import path and its hooks: writing them decides which file an ``import`` runs.
_IMPORT_PATH = frozenset({"sys.path", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache"})
#: Modules under ``os`` (the same C functions without the names the lint and the audit know).
_OS_UNDER = frozenset({"posix", "nt", "_posixsubprocess", "_winapi"})
#: Attributes that lead from an object to its class (``x.__class__.clone = ...`` patches the class).
_CLASS_OF = frozenset({"__class__", "__base__", "__bases__", "__mro__", "__subclasses__"})
#: Builders whose result is a plain instance (or a fresh module) this file made: setattr on it is honest.
_PLAIN_INSTANCES = frozenset({"types.SimpleNamespace", "argparse.Namespace", "object", "types.ModuleType",
                              "importlib.util.module_from_spec"})
#: Methods that write a namespace dict (``vars(mod).update(...)``, ``X.__dict__.setdefault(...)``).
_DICT_WRITES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"})


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` → ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _short(node: ast.AST, limit: int = 48) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Imports:
    """The module's import bindings: local name → the dotted name it stands for."""

    def __init__(self, nodes: Iterable[ast.AST]) -> None:
        self.names: dict[str, str] = {}
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.names[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.names[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def canonical(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for when it is rooted in an import (``F.softmax`` →
        ``torch.nn.functional.softmax``); the builtins ``open``/``setattr``/… by their own name;
        None for anything rooted in a local value."""
        parts = _dotted(node)
        if parts is None:
            return None
        if parts[0] in self.names:
            return ".".join([self.names[parts[0]], *parts[1:]])
        if parts[0] == "__builtins__":  # the builtins module (or its dict) by its other name
            return ".".join(["builtins", *parts[1:]])
        if len(parts) == 1 and parts[0] in ("open", "setattr", "delattr", "getattr", "hasattr", "__import__",
                                            "dict", "list", "type", "vars", "object", "exec", "eval", "compile"):
            return parts[0]
        return None


def _torch_kind(name: str) -> str:
    """compute | allocate | other, for the dotted name of a torch (or torch_npu) function."""
    parts = name.split(".")
    if parts[0] == "torch_npu":
        return "compute" if parts[-1].startswith("npu_") else "other"
    if parts[0] != "torch":
        return "other"
    if name.startswith("torch.nn.functional."):
        return "other" if parts[-1] == "pad" else "compute"
    if name.startswith(("torch.linalg.", "torch.special.", "torch.fft.", "torch.ops.")):
        return "compute"
    if len(parts) == 2 or (len(parts) == 3 and parts[1] == "Tensor"):
        if parts[-1] in ALLOCATE:
            return "allocate"
        if parts[-1] in COMPUTE:
            return "compute"
    return "other"


def _is_torch_module_class(node: ast.AST, imports: _Imports) -> bool:
    """``torch.nn.Softmax(dim=-1)``: building a torch module (then calling it computes)."""
    if not isinstance(node, ast.Call):
        return False
    name = imports.canonical(node.func) or ""
    last = name.rsplit(".", 1)[-1]
    return name.startswith("torch.nn.") and last[:1].isupper()


# --------------------------------------------------------------------- rule 1: torch result


@dataclass(frozen=True)
class _Origin:
    """Where a value was computed by PyTorch: the node (its line is the finding's) and how to say it."""

    node: ast.AST
    text: str


class _Flow:
    """The taint analysis of one function: which local names hold a value PyTorch computed from
    the function's inputs (not from a buffer that a kernel of this function writes)."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, module: _Module) -> None:
        self.fn = fn
        self.module = module
        self.env: dict[str, _Origin] = {}
        self.nodes = module.own_nodes(fn)
        self.kernel_buffers = self._kernel_buffers()
        for _ in range(8):  # to a fixed point: a name tainted later in the text flows to earlier uses
            before = len(self.env)
            for node in self.nodes:
                self._bind(node)
            if len(self.env) == before:
                break

    # which buffers a launch of this function writes: locals allocated here and passed to a launch
    def _kernel_buffers(self) -> set[str]:
        allocated: set[str] = set()
        for _ in range(4):
            for node in self.nodes:
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    if self._allocates(node.value, allocated):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        allocated.update(_target_names(targets))
        passed: set[str] = set()
        helpers = [n for n in self.nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and n.func.id in self.module.reaching]  # _launch(x, y): the helper's kernel writes y
        for call in [*self.module.launches_in(self.fn), *helpers]:
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                passed.update(n.id for n in ast.walk(arg) if isinstance(n, ast.Name))
        return allocated & passed

    def _allocates(self, value: ast.AST, allocated: set[str]) -> bool:
        if isinstance(value, ast.Name):
            return value.id in allocated
        if isinstance(value, ast.IfExp):  # `torch.empty(...) if split > 1 else scratch`: the kernel writes it either way
            return self._allocates(value.body, allocated) or self._allocates(value.orelse, allocated)
        if isinstance(value, ast.BoolOp):  # `scratch or torch.empty(...)`
            return any(self._allocates(v, allocated) for v in value.values)
        if isinstance(value, ast.Subscript):
            return self._allocates(value.value, allocated)
        if not isinstance(value, ast.Call):
            return False
        name = self.module.imports.canonical(value.func)
        if name is not None:
            return _torch_kind(name) == "allocate"
        if isinstance(value.func, ast.Attribute):
            if value.func.attr in ("new_empty", "new_zeros", "new_ones", "new_full", "zero_", "fill_"):
                return True
            if value.func.attr in PASS_THROUGH:
                return self._allocates(value.func.value, allocated)
        return False

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            self._taint(_target_names(node.targets), self.origin(node.value))
            for target in node.targets:  # y[...] = <torch result>: y now holds it
                if isinstance(target, (ast.Subscript, ast.Attribute)):
                    self._taint(_target_names([target.value]), self.origin(node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            self._taint(_target_names([node.target]), self.origin(node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._taint(_target_names([node.target]), self.origin(node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._taint(_target_names([node.optional_vars]), self.origin(node.context_expr))
        elif isinstance(node, ast.NamedExpr):
            self._taint(_target_names([node.target]), self.origin(node.value))
        elif isinstance(node, ast.Call):
            out = next((k.value for k in node.keywords if k.arg == "out"), None)
            if out is not None:  # torch.softmax(x, -1, out=y)
                self._taint(_target_names([out]), self._call_origin(node))
            func = node.func
            if isinstance(func, ast.Attribute) and self.module.imports.canonical(func) is None:
                receiver = _target_names([func.value])
                if func.attr.endswith("_") and func.attr[:-1] in COMPUTE:  # y.exp_(), y.mul_(2)
                    self._taint(receiver, self._computed(
                        node, [func.value, *node.args], f"{_short(func.value)} updated in place by {_short(func)}(...)"))
                elif func.attr == "copy_" and node.args:  # y.copy_(torch.softmax(x))
                    self._taint(receiver, self.origin(node.args[0]))

    def _taint(self, names: Iterable[str], origin: _Origin | None) -> None:
        if origin is None:
            return
        for name in names:
            self.env.setdefault(name, origin)

    def _computed(self, node: ast.AST, operands: list[ast.AST], text: str) -> _Origin | None:
        """A torch computation, unless it reads a buffer a kernel of this function wrote (an
        epilogue on the kernel's output is not the wrapper replacing the kernel)."""
        for operand in operands:
            if any(isinstance(n, ast.Name) and n.id in self.kernel_buffers for n in ast.walk(operand)):
                return None
        return _Origin(node, text)

    def _any(self, nodes: Iterable[ast.AST | None]) -> _Origin | None:
        for node in nodes:
            if node is not None:
                found = self.origin(node)
                if found is not None:
                    return found
        return None

    def origin(self, node: ast.AST) -> _Origin | None:
        """Where PyTorch computed this expression's value, or None when it did not."""
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Call):
            return self._call_origin(node)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                return self._computed(node, [node.left, node.right], _short(node))
            return self._any([node.left, node.right])
        if isinstance(node, ast.UnaryOp):
            return self.origin(node.operand)
        if isinstance(node, ast.Subscript):
            return self.origin(node.value)
        if isinstance(node, ast.Attribute):
            if self.module.imports.canonical(node) is not None or node.attr in DESCRIBE:
                return None
            return self.origin(node.value)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return self._any(node.elts)
        if isinstance(node, ast.IfExp):
            return self._any([node.body, node.orelse])
        if isinstance(node, ast.BoolOp):
            return self._any(node.values)
        if isinstance(node, (ast.Starred, ast.Await, ast.NamedExpr)):
            return self.origin(node.value)
        if isinstance(node, ast.Dict):
            return self._any(node.values)
        return None

    def _call_origin(self, call: ast.Call) -> _Origin | None:
        func = call.func
        # out= names where the result goes, not an operand (torch.softmax(x, -1, out=y) reads x only)
        args: list[ast.AST] = [*call.args, *(k.value for k in call.keywords if k.arg != "out")]
        if _is_torch_module_class(func, self.module.imports):  # torch.nn.Softmax(-1)(x)
            return self._computed(call, args, f"{_short(func)}(...)")
        name = self.module.imports.canonical(func)
        if name is not None:
            kind = _torch_kind(name)
            if kind == "compute":
                return self._computed(call, args, f"{_short(func)}(...)")
            return None if kind == "allocate" else self._any(args)
        if isinstance(func, ast.Name):
            helper = self.module.returns.get(func.id)
            if helper is not None and func.id in self.module.functions:
                if self._computed(call, args, "") is None:  # the helper is handed a kernel's buffer
                    return None
                return _Origin(call, f"{func.id}(...), whose result is {helper.text}")
            return self._any(args)
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if func.attr in COMPUTE:  # x.softmax(-1), x.sum(), self.norm(x)
                return self._computed(call, [receiver, *args], f"{_short(func)}(...)")
            if func.attr in DESCRIBE:
                return None
            if func.attr in PASS_THROUGH:
                return self.origin(receiver)
            return self._any([receiver, *args])
        return self._any([func, *args])

    def returns(self) -> list[tuple[ast.Return, _Origin | None]]:
        return [(n, self.origin(n.value)) for n in self.nodes if isinstance(n, ast.Return) and n.value is not None]


def _target_names(targets: Iterable[ast.AST]) -> list[str]:
    names: list[str] = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            names.extend(_target_names(target.elts))
        elif isinstance(target, ast.Starred):
            names.extend(_target_names([target.value]))
    return names


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, in source order, without those of nested functions,
    lambdas and classes (they have their own flow)."""
    stack = list(reversed(getattr(fn, "body", [])))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


class _Module:
    """What rule 1 and rule 2 need of the whole module: imports, functions, launches, which
    functions reach a launch, and which functions return a torch result."""

    def __init__(self, tree: ast.Module, launches: list[ast.Call] | None = None) -> None:
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self.parents = {id(child): node for node in self.nodes for child in ast.iter_child_nodes(node)}
        self.imports = _Imports(self.nodes)
        self.launches = triton_launches(tree) if launches is None else launches
        self._walks: dict[int, list[ast.AST]] = {}
        self._own: dict[int, list[ast.AST]] = {}
        self._launch_ids = {id(c) for c in self.launches}
        every = [n for n in self.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self.defs = [fn for fn in every if not any(self._is_kernel_factory(d) for d in fn.decorator_list)]
        self.functions = {fn.name: fn for fn in self.defs}
        self.returns: dict[str, _Origin] = {}
        self.reaching = self._reaching()
        self.flows: dict[int, _Flow] = {}
        for _ in range(4):  # helpers' return taints, to a fixed point
            before = dict(self.returns)
            self.flows = {id(fn): _Flow(fn, self) for fn in self.defs}
            for fn in self.defs:
                found = next((o for _, o in self.flows[id(fn)].returns() if o is not None), None)
                if found is not None:
                    self.returns.setdefault(fn.name, found)
            if self.returns == before:
                break

    def _is_kernel_factory(self, decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = self.imports.canonical(target) or ""
        return name.startswith("triton.") and name.rsplit(".", 1)[-1] in ("jit", "autotune", "heuristics")

    def _walk(self, node: ast.AST) -> list[ast.AST]:
        """ast.walk, kept for the module's own functions (a temporary node's id may be reused)."""
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return list(ast.walk(node))
        if id(node) not in self._walks:
            self._walks[id(node)] = list(ast.walk(node))
        return self._walks[id(node)]

    def own_nodes(self, fn: ast.AST) -> list[ast.AST]:
        if id(fn) not in self._own:
            self._own[id(fn)] = list(_own_nodes(fn))
        return self._own[id(fn)]

    def launches_in(self, node: ast.AST) -> list[ast.Call]:
        return [n for n in self._walk(node) if isinstance(n, ast.Call) and id(n) in self._launch_ids]

    def _calls_in(self, node: ast.AST) -> set[str]:
        return {n.func.id for n in self._walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}

    def _reaching(self) -> set[str]:
        """Names of the functions that launch a kernel, themselves or through a local function."""
        reaching = {fn.name for fn in self.defs if self.launches_in(fn)}
        changed = True
        while changed:
            changed = False
            for fn in self.defs:
                if fn.name not in reaching and self._calls_in(fn) & reaching:
                    reaching.add(fn.name)
                    changed = True
        return reaching

    def reaches_launch(self, node: ast.AST) -> bool:
        return bool(self.launches_in(node)) or bool(self._calls_in(node) & self.reaching)


def _torch_result(module: _Module, file: str) -> list[Problem]:
    problems: list[Problem] = []
    if not module.launches:
        return problems  # no launch at all: lint_source's own warning says the kernel is gone
    referenced = {n.id for n in module.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    entries = {id(n) for n in module.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for cls in (n for n in module.tree.body if isinstance(n, ast.ClassDef)):
        entries.update(id(n) for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in ("forward", "__call__"))
    seen: set[int] = set()
    for fn in module.defs:
        flow = module.flows[id(fn)]
        returns = flow.returns()
        if fn.name in module.reaching:
            for ret, origin in returns:
                if origin is None or id(origin.node) in seen:
                    continue
                seen.add(id(origin.node))
                problems.append(Problem(
                    file,
                    f"{fn.name}() launches a Triton kernel but its return at line {ret.lineno} is {origin.text}, "
                    "computed by PyTorch from the inputs in the wrapper: a gate would time and check PyTorch's "
                    "result, not a buffer the kernel wrote",
                    getattr(origin.node, "lineno", ret.lineno), "warning"))
        elif (
            id(fn) in entries
            and not fn.name.startswith("_")
            and not (set(fn.name.lower().split("_")) & _REFERENCE_WORDS)
            and fn.name not in referenced
            and returns
            and all(origin is not None for _, origin in returns)
        ):
            origin = returns[0][1]
            assert origin is not None
            problems.append(Problem(
                file,
                f"{fn.name}() returns {origin.text}, computed by PyTorch, while this file's Triton launch "
                f"(line {module.launches[0].lineno}) sits in another function it never calls: its result does "
                "not come from the kernel, so a gate would time and check PyTorch",
                getattr(origin.node, "lineno", fn.lineno), "warning"))
    return problems


# ------------------------------------------------------------------ rule 2: fallback paths


_TRY_NODES: tuple[type[ast.Try], ...] = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)


def _fallbacks(module: _Module, file: str) -> list[Problem]:
    problems: list[Problem] = []
    for node in module.nodes:
        if isinstance(node, _TRY_NODES) and node.handlers:
            body = ast.Module(body=node.body, type_ignores=[])
            if not module.reaches_launch(body):
                continue
            handler = next((h for h in node.handlers if not (h.body and isinstance(h.body[-1], ast.Raise))), None)
            if handler is None:  # every handler re-raises: no fallback
                continue
            launch = module.launches_in(body)
            where = f"line {launch[0].lineno}" if launch else "a call that reaches one"
            problems.append(Problem(
                file,
                f"a Triton launch ({where}) sits in a try block whose except handler is a fallback path: when "
                "the kernel fails the operator still returns a result (e.g. from PyTorch), so a gate would pass "
                "code whose kernel does not run",
                handler.lineno, "warning"))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            if any(isinstance(i.context_expr, ast.Call)
                   and module.imports.canonical(i.context_expr.func) == "contextlib.suppress" for i in node.items):
                body = ast.Module(body=node.body, type_ignores=[])
                if module.reaches_launch(body):
                    problems.append(Problem(
                        file,
                        "a Triton launch runs under contextlib.suppress(...): a failing kernel is silently "
                        "ignored, so a gate would pass code whose kernel does not run",
                        node.lineno, "warning"))
    return problems


# --------------------------------------------------------- rules 3-6: calls and references


def _write_mode(call: ast.Call, position: int) -> bool:
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None and len(call.args) > position:
        mode = call.args[position]
    text = _const_str(mode)
    return text is not None and any(c in text for c in "wax+")


def _call_findings(module: _Module, file: str) -> list[Problem]:
    imports = module.imports
    problems: list[Problem] = []

    def add(node: ast.AST, message: str) -> None:
        problems.append(Problem(file, message, getattr(node, "lineno", None), "warning"))

    for node in module.nodes:
        if not isinstance(node, ast.Call):
            continue
        name = imports.canonical(node.func) or ""
        shown = _short(node.func)
        if _STREAM.match(name):
            add(node, f"{shown}(...) uses a side stream: work queued on another stream escapes the gate's timing "
                      "events on the default stream, so the measured time can miss the kernel's real cost")
        elif name in _THREADS or _EXECUTOR.match(name) or (
                name.startswith(_THREAD_PREFIXES) and name != "multiprocessing.cpu_count"):
            add(node, f"{shown}(...) starts a thread, process or event loop: work done outside the timed call, or "
                      "racing with the gate, can hide cost from the timer or tamper with the judge")
        elif name in _FRAMES:
            add(node, f"{shown}(...) inspects the call stack or the interpreter's state: the operator can find "
                      "out who calls it (the gate's timer or checker) and behave differently there")
        elif name in _WRITES or (name in ("open", "io.open", "codecs.open") and _write_mode(node, 1)) or (
                name == "os.open" and any(isinstance(n, ast.Attribute) and n.attr in _OPEN_FLAGS
                                          for a in node.args[1:2] for n in ast.walk(a))):
            add(node, f"{shown}(...) writes to the file system: an operator that writes files can leave behind "
                      "or overwrite what the gate reads (results, caches, records), and has no reason to")
        elif not name and isinstance(node.func, ast.Attribute) and (
                node.func.attr in _WRITE_METHODS or (node.func.attr == "open" and _write_mode(node, 0))):
            add(node, f"{shown}(...) writes to the file system: an operator that writes files can leave behind "
                      "or overwrite what the gate reads (results, caches, records), and has no reason to")
        elif name in ("setattr", "delattr") and node.args:
            patched = _patched_module(imports.canonical(node.args[0]))
            if patched is not None:
                add(node, f"{shown}({_short(node.args[0])}, ...) {_PATCH_WHY[patched]}")
        elif name in _MOCK_PATCH and node.args:
            target = _const_str(node.args[0]) or ""
            patched = _patched_module(target.rsplit(".", 1)[0] if name.endswith("patch") else
                                      imports.canonical(node.args[0]))
            if patched is not None:
                add(node, f"{shown}({_short(node.args[0])}, ...) {_PATCH_WHY[patched]}")
        elif name in _IMPORT_BY_NAME and node.args and (_const_str(node.args[0]) or "").split(".")[0] == "helix_engine":
            add(node, f"{shown}({_short(node.args[0])}) {_HELIX_IMPORT_WHY}")
        elif name in _ENV_GETTERS and node.args:
            key = _const_str(node.args[0])
            if key is None:
                add(node, f"{shown}(...) reads an environment variable whose name is computed: {_SCAN_WHY}")
            elif _DETECT_ENV.search(key):
                add(node, f"{shown}({key!r}) {_ENV_WHY}")
    return problems


_PATCH_WHY = {
    "time": "patches the time module: a patched clock makes the gate's timings meaningless",
    "torch": "monkeypatches a torch module: replacing torch functions changes what the gate's allocations, "
             "reference, comparison or synchronization do in this process",
    "helix_engine": "patches the judge (helix_engine): an operator that changes the gate's code can forge its verdict",
    "sys": "patches the sys module: swapping interpreter hooks or modules can replace the timer, torch or the gate",
}
_HELIX_IMPORT_WHY = ("imports the judge (helix_engine): an operator has no reason to, and the gate's code in its "
                     "process lets it detect or tamper with the measurement")
_ENV_WHY = ("reads an environment variable of the gate, a test runner or a profiler: the operator can detect the "
            "benchmark and behave differently under it")
_SCAN_WHY = "looking through the environment lets the operator detect the benchmark and behave differently under it"


def _patched_module(name: str | None) -> str | None:
    """Which guarded module an assignment or setattr target belongs to: time | torch | helix_engine
    | sys; None for others and for torch's configuration namespaces (``torch.backends.*``,
    ``*.config.*``), which honest operators set."""
    if not name:
        return None
    parts = name.split(".")
    if parts[0] == "time":
        return "time"
    if parts[0] in ("torch", "torch_npu"):
        return None if {"backends", "config"} & set(parts) else "torch"
    if parts[0] == "helix_engine":
        return "helix_engine"
    if name in ("sys", "sys.modules") or name.startswith(("sys.modules.", "sys.meta_path", "sys.path_hooks")):
        return "sys"
    return None


def _reference_findings(module: _Module, file: str) -> list[Problem]:
    """Imports of helix, assignments that patch guarded modules, sys.modules, sys.argv and
    os.environ reads."""
    imports = module.imports
    parents = module.parents
    problems: list[Problem] = []

    def add(node: ast.AST, message: str) -> None:
        problems.append(Problem(file, message, getattr(node, "lineno", None), "warning"))

    for node in module.nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "helix_engine":
                    add(node, f"import {alias.name} {_HELIX_IMPORT_WHY}")
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "helix_engine":
            add(node, f"from {node.module} import ... {_HELIX_IMPORT_WHY}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in _flat_targets(targets):
                if isinstance(target, ast.Attribute):
                    name = imports.canonical(target)
                    patched = _patched_module(name)
                    if patched is not None:
                        verb = "deletes" if isinstance(node, ast.Delete) else "assigns"
                        add(target, f"{verb} {_short(target)}, which {_PATCH_WHY[patched]}")
        elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
            name = imports.canonical(node) or ""
            if name == "sys.modules":
                add(node, _sys_modules_message(node, parents))
            elif name in ("sys.argv", "sys.orig_argv"):
                add(node, f"inspects {name}: the command line tells the operator whether it runs under the gate, so "
                          "it can behave differently there")
            elif name in ("os.environ", "os.environb"):
                message = _environ_message(node, parents)
                if message is not None:
                    add(node, message)
    return problems


def _flat_targets(targets: Iterable[ast.AST]) -> Iterator[ast.AST]:
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            yield from _flat_targets(target.elts)
        elif isinstance(target, ast.Starred):
            yield target.value
        else:
            yield target


def _sys_modules_message(node: ast.AST, parents: dict[int, ast.AST]) -> str:
    parent = parents.get(id(node))
    writes = (isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del))) or (
        isinstance(parent, ast.Attribute) and parent.attr in ("update", "setdefault", "pop", "popitem", "clear",
                                                              "__setitem__", "__delitem__"))
    if writes:
        return ("changes sys.modules: swapping modules in the operator's process can replace the timer, torch or the "
                "gate itself")
    return ("reads sys.modules: an operator that looks for loaded modules can detect the benchmark and behave "
            "differently under the gate")


def _environ_message(node: ast.AST, parents: dict[int, ast.AST]) -> str | None:
    """The finding's sentence for one use of ``os.environ``; None for a read or write of one fixed
    name that is no benchmark signal, and for ``os.environ.get(...)``-style calls (the call pass
    judges their argument)."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Attribute):
        return None if parent.attr in _ENV_KEYED else f"scans os.environ ({parent.attr}): {_SCAN_WHY}"
    if isinstance(parent, ast.Subscript) and parent.value is node:
        key = _const_str(parent.slice)
        if key is None:
            return f"reads os.environ with a computed name: {_SCAN_WHY}"
        if not _DETECT_ENV.search(key):
            return None
        if isinstance(parent.ctx, ast.Load):
            return f"os.environ[{key!r}] {_ENV_WHY}"
        return (f"sets os.environ[{key!r}]: changing the gate's, a test runner's or a profiler's variables in the "
                "operator's process can change what the gate or its tools do")
    if isinstance(parent, ast.Compare) and node in parent.comparators:
        key = _const_str(parent.left)
        if key is not None:
            return f"{key!r} in os.environ {_ENV_WHY}" if _DETECT_ENV.search(key) else None
    return f"scans os.environ: {_SCAN_WHY}"


_ENV_KEYED = frozenset({"get", "setdefault", "pop", "__getitem__", "__contains__"})


# ------------------------------------------------ rules 7-9: reaching into the gate's process


class _Receivers:
    """What the receiver of an attribute write is. Class-like: a class or module the operator did
    not create (an import, ``type(x)``, ``x.__class__``, ``sys.modules[...]``, a name or a local
    function's result bound to one): writing its attributes changes that code for everything in
    the process. Made here: ``self``/``cls`` of this file's methods, this file's classes and
    functions, and names bound only to instances of them (or to a ``SimpleNamespace``): honest code
    sets their attributes."""

    def __init__(self, module: _Module) -> None:
        self.imports = module.imports
        nodes = module.nodes
        classes = [n for n in nodes if isinstance(n, ast.ClassDef)]
        self.local_classes = {c.name for c in classes}
        self.local_functions = {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.method_receivers: set[str] = set()
        for cls in classes:
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not any(
                        isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
                    params = [*fn.args.posonlyargs, *fn.args.args]
                    if params:
                        self.method_receivers.add(params[0].arg)
        bound: dict[str, list[ast.AST]] = {}  # name → what it is bound to (iterables for loop targets)
        plain: dict[str, list[ast.AST | None]] = {}  # name → its plain assignments (None: any other binding)
        for node in nodes:
            for name, value, is_plain in _bindings(node):
                if value is not None:
                    bound.setdefault(name, []).append(value)
                plain.setdefault(name, []).append(value if is_plain else None)
        returns: dict[str, list[ast.AST]] = {}  # local function → what it returns
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returns[node.name] = [n.value for n in module.own_nodes(node)
                                      if isinstance(n, ast.Return) and n.value is not None]
        for name, values in bound.items():
            lambdas = [v.body for v in values if isinstance(v, ast.Lambda)]
            if lambdas:
                returns.setdefault(name, []).extend(lambdas)
        self.class_like: set[str] = set()
        self.class_factories: set[str] = set()  # local functions that return a class-like value
        for _ in range(8):  # to a fixed point: a name bound to one bound to a class
            before = (len(self.class_like), len(self.class_factories))
            self.class_like.update(n for n, vs in bound.items() if any(self.is_class_like(v) for v in vs))
            self.class_factories.update(n for n, vs in returns.items() if any(self.is_class_like(v) for v in vs))
            if (len(self.class_like), len(self.class_factories)) == before:
                break
        self.instances = {n for n, vs in plain.items()
                          if vs and all(v is not None and self._made_here(v) for v in vs)} - self.class_like
        self.namespaces = {n: v for n, vs in bound.items() for v in vs if self.namespace_of(v) is not None}

    def is_class_like(self, node: ast.AST) -> bool:
        if any(isinstance(n, ast.Attribute) and n.attr == "__subclasses__" for n in ast.walk(node)):
            return True  # a class picked out of every class the process loaded
        if isinstance(node, ast.Name):
            return node.id in self.class_like or node.id in self.imports.names
        if isinstance(node, ast.Attribute):
            return node.attr in _CLASS_OF or self.is_class_like(node.value)
        if isinstance(node, ast.Subscript):
            return self.imports.canonical(node.value) == "sys.modules" or self.is_class_like(node.value)
        if isinstance(node, ast.Call):
            name = self.imports.canonical(node.func) or ""
            if (name == "type" and len(node.args) == 1) or name in _IMPORT_BY_NAME or name in (
                    "sys.modules.get", "sys.modules.__getitem__", "sys.modules.setdefault"):
                return True
            if name == "getattr" and node.args:
                return self.is_class_like(node.args[0])
            return isinstance(node.func, ast.Name) and node.func.id in self.class_factories
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self.is_class_like(e) for e in node.elts)
        if isinstance(node, ast.IfExp):
            return self.is_class_like(node.body) or self.is_class_like(node.orelse)
        if isinstance(node, ast.BoolOp):
            return any(self.is_class_like(v) for v in node.values)
        if isinstance(node, (ast.NamedExpr, ast.Starred)):
            return self.is_class_like(node.value)
        return False

    def _made_here(self, value: ast.AST) -> bool:
        """A call that makes a plain instance: of this file's class, or a namespace object."""
        if not isinstance(value, ast.Call):
            return False
        if isinstance(value.func, ast.Name) and value.func.id in self.local_classes:
            return True
        return self.imports.canonical(value.func) in _PLAIN_INSTANCES

    def foreign(self, node: ast.AST) -> bool:
        """True unless ``node`` is a plain instance or a class or function this file made."""
        if isinstance(node, ast.Name):
            if node.id in self.class_like:
                return True
            return node.id not in (self.method_receivers | self.local_classes | self.local_functions | self.instances)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id != "super" and not self._made_here(node)
        return True

    def namespace_of(self, node: ast.AST) -> ast.AST | None:
        """The object whose namespace dict ``node`` is (``X.__dict__``, ``vars(X)``, ``__builtins__``,
        a name bound to one); None for anything else."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return node.value
        if isinstance(node, ast.Call) and self.imports.canonical(node.func) == "vars" and len(node.args) == 1:
            return node.args[0]
        if isinstance(node, ast.Name):
            if node.id == "__builtins__":
                return node
            bound = getattr(self, "namespaces", {}).get(node.id)
            return self.namespace_of(bound) if bound is not None else None
        return None


def _bindings(node: ast.AST) -> Iterator[tuple[str, ast.AST | None, bool]]:
    """(name, value, plain) for each name ``node`` binds: ``value`` what it is bound to (for a loop
    target, the iterable), None when unknown; ``plain`` when it is a plain ``name = value``."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _pair(target, node.value)
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        yield from _pair(node.target, node.value)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        for name in _target_names([node.target]):
            yield name, node.iter, False
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        for name in _target_names([node.optional_vars]):
            yield name, None, False
    elif isinstance(node, ast.arg):
        yield node.arg, None, False
    elif isinstance(node, (ast.AugAssign, ast.Delete)):
        for name in _target_names(node.targets if isinstance(node, ast.Delete) else [node.target]):
            yield name, None, False


def _pair(target: ast.AST, value: ast.AST) -> Iterator[tuple[str, ast.AST | None, bool]]:
    if isinstance(target, ast.Name):
        yield target.id, value, True
    elif isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) and not any(
                isinstance(e, ast.Starred) for e in [*target.elts, *value.elts]):
            for sub, part in zip(target.elts, value.elts):
                yield from _pair(sub, part)
        else:
            for name in _target_names([target]):
                yield name, value, False  # a, b = <class-like tuple>: either may be the class


_MAIN_WHY = ("reaches __main__, the gate's operator-process module: through it the operator can read and rewrite "
             "the process's own timer, fetch and checks")
_NATIVE_WHY = ("gives the operator raw memory and foreign calls: it can read or rewrite any object in the process, "
               "the gate's timer, inputs and results included")
_COMPUTED_IMPORT_WHY = ("imports a module whose name is computed: the lint cannot tell which one, and it can be "
                        "__main__ (the gate's operator-process module), ctypes or the gate itself")
_INTERNALS_WHY = ("a function's code, defaults, globals and closure cells let the operator rewrite a function it did "
                  "not write (the gate's timer or fetch) or read the state it keeps")
_FRAME_LINK_WHY = ("walking tracebacks and frames reaches the callers' variables (the gate's timer, inputs and "
                   "expected results), which the operator can read or change")
_OS_UNDER_WHY = ("is the C module under os: the same process, file and fork calls by names the lint and the gate's "
                 "process audit do not follow")
_RUNNER_WHY = ("runs code the lint cannot read (text built or read at run time, a code object, a file loaded by "
               "path, data that names what to call): whatever it does to the gate's process is out of sight")
_SUBCLASSES_WHY = ("lists every class the process has loaded: how code finds the gate's own classes (its timer, "
                   "fetch and checks) to rewrite them without naming their module")
_IMPORT_PATH_WHY = ("changes where `import` looks: a later import then runs a file of the operator's choosing (one no "
                    "lint read and no seal covers), in the gate's process")
_CLASS_WHY = ("replacing an attribute of a class changes every instance in the process, not just this operator's: "
              "the gate's input copies, comparisons and timer included")
_IMPORTED_WHY = ("replacing an attribute of a module or an imported class changes that code for everything in the "
                 "process, the gate's timer, fetch and checks included")
_FRAMES_WHY = ("inspects the call stack or the interpreter's state: the operator can find out who calls it (the "
               "gate's timer or checker) and behave differently there")


def _module_root(name: str) -> str:
    return name.split(".")[0]


def _config_namespace(name: str) -> bool:
    """torch's and Triton's configuration namespaces, which honest operators set (``torch.backends.*``,
    ``*.config.*``, ``triton.knobs.*`` but its hooks)."""
    parts = name.split(".")
    if {"backends", "config"} & set(parts):
        return True
    return "knobs" in parts and "hook" not in parts[-1].lower()


def _import_findings(node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
        names = [node.module]
    else:
        return
    for name in names:
        shown = f"import {name}" if isinstance(node, ast.Import) else f"from {name} import ..."
        if _module_root(name) == "__main__":
            yield node, f"{shown} {_MAIN_WHY}"
        elif _module_root(name) in _NATIVE:
            yield node, f"{shown} {_NATIVE_WHY}"
        elif _module_root(name) in _OS_UNDER:
            yield node, f"{shown} {_OS_UNDER_WHY}"


def _reach_findings(module: _Module, file: str) -> list[Problem]:
    """Rules 7-9: what reaches the gate's own code in the operator's process. 7: ``__main__``,
    ``ctypes`` and imports by a computed name; 8: function internals (``__code__``, closure cells …)
    and frames (``sys._getframe`` as a value, ``tb_frame``, ``f_back`` …); 9: writing attributes of
    classes and modules the operator did not create (``setattr(type(t), ...)``, ``torch.Tensor.x =``,
    ``SomeImported.x =``, ``mod.__dict__[k] =``, ``vars(mod)[k] =``, ``builtins.x =``), where
    writing those of its own instances and classes is honest."""
    imports, parents = module.imports, module.parents
    receivers = _Receivers(module)
    problems: list[Problem] = []

    def add(node: ast.AST, message: str) -> None:
        problems.append(Problem(file, message, getattr(node, "lineno", None), "warning"))

    assigned_params = _assigned_params(module, receivers)
    for node in module.nodes:
        for where, why in _import_findings(node):
            add(where, why)
        outer = parents.get(id(node))
        if isinstance(node, ast.Attribute) and not (  # a chain is one finding, at its last link
                isinstance(outer, ast.Attribute) and outer.attr in _FUNCTION_INTERNALS | _FRAME_LINKS):
            verb = "assigns" if isinstance(node.ctx, ast.Store) else "deletes" if isinstance(node.ctx, ast.Del) else "reads"
            if node.attr in _FUNCTION_INTERNALS:
                add(node, f"{verb} {_short(node)}: {_INTERNALS_WHY}")
            elif node.attr == "__subclasses__":
                add(node, f"reads {_short(node)}: it {_SUBCLASSES_WHY}")
            elif node.attr in _FRAME_LINKS:
                add(node, f"follows {_short(node)}: {_FRAME_LINK_WHY}")
        if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
            name = imports.canonical(node) or ""
            called = isinstance(outer, ast.Call) and outer.func is node
            if name in _FRAMES and not called:
                add(node, f"takes {name} as a value: it {_FRAMES_WHY}")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            verb = "deletes" if isinstance(node, ast.Delete) else "assigns"
            for target in _flat_targets(targets):
                message = _write_message(target, verb, receivers)
                if message is not None:
                    add(target, message)
        elif isinstance(node, ast.Call):
            for why in _call_reach(node, receivers, assigned_params):
                add(node, why)
    return problems


def _write_message(target: ast.AST, verb: str, receivers: _Receivers) -> str | None:
    """The finding for one assignment (or del) target, or None for an honest one."""
    imports = receivers.imports
    written = imports.canonical(target.value if isinstance(target, ast.Subscript) else target) or ""
    if written in _IMPORT_PATH:
        return f"{verb} {_short(target)}: {_IMPORT_PATH_WHY}"
    if isinstance(target, ast.Attribute):
        name = imports.canonical(target)
        if name is not None:
            if _patched_module(name) is not None or _config_namespace(name):
                return None  # the guarded modules have their own finding (rule 5); config is honest
            return f"{verb} {_short(target)}, an attribute of the imported {_module_root(name)}: {_IMPORTED_WHY}"
        if receivers.is_class_like(target.value):
            return f"{verb} {_short(target)}, an attribute of a class or module this file did not define: {_CLASS_WHY}"
        if target.attr == "__class__":
            return (f"{verb} {_short(target)}: changing an object's class swaps its methods (an input tensor's copy or "
                    "comparison, say) for code the gate does not expect")
    elif isinstance(target, ast.Subscript):
        owner = receivers.namespace_of(target.value)
        if owner is not None and receivers.foreign(owner):
            return (f"{'writes' if verb == 'assigns' else 'deletes'} {_short(target)}, in the namespace of "
                    f"{_short(owner)}: {_IMPORTED_WHY}")
    return None


_SETATTRS = frozenset({"setattr", "delattr", "object.__setattr__", "object.__delattr__", "type.__setattr__",
                       "type.__delattr__"})


def _call_reach(call: ast.Call, receivers: _Receivers, assigned_params: dict[str, dict[int, str]]) -> Iterator[str]:
    imports = receivers.imports
    func = call.func
    name = imports.canonical(func) or _getattr_name(func, imports) or ""
    shown = _short(func)
    if name in _CODE_RUNNERS or (isinstance(func, ast.Attribute) and func.attr in ("load_module", "exec_module")
                                 and not name):
        yield f"{shown}(...) {_RUNNER_WHY}"
    if isinstance(func, ast.Attribute) and (imports.canonical(func.value) or "") in _IMPORT_PATH \
            and func.attr in (*_DICT_WRITES, "insert", "append", "extend", "remove"):
        yield f"{shown}(...) {_IMPORT_PATH_WHY}"
    if name in _IMPORT_BY_NAME and call.args:
        module_name = _const_str(call.args[0])
        if module_name is None:
            yield f"{shown}({_short(call.args[0])}) {_COMPUTED_IMPORT_WHY}"
        elif _module_root(module_name) == "__main__":
            yield f"{shown}({module_name!r}) {_MAIN_WHY}"
        elif _module_root(module_name) in _NATIVE:
            yield f"{shown}({module_name!r}) {_NATIVE_WHY}"
    if name in ("getattr", "setattr", "delattr", "hasattr") and len(call.args) >= 2:
        attr = _const_str(call.args[1]) or ""
        if attr in _FUNCTION_INTERNALS:
            yield f"{shown}({_short(call.args[0])}, {attr!r}, ...): {_INTERNALS_WHY}"
        elif attr in _FRAME_LINKS:
            yield f"{shown}({_short(call.args[0])}, {attr!r}) follows a frame link: {_FRAME_LINK_WHY}"
        resolved = _getattr_name(call, imports)
        if resolved in _FRAMES:
            yield f"{shown}({_short(call.args[0])}, {attr!r}) takes {resolved}: it {_FRAMES_WHY}"
    target: ast.AST | None = None
    if name in _SETATTRS and call.args:
        target = call.args[0]
    elif isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__") and not name:
        target = func.value  # X.__setattr__("clone", f)
    if target is not None and _patched_module(imports.canonical(target)) is None and receivers.foreign(target):
        what = "a class or module this file did not define" if receivers.is_class_like(target) else \
            "not an instance or class this file creates"
        yield (f"{shown}({_short(target)}, ...) sets an attribute on {_short(target)}, {what}: on a class "
               "(torch.Tensor, type(obj), an imported class) or a module it replaces code for everything in the "
               "process, the gate's input copies, checks and timer included")
    if isinstance(func, ast.Attribute) and func.attr in _DICT_WRITES:
        owner = receivers.namespace_of(func.value)
        if owner is not None and receivers.foreign(owner):
            yield f"{shown}(...) writes the namespace of {_short(owner)}: {_IMPORTED_WHY}"
    if isinstance(func, ast.Name) and func.id in assigned_params:
        for index, param in assigned_params[func.id].items():
            if index < len(call.args) and receivers.is_class_like(call.args[index]):
                yield (f"passes {_short(call.args[index])}, a class or module, to {func.id}(), which assigns "
                       f"attributes of its parameter {param}: {_CLASS_WHY}")


def _getattr_name(node: ast.AST, imports: _Imports) -> str | None:
    """``getattr(gc, "get_objects")`` → "gc.get_objects" (the dotted name it reaches); None otherwise."""
    if not (isinstance(node, ast.Call) and imports.canonical(node.func) == "getattr" and len(node.args) >= 2):
        return None
    base, attr = imports.canonical(node.args[0]), _const_str(node.args[1])
    return f"{base}.{attr}" if base and attr else None


def _assigned_params(module: _Module, receivers: _Receivers) -> dict[str, dict[int, str]]:
    """This file's plain functions that assign attributes of a positional parameter (``def
    patch(t): t.clone = f``): function → {position: parameter}. Handing such a function a class
    patches the class."""
    found: dict[str, dict[int, str]] = {}
    for fn in module.defs:
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        written: set[str] = set()
        for node in module.own_nodes(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for target in _flat_targets(node.targets if isinstance(node, ast.Assign) else [node.target]):
                    parts = _dotted(target) if isinstance(target, ast.Attribute) else None
                    if parts:
                        written.add(parts[0])
        hits = {i: p for i, p in enumerate(params) if p in written and p not in receivers.method_receivers}
        if hits:
            found[fn.name] = hits
    return found


# ----------------------------------------------------------------------------- entry point


def findings_for_tree(tree: ast.Module, file: str, *, launches: list[ast.Call] | None = None) -> list[Problem]:
    """Every anti-cheat finding of one parsed operator, sorted by line (``launches``: the
    module's ``triton_launches``, when the caller has them already)."""
    module = _Module(tree, launches)
    problems = [
        *_torch_result(module, file),
        *_fallbacks(module, file),
        *_call_findings(module, file),
        *_reference_findings(module, file),
        *_reach_findings(module, file),
    ]
    unique = {(p.line, p.message): p for p in problems}
    return sorted(unique.values(), key=lambda p: (p.line or 0, p.message))


# ------------------------------------------------------------- the round's other Python files


#: Modules a sibling file must not be named after: the operator process's folder is its first import
#: path, so ``torch.py`` or ``random.py`` there is what the gate's own ``import`` gets.
_SHADOWED = frozenset({
    *(set(getattr(sys, "stdlib_module_names", ())) - {"test", "this", "antigravity"}),
    "torch", "triton", "numpy", "torch_npu", "helix_engine", "helix_tui", "sitecustomize", "usercustomize",
    "typing_extensions", "packaging", "filelock", "sympy", "jinja2", "fsspec", "networkx", "setuptools",
    "pkg_resources", "ray", "pydantic",
})


def sibling_findings(operator: Path, shown_dir: str) -> list[Problem]:
    """The anti-cheat findings of every file ``workspace.siblings.sibling_files`` names, each as ``shown_dir/name``
    (a cheat keeps the operator clean and puts ``import helper`` in it, the patching in
    ``helper.py``), in name and line order; plus a sibling named after a module the process
    imports. A file that does not parse gives none: Python cannot import it either."""
    problems: list[Problem] = []
    for path in sibling_files(operator):
        shown = f"{shown_dir}/{path.name}"
        if path.stem in _SHADOWED:
            problems.append(Problem(
                shown, f"is named after the module {path.stem}: the gate's operator process imports from the round's "
                "folder first, so its own `import " + path.stem + "` (or torch's) runs this file instead", 1,
                "warning"))
        try:
            data = path.read_bytes()
        except OSError as exc:
            problems.append(Problem(shown, f"cannot be read for the anti-cheat lint ({exc.strerror or exc}), yet the "
                                    "gate's operator process receives it beside the operator and can import it",
                                    None, "warning"))
            continue
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)  # as import decodes it
            tree = python_source.parse(data.decode(encoding), shown)
        except (SyntaxError, ValueError, LookupError, UnicodeDecodeError):
            continue
        problems.extend(findings_for_tree(tree, shown))
    return problems
