"""Accuracy comparison of test outputs: the NPU accuracy contract and dtype-close mode.

Runs in the child (it needs torch). ``compare_payloads`` compares two differential result
archives; ``compare_case_result`` is what standalone tests call (re-exported as the upstream
``npu_compare`` module). Thresholds and NaN/Inf rules follow spec/upstream-eval.md §2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

ACCURACY_MODES: tuple[str, ...] = ("npu-contract", "dtype-close")
MIN_MATCH_RATIO = 0.9

#: golden dtype → (small_thr, small_err, rel, atol, rtol)
NPU_THRESHOLDS: dict[str, tuple[float, float, float, float, float]] = {
    "float16": (2**-11, 2**-16, 2**-10, 9e-2, 2**-10),
    "bfloat16": (2**-8, 2**-16, 2**-7, 1e-1, 2**-7),
    "float32": (2**-14, 2**-30, 2**-13, 1e-3, 2**-13),
    "hifloat32": (2**-12, 2**-28, 2**-11, 1e-3, 2**-13),
    "float8_e4m3": (2**-4, 2**-6, 2**-3, 1e-3, 2**-13),
    "float8_e5m2": (2**-3, 2**-5, 2**-2, 1e-3, 2**-13),
}
#: golden dtype → (rtol, atol) for dtype-close
CLOSE_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-5, 1e-8),
    "complex128": (1e-5, 1e-8),
    "float32": (1e-4, 1e-5),
    "hifloat32": (1e-4, 1e-5),
    "complex64": (1e-4, 1e-5),
    "float16": (5e-4, 5e-5),
    "bfloat16": (1e-3, 1e-4),
    "float8": (1e-2, 1e-3),
}
_FLOAT_PRIORITY = ("complex128", "complex64", "float64", "float32", "hifloat32", "bfloat16", "float16")


@dataclass
class CaseCompareResult:
    passed: bool
    case_id: str
    compute: bool
    input_type: str
    input_dtype: str | None
    output_dtype: str | None
    comparison_path: str | None
    message: str
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ArtifactCompareResult:
    passed: bool
    failed_case_count: int
    case_results: list[CaseCompareResult]
    message: str
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failed_case_count": self.failed_case_count,
            "case_results": [c.to_json() for c in self.case_results],
            "message": self.message,
            "diagnostics": self.diagnostics,
        }


class _LeafFailure(Exception):
    def __init__(self, stage: str, detail: str, **diag: Any) -> None:
        super().__init__(detail)
        self.stage = stage
        self.detail = detail
        self.diag = diag


def accuracy_mode_from_env(mode: str | None = None) -> str:
    chosen = (mode or os.environ.get("HELIX_RUN_TEST_ACCURACY_MODE") or "npu-contract").strip()
    if chosen not in ACCURACY_MODES:
        raise ValueError(f"unknown accuracy mode {chosen!r}; use npu-contract or dtype-close")
    return chosen


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def npu_thresholds(dtype: Any) -> dict[str, float]:
    name = dtype_name(dtype)
    key = next((k for k in NPU_THRESHOLDS if name.startswith(k)), "float32")
    if "hifloat32" in name:
        key = "hifloat32"
    small_thr, small_err, rel, atol, rtol = NPU_THRESHOLDS[key]
    return {"small_thr": small_thr, "small_err": small_err, "rel": rel, "atol": atol, "rtol": rtol}


def close_tolerances(dtype: Any) -> dict[str, float]:
    name = dtype_name(dtype)
    key = "float8" if name.startswith("float8") else name
    rtol, atol = CLOSE_TOLERANCES.get(key, (1e-4, 1e-5))
    if os.environ.get("HELIX_RUN_TEST_RTOL"):
        rtol = float(os.environ["HELIX_RUN_TEST_RTOL"])
    if os.environ.get("HELIX_RUN_TEST_ATOL"):
        atol = float(os.environ["HELIX_RUN_TEST_ATOL"])
    return {"rtol": rtol, "atol": atol}


# ----------------------------------------------------------------------------- tree walking


def _as_tensor(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (bool, int, float, complex)):
        return torch.tensor(value)
    return None


def _leaves(actual: Any, golden: Any, path: str) -> list[tuple[str, Any, Any]]:
    """Pairs of leaves; structure mismatches raise _LeafFailure."""
    if isinstance(golden, Mapping):
        if not isinstance(actual, Mapping) or set(actual) != set(golden):
            raise _LeafFailure("structure", f"{path}: keys differ (expected {sorted(map(str, golden))})")
        out: list[tuple[str, Any, Any]] = []
        for key in golden:
            out += _leaves(actual[key], golden[key], f"{path}[{key!r}]")
        return out
    if isinstance(golden, Sequence) and not isinstance(golden, (str, bytes)):
        if not isinstance(actual, Sequence) or isinstance(actual, (str, bytes)) or len(actual) != len(golden):
            raise _LeafFailure("structure", f"{path}: sequence length differs (expected {len(golden)})")
        out = []
        for i, (a, g) in enumerate(zip(actual, golden, strict=True)):
            out += _leaves(a, g, f"{path}[{i}]")
        return out
    if golden is None or actual is None:
        if golden is None and actual is None:
            return []
        raise _LeafFailure("structure", f"{path}: one side is None")
    g, a = _as_tensor(golden), _as_tensor(actual)
    if g is None or a is None:
        raise _LeafFailure("structure", f"{path}: leaves must be tensors or numbers, got {type(golden).__name__}")
    if a.device == g.device and a.device.type == "cuda":  # compared where they are (the gate's paired bench)
        return [(path, a, g)]
    return [(path, a.cpu(), g.cpu())]


def input_summary(inputs: Any) -> tuple[str, str | None]:
    """(input_type, input_dtype): float|int|no_tensor and the highest-priority dtype."""
    import torch

    dtypes: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            dtypes.append(x.dtype)
        elif isinstance(x, Mapping):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(inputs)
    if not dtypes:
        return "no_tensor", None
    floats = [d for d in dtypes if d.is_floating_point or d.is_complex]
    if floats:
        names = [dtype_name(d) for d in floats]
        best = min(names, key=lambda n: _FLOAT_PRIORITY.index(n) if n in _FLOAT_PRIORITY else len(_FLOAT_PRIORITY))
        return "float", best
    ints = sorted(dtypes, key=lambda d: torch.iinfo(d).bits if d != torch.bool else 0, reverse=True)
    return "int", dtype_name(ints[0])


def comparison_path(compute: bool, out_dtype: Any, input_type: str) -> str:
    import torch

    if not compute:
        return "non-compute"
    if out_dtype == torch.bool:
        return "bool-output"
    if not (out_dtype.is_floating_point or out_dtype.is_complex):
        return "quantized-fp-to-int" if input_type == "float" else "integer-compute"
    return "floating-point-compute"


# ------------------------------------------------------------------------------ leaf checks


def _check_nan_inf(a: Any, g: Any) -> None:
    import torch

    if not (g.is_floating_point() or g.is_complex()):
        return
    a = a.to(g.dtype) if a.dtype != g.dtype else a
    if not torch.equal(torch.isnan(a), torch.isnan(g)):
        raise _LeafFailure("nan_position", "NaN positions differ")
    if not torch.equal(torch.isinf(a), torch.isinf(g)):
        raise _LeafFailure("inf_position", "Inf positions differ")
    if not g.is_complex():
        inf = torch.isinf(g)
        if inf.any() and not torch.equal(torch.sign(a[inf]), torch.sign(g[inf])):
            raise _LeafFailure("inf_sign", "Inf signs differ")


def _float_metrics(a: Any, g: Any, th: dict[str, float]) -> dict[str, Any]:
    import torch

    a = a.to(g.dtype)
    finite = torch.isfinite(g) & torch.isfinite(a)
    if g.is_complex():
        af, gf = a[finite].to(torch.complex64), g[finite].to(torch.complex64)
    else:
        af, gf = a[finite].to(torch.float32), g[finite].to(torch.float32)
    if gf.numel() == 0:
        return {"max_abs_diff": 0.0, "matched_ratio": 1.0, "mere": 0.0, "cap_violations": 0}
    diff = (af - gf).abs().to(torch.float32)
    mag = gf.abs().to(torch.float32)
    cap_bad = diff > th["atol"] + th["rtol"] * mag
    rel_err = diff / (mag + 1e-7)
    small = mag < th["small_thr"]
    ok = torch.where(small, diff <= th["small_err"], rel_err <= th["rel"])
    return {
        "max_abs_diff": float(diff.max()),
        "matched_ratio": int(ok.sum()) / ok.numel(),  # exact: 9/10 must equal 0.9
        "mere": float(rel_err.to(torch.float64).mean()),
        "cap_violations": int(cap_bad.sum()),
    }


def check_leaf_npu(a: Any, g: Any, path_kind: str) -> dict[str, Any]:
    """Raise _LeafFailure when the leaf breaks the NPU contract; else return its metrics."""
    import torch

    if path_kind == "non-compute":
        if a.shape != g.shape or a.dtype != g.dtype:
            raise _LeafFailure("shape_dtype", f"shape/dtype {tuple(a.shape)} {dtype_name(a.dtype)} != expected "
                                              f"{tuple(g.shape)} {dtype_name(g.dtype)}")
        if a.contiguous().view(torch.uint8).numel() and not torch.equal(
            a.contiguous().view(torch.uint8), g.contiguous().view(torch.uint8)
        ):
            raise _LeafFailure("bytes", "raw bytes differ")
        return {}
    if a.shape != g.shape:
        raise _LeafFailure("shape", f"shape {tuple(a.shape)} != expected {tuple(g.shape)}")
    _check_nan_inf(a, g)
    if path_kind == "bool-output":
        if not torch.equal(a.to(torch.bool), g):
            raise _LeafFailure("exact", "bool outputs differ", mismatches=int((a.to(torch.bool) != g).sum()))
        return {}
    if path_kind in ("integer-compute", "quantized-fp-to-int"):
        limit = 0 if path_kind == "integer-compute" else 1
        diff = (a.to(torch.int64) - g.to(torch.int64)).abs()
        mad = int(diff.max()) if diff.numel() else 0
        if mad > limit:
            raise _LeafFailure("max_abs", f"max abs diff {mad} > {limit}", max_abs_diff=mad)
        return {"max_abs_diff": mad}
    th = npu_thresholds(g.dtype)
    m = _float_metrics(a, g, th)
    if m["cap_violations"]:
        raise _LeafFailure("cap", f"{m['cap_violations']} element(s) exceed |a-g| <= atol + rtol*|g|", **m)
    if m["matched_ratio"] < MIN_MATCH_RATIO:
        raise _LeafFailure("match_ratio", f"matched ratio {m['matched_ratio']:.4f} < {MIN_MATCH_RATIO}", **m)
    if not m["mere"] < th["rel"]:
        raise _LeafFailure("mere", f"MERE {m['mere']:.3e} >= {th['rel']:.3e}", **m)
    return m


def check_leaf_close(a: Any, g: Any, path_kind: str) -> dict[str, Any]:
    import torch

    if a.dtype != g.dtype:
        raise _LeafFailure("dtype", f"dtype {dtype_name(a.dtype)} != expected {dtype_name(g.dtype)}")
    if a.shape != g.shape:
        raise _LeafFailure("shape", f"shape {tuple(a.shape)} != expected {tuple(g.shape)}")
    if path_kind == "non-compute" or not (g.is_floating_point() or g.is_complex()):
        if not torch.equal(a, g):
            raise _LeafFailure("exact", "outputs differ (exact match required)")
        return {}
    tol = close_tolerances(g.dtype)
    try:
        torch.testing.assert_close(a, g, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
    except AssertionError as exc:
        first = str(exc).strip().splitlines()
        raise _LeafFailure("assert_close", " ".join(first[:3])) from None
    return {}


# ---------------------------------------------------------------------------- entry points


def compare_outputs(case_id: str, actual: Any, golden: Any, inputs: Any = (), compute: bool = True,
                    accuracy_mode: str | None = None) -> CaseCompareResult:
    """Compare one case's outputs (any nesting of tensors/numbers) under the chosen mode."""
    mode = accuracy_mode_from_env(accuracy_mode)
    input_type, input_dtype = input_summary(inputs)
    diag: dict[str, Any] = {"accuracy_mode": mode}
    out_dtype: str | None = None
    path_kind: str | None = None
    try:
        for leaf_path, a, g in _leaves(actual, golden, "output"):
            out_dtype = dtype_name(g.dtype)
            path_kind = comparison_path(compute, g.dtype, input_type)
            diag.update(output_path=leaf_path, comparison_path=path_kind)
            if path_kind == "floating-point-compute":
                diag["thresholds"] = npu_thresholds(g.dtype) if mode == "npu-contract" else close_tolerances(g.dtype)
            checker = check_leaf_npu if mode == "npu-contract" else check_leaf_close
            diag.update(checker(a, g, path_kind))
    except _LeafFailure as fail:
        diag.update(fail.diag)
        diag["failure_stage"] = fail.stage
        where = diag.get("output_path", "output")
        msg = f"case {case_id} failed ({path_kind or 'structure'}) at {where}: {fail.detail}"
        return CaseCompareResult(False, case_id, compute, input_type, input_dtype, out_dtype, path_kind, msg, diag)
    msg = f"case {case_id} passed"
    return CaseCompareResult(True, case_id, compute, input_type, input_dtype, out_dtype, path_kind, msg, diag)


