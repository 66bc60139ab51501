"""The shipped examples' rounds, measured: does round 1 beat the baseline and round 2 regress?

For every example in examples/ (baseline operator, candidates/round-1.py, candidates/round-2.py)
this checks each variant against a PyTorch reference on the differential-test inputs, then
times every bench case of every variant and reports two figures per example:

- round-1 geomean speedup over the baseline (> 1 expected),
- round-2 geomean speedup over round 1 (< 1 expected: the regression the demo records).

On a GPU the timer is ``triton.testing.do_bench`` (median, L2 flushed); without one it is the
CPU interpreter (TRITON_INTERPRET=1) timed by ``time.perf_counter`` (median of a few calls), on
the harness's tiny CPU shapes. The measurement runs in a child process so TRITON_INTERPRET is
set before triton is imported. ``python3 benchmarks/bench_examples.py`` prints the rows.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
REFERENCES = {
    "softmax": lambda x: __import__("torch").softmax(x.float(), -1).to(x.dtype),
    "layernorm": None,  # checked through mean/rstd below
    "matmul": lambda a, b: (a.float() @ b.float()).to(a.dtype),
}


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(op: str, inputs: tuple) -> Any:
    import torch

    if op == "layernorm":
        x, w, b, eps = inputs
        xf = x.float()
        mean = xf.mean(-1)
        rstd = torch.rsqrt(xf.var(-1, unbiased=False) + eps)
        y = ((xf - mean[:, None]) * rstd[:, None] * w.float() + b.float()).to(x.dtype)
        return (y, mean, rstd)
    return REFERENCES[op](*inputs)


def _max_rel_err(out: Any, ref: Any) -> float:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    worst = 0.0
    for o, r in zip(outs, refs, strict=True):
        o, r = o.float().cpu(), r.float().cpu()
        err = ((o - r).abs() / (r.abs() + 1.0)).max().item()
        worst = max(worst, err if math.isfinite(err) else float("inf"))
    return worst


def _time(fn: Any, device: str) -> float:
    """Median µs of one call."""
    if device == "cuda":
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")) * 1e3
    fn()
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def measure_example(folder: Path, device: str) -> dict[str, Any]:
    """Child side: correctness and per-case medians for baseline, round 1 and round 2."""
    op = folder.name
    variants = {
        "baseline": folder / f"{op}.py",
        "round-1": folder / "candidates" / "round-1.py",
        "round-2": folder / "candidates" / "round-2.py",
    }
    bench = _load(folder / f"bench_{op}.py", f"bench_{op}")
    test = _load(folder / f"differential_test_{op}.py", f"differential_test_{op}")
    result: dict[str, Any] = {"op": op, "device": device, "cases": {}, "max_rel_err": {}}
    for name, path in variants.items():
        module = _load(path, f"{op}_{name.replace('-', '_')}")
        cases = test.build_differential_test_cases(test.build_operator_api(module))
        result["max_rel_err"][name] = max(_max_rel_err(c["fn"](), _reference(op, tuple(c["inputs"]))) for c in cases)
        api = bench.build_operator_api(module)
        for case in bench.build_bench_cases():
            fn = bench.build_bench_case_fn(api, case)
            result["cases"].setdefault(case["id"], {})[name] = _time(fn, device)
    return result


def _geomean(pairs: list[tuple[float, float]]) -> float:
    return math.exp(sum(math.log(b / c) for b, c in pairs) / len(pairs))


def rows_for(result: dict[str, Any], method: str) -> list[dict[str, Any]]:
    op = result["op"]
    cases = result["cases"].values()
    r1 = _geomean([(c["baseline"], c["round-1"]) for c in cases])
    r2 = _geomean([(c["round-1"], c["round-2"]) for c in cases])
    errs = ", ".join(f"{k} {v:.1e}" for k, v in result["max_rel_err"].items())
    note = f"{method}; {len(result['cases'])} cases; max rel err vs torch: {errs}"
    return [
        {"benchmark": "examples", "figure": f"{op}: round-1 speedup over baseline (geomean)", "value": round(r1, 3),
         "unit": "x", "compare_to": "baseline", "ratio": round(r1, 3), "note": note},
        {"benchmark": "examples", "figure": f"{op}: round-2 speedup over round-1 (geomean)", "value": round(r2, 3),
         "unit": "x", "compare_to": "round-1", "ratio": round(r2, 3), "note": note},
    ]


def _child(device: str) -> None:
    out = [measure_example(f, device) for f in sorted(EXAMPLES.iterdir())
           if f.is_dir() and (f / "candidates" / "round-1.py").is_file()]
    print("HELIX_EXAMPLES_JSON " + json.dumps(out))


def _has_cuda() -> bool:
    probe = "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def run() -> list[dict[str, Any]]:
    device = "cuda" if _has_cuda() else "cpu"
    env = dict(os.environ, HELIX_DEVICE=device, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, __file__, "--child", device], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    line = next((out for out in proc.stdout.splitlines() if out.startswith("HELIX_EXAMPLES_JSON ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return [{"benchmark": "examples", "figure": "example rounds", "value": float("nan"), "unit": "x",
                 "compare_to": None, "ratio": None, "note": "failed: " + " | ".join(tail)}]
    method = ("triton.testing.do_bench median (CUDA)" if device == "cuda"
              else "CPU interpreter, perf_counter median of 5")
    rows: list[dict[str, Any]] = []
    for result in json.loads(line.split(" ", 1)[1]):
        rows.extend(rows_for(result, method))
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
    else:
        for row in run():
            print(f"{row['figure']:<50} {row['value']:>8} {row['unit']}  ({row['note']})")
