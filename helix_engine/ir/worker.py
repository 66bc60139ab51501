"""Child process of an IR capture job: ``python -m helix_engine.ir.worker REQUEST.json``.

Modes (``request["mode"]``):
- ``run-once`` (npu): run the case once; the parent reads Triton-Ascend's TRITON_DEBUG lines
  from the job output.
- ``cuda``: run the case once with TRITON_ALWAYS_COMPILE=1, then write every compiled kernel's
  stages (``kernel.asm``: ttir, ttgir, llir, ptx, cubin) and metadata (n_regs, n_spills,
  shared, num_warps, num_stages) from the JIT's caches.
- ``record`` (cpu, under TRITON_INTERPRET=1): run the case once and record each kernel
  launch's argument types, constexpr values and launch options.
- ``compile`` (cpu, interpreter OFF): compile the recorded launches for sm_90 with Triton's
  own NVIDIA backend (which ships ptxas), no GPU needed; same outputs as ``cuda``. It must be a
  second process (target sm_90, or HELIX_IR_CUDA_ARCH): in interpreter mode even triton.language's own helpers are interpreted
  functions the compiler cannot lower.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from helix_engine.eval.childlib import child_main, load_case, setup_backend

TEXT_STAGES = ("source", "ttir", "ttgir", "llir", "ptx", "amdgcn")
META_KEYS = ("name", "num_warps", "num_stages", "num_ctas", "shared", "arch", "backend_name", "triton_version",
             "enable_fp_fusion", "maxnreg", "hash")
#: Target of the no-GPU compile; HELIX_IR_CUDA_ARCH (e.g. 80, 90, 100) picks another.
ARCH_ENV = "HELIX_IR_CUDA_ARCH"


def nogpu_target() -> tuple[str, int, int]:
    import os

    raw = os.environ.get(ARCH_ENV, "90").strip()
    return ("cuda", int(raw) if raw.isdigit() else 90, 32)


def _jit_of(obj: Any) -> Any:
    """The JITFunction behind an Autotuner/Heuristics wrapper chain (or None)."""
    from triton.runtime.jit import JITFunction

    for _ in range(8):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def cuobjdump_usage(cubin: Path) -> dict[str, int]:
    """REG/SHARED/LOCAL from ``cuobjdump -res-usage`` (the binary ships with Triton)."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.is_file():
        return {}
    try:
        out = subprocess.run([str(tool), "-res-usage", str(cubin)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {k.lower(): int(v) for k, v in re.findall(r"\b(REG|SHARED|LOCAL|STACK):(\d+)", out)}
    usage: dict[str, int] = {}
    if "reg" in found:
        usage["n_regs"] = found["reg"]
    if "local" in found:
        usage["local_bytes"] = found["local"]
    return usage


def write_kernel(ir_dir: Path, folder: str, compiled: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """Write one compiled kernel's stages + metadata.json; return its manifest entry."""
    out = ir_dir / folder
    out.mkdir(parents=True, exist_ok=True)
    name = compiled.metadata.name
    stages = []
    for stage, text in compiled.asm.items():
        if stage in TEXT_STAGES and isinstance(text, str):
            (out / f"{name}.{stage}").write_text(text, encoding="utf-8")
            stages.append(stage)
        elif stage == "cubin" and isinstance(text, bytes):
            (out / f"{name}.cubin").write_bytes(text)
    meta = {k: getattr(compiled.metadata, k, None) for k in META_KEYS}
    meta["arch"] = str(meta["arch"]) if meta["arch"] is not None else None
    for attr in ("n_regs", "n_spills"):
        value = getattr(compiled, attr, None)
        if isinstance(value, int):
            meta[attr] = value
    if meta.get("n_regs") is None and (out / f"{name}.cubin").is_file():
        meta.update(cuobjdump_usage(out / f"{name}.cubin"))
    meta.update(extra)
    (out / "metadata.json").write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
    return {"name": name, "folder": folder, "stages": stages, "metadata": meta}


def _folder(name: str, taken: set[str]) -> str:
    folder, i = name, 1
    while folder in taken:
        i += 1
        folder = f"{name}__v{i}"
    taken.add(folder)
    return folder


def capture_cuda(harness: Any, ir_dir: Path) -> list[dict[str, Any]]:
    kernels: list[dict[str, Any]] = []
    taken: set[str] = set()
    wanted = set(harness.kernel_names)
    seen: set[int] = set()
    for attr, obj in sorted(vars(harness.operator_module).items()):
        jf = _jit_of(obj)
        if jf is None or id(jf) in seen or (wanted and attr not in wanted and jf.__name__ not in wanted):
            continue
        seen.add(id(jf))
        for cache in list(jf.device_caches.values()):
            for compiled in list(cache[0].values()):
                if hasattr(compiled, "_init_handles"):
                    try:
                        compiled._init_handles()  # noqa: SLF001 - fills n_regs / n_spills
                    except Exception:  # noqa: BLE001 - metadata only
                        pass
                kernels.append(write_kernel(ir_dir, _folder(compiled.metadata.name, taken), compiled, {}))
    return kernels


# ------------------------------------------------------------------- cpu: record, then compile


def describe_arg(value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, bool):
        return {"kind": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "int", "value": value}
    if isinstance(value, float):
        return {"kind": "float", "value": value}
    if value is None:
        return {"kind": "none"}
    inner = getattr(value, "value", value)  # tl.constexpr
    if isinstance(inner, (bool, int, float, str)):
        return describe_arg(inner) if not isinstance(inner, str) else {"kind": "str", "value": inner}
    return {"kind": "other", "repr": repr(value)[:200]}


def record_launches(fn: Any) -> list[dict[str, Any]]:
    """Run ``fn`` under the interpreter and keep the first launch of each kernel."""
    from triton.runtime.interpreter import InterpretedFunction

    launches: dict[str, dict[str, Any]] = {}
    original = InterpretedFunction.run

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        name = self.fn.__name__
        if name not in launches:
            named = dict(zip(self.arg_names, args))
            named.update({k: v for k, v in kwargs.items() if k in self.arg_names})
            options = {k: v for k, v in kwargs.items() if k not in self.arg_names and isinstance(v, (int, bool))}
            launches[name] = {"name": name, "module": self.fn.__module__,
                              "args": {k: describe_arg(v) for k, v in named.items()}, "options": options}
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = run
    try:
        fn()
    finally:
        InterpretedFunction.run = original
    return list(launches.values())


_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8", "int16": "i16",
           "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1", "float8_e4m3fn": "fp8e4nv",
           "float8_e5m2": "fp8e5"}


def signature_for(jf: Any, launch: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any], dict[tuple[int, ...], Any]]:
    """Signature, constexprs and attrs as the CUDA JIT would specialize this launch: tensors are
    16-byte aligned pointers (CUDA allocations are), ints divisible by 16 get tt.divisibility,
    an int equal to 1 and None become constexprs."""
    sig: dict[str, str] = {}
    consts: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], Any] = {}
    for p in jf.params:
        desc = launch["args"].get(p.name)
        if desc is None:
            default = p.default if p.has_default else None
            desc = describe_arg(default)
        kind = desc["kind"]
        if p.is_constexpr or kind in ("none", "str"):
            sig[p.name] = "constexpr"
            consts[p.name] = desc.get("value")
        elif kind == "tensor":
            if desc["dtype"] not in _DTYPES:
                raise ValueError(f"argument {p.name}: tensor dtype {desc['dtype']} has no Triton pointer type")
            sig[p.name] = "*" + _DTYPES[desc["dtype"]]
            attrs[(p.num,)] = [["tt.divisibility", 16]]
        elif kind == "bool":
            sig[p.name] = "i1"
        elif kind == "int":
            value = desc["value"]
            if value == 1 and not p.do_not_specialize:
                sig[p.name] = "constexpr"
                consts[p.name] = 1
                continue
            sig[p.name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            if value % 16 == 0 and not p.do_not_specialize:
                attrs[(p.num,)] = [["tt.divisibility", 16]]
        elif kind == "float":
            sig[p.name] = "fp32"
        else:
            raise ValueError(f"argument {p.name}: cannot type {desc.get('repr', kind)} for compilation")
    return sig, consts, attrs


def compile_recorded(operator_module: Any, launches: list[dict[str, Any]], ir_dir: Path) -> list[dict[str, Any]]:
    import triton
    from triton.backends.compiler import GPUTarget

    kernels: list[dict[str, Any]] = []
    taken: set[str] = set()
    for launch in launches:
        jf = _jit_of(getattr(operator_module, launch["name"], None))
        if jf is None:
            kernels.append({"name": launch["name"], "stages": [], "error": "not a module-level @triton.jit function"})
            continue
        try:
            sig, consts, attrs = signature_for(jf, launch)
            src = triton.compiler.ASTSource(jf, sig, consts, attrs)
            compiled = triton.compile(src, target=GPUTarget(*nogpu_target()), options=dict(launch["options"]))
        except Exception as exc:  # noqa: BLE001 - user kernels: report per kernel
            kernels.append({"name": launch["name"], "stages": [], "error": f"{type(exc).__name__}: {exc}"[:2000]})
            continue
        kernels.append(write_kernel(ir_dir, _folder(launch["name"], taken), compiled,
                                    {"signature": sig, "constexprs": {k: repr(v) for k, v in consts.items()}}))
    return kernels


def run(request: dict[str, Any]) -> dict[str, Any]:
    mode = request["mode"]
    ir_dir = Path(request["ir_dir"])
    if mode == "compile":
        from helix_engine.eval.loader import import_file

        launches = json.loads(Path(request["launches_file"]).read_text(encoding="utf-8"))
        module = import_file(Path(request["operator_file"]))
        return {"return_code": 0, "kernels": compile_recorded(module, launches, ir_dir)}
    backend = setup_backend(request)
    harness, case, fn = load_case(request)
    if mode == "record":
        launches = record_launches(fn)
        Path(request["launches_file"]).write_text(json.dumps(launches, indent=2) + "\n", encoding="utf-8")
        return {"return_code": 0, "launches": len(launches), "case_id": case.id}
    fn()
    backend.synchronize()
    if mode == "cuda":
        return {"return_code": 0, "kernels": capture_cuda(harness, ir_dir), "case_id": case.id}
    return {"return_code": 0, "case_id": case.id}  # run-once


def _failed(request: dict[str, Any], error: str) -> dict[str, Any]:
    return {"return_code": 1, "error": error}


def main(argv: list[str] | None = None) -> int:
    return child_main(argv, "python -m helix_engine.ir.worker REQUEST.json", run, _failed)


if __name__ == "__main__":
    sys.exit(main())