def compare_case_result(case_id: str, actual: Any, golden: Any, inputs: Any = (), compute: bool = True) -> CaseCompareResult:
    """Upstream ``npu_compare.compare_case_result`` (standalone tests raise on ``not passed``)."""
    return compare_outputs(case_id, actual, golden, inputs, compute)


def _payload_error(message: str) -> ArtifactCompareResult:
    return ArtifactCompareResult(False, 0, [], message, {"failure_stage": "payload"})


def pass_line(n: int, mode: str, backend: str | None) -> str:
    """Upstream's PASS line on an NPU (and where the backend is not known, e.g. the upstream
    ``npu_compare`` shim); on cuda and cpu no NPU was involved, so the line names the mode used."""
    if backend in (None, "npu"):
        return f"PASS: all {n} case(s) matched the NPU accuracy contract."
    return f"PASS: all {n} case(s) matched accuracy mode {mode} (checked on {backend})."


def compare_payloads(reference: Any, candidate: Any, accuracy_mode: str | None = None,
                     backend: str | None = None) -> ArtifactCompareResult:
    """Compare two differential archives ``{"compute", "cases": [{"id","inputs","result"}]}``;
    ``backend`` (npu | cuda | cpu) words the PASS line."""
    for label, payload in (("reference", reference), ("candidate", candidate)):
        if not isinstance(payload, Mapping) or "cases" not in payload:
            if isinstance(payload, Mapping) and "results" in payload:
                return _payload_error(f"the {label} archive uses the legacy {{'results': ...}} form; re-run the test "
                                      "to regenerate it")
            return _payload_error(f"the {label} archive is not a dict with a 'cases' list")
        if not isinstance(payload["cases"], list):
            return _payload_error(f"the {label} archive's 'cases' is not a list")
    ref_cases, cand_cases = reference["cases"], candidate["cases"]
    if len(ref_cases) != len(cand_cases):
        return _payload_error(f"case counts differ: reference has {len(ref_cases)}, candidate has {len(cand_cases)}")
    compute = bool(reference.get("compute", True))
    if compute != bool(candidate.get("compute", True)):
        return _payload_error("the compute flags of reference and candidate differ")
    results: list[CaseCompareResult] = []
    for i, (ref, cand) in enumerate(zip(ref_cases, cand_cases, strict=True)):
        if ref.get("id") != cand.get("id"):
            return _payload_error(f"case #{i}: ids differ (reference {ref.get('id')!r}, candidate {cand.get('id')!r})")
        results.append(compare_outputs(str(ref.get("id")), cand.get("result"), ref.get("result"),
                                       ref.get("inputs", ()), compute, accuracy_mode))
    failed = [r for r in results if not r.passed]
    n = len(results)
    mode = accuracy_mode_from_env(accuracy_mode)
    if failed:
        message = f"FAIL: {len(failed)} of {n} case(s) failed. First failure: {failed[0].message}"
    else:
        message = pass_line(n, mode, backend)
    return ArtifactCompareResult(not failed, len(failed), results, message, {"accuracy_mode": mode})
