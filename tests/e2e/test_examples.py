"""The shipped examples are real operator workspaces: contract-conforming harnesses, and
baseline + both round candidates numerically right against PyTorch on the CPU interpreter.

Kernels run in a child process (TRITON_INTERPRET=1 must be set before triton is imported, and
operator code never runs in the test process). Timings are never asserted here; the demo and
benchmarks/bench_examples.py measure them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.eval.loader import jit_functions, metadata_kernels, parse_metadata
from helix_engine.state.continuity import kernel_continuity_ok
from helix_engine.state.lints import same_code
from helix_engine.workspace import layout

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
NOTE_KEYS = ("theme", "round-strategy", "analysis-policy", "primary-analysis-level", "expect")

CHILD = r"""
import importlib.util, json, sys, traceback
import torch
from helix_engine.eval.loader import load_bench_harness, load_differential_cases

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def reference(op, inputs):
    if op == "softmax":
        (x,) = inputs
        return torch.softmax(x.double(), -1)
    if op == "layernorm":
        x, w, b, eps = inputs
        xd = x.double()
        mean = xd.mean(-1)
        rstd = torch.rsqrt(xd.var(-1, unbiased=False) + eps)
        return ((xd - mean[:, None]) * rstd[:, None] * w.double() + b.double(), mean, rstd)
    if op == "matmul":
        a, b = inputs
        return a.double() @ b.double()
    raise SystemExit("no reference for " + op)

TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}


def check(folder, op):
    report = {}
    variants = {"baseline": f"{folder}/{op}.py", "round-1": f"{folder}/candidates/round-1.py",
                "round-2": f"{folder}/candidates/round-2.py"}
    for name, path in variants.items():
        report[name] = check_variant(folder, op, path)
    return report


def check_variant(folder, op, path):
    cases, compute = load_differential_cases(f"{folder}/differential_test_{op}.py", path)
    results = []
    for case in cases:
        out = case.fn()
        ref = reference(op, tuple(case.inputs))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
        ok = len(outs) == len(refs)
        worst = 0.0
        for o, r in zip(outs, refs):
            rtol, atol = TOL.get(o.dtype, (1e-4, 1e-5))
            ok = ok and o.shape == r.shape and torch.allclose(o.double(), r, rtol=rtol, atol=atol)
            worst = max(worst, (o.double() - r).abs().max().item() if o.shape == r.shape else float("inf"))
        results.append({"id": case.id, "ok": bool(ok), "max_abs_err": worst})
    harness = load_bench_harness(f"{folder}/bench_{op}.py", path)
    ran = []
    for case in harness.cases[:1]:
        harness.build_fn(case)()
        ran.append(case.id)
    return {"cases": results, "bench_cases": [c.id for c in harness.cases], "bench_ran": ran, "compute": compute}


# one interpreter for every example (torch and triton import once); each example's report, or
# the traceback that stopped it, on a line of its own
for folder, op in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        print("REPORT " + json.dumps({"op": op, "report": check(folder, op)}), flush=True)
    except Exception:
        print("REPORT " + json.dumps({"op": op, "error": traceback.format_exc()}), flush=True)
"""


@pytest.fixture(scope="module")
def reports() -> tuple[dict[str, dict], int, str]:
    """Every example's report from one child process (the kernels must not run in this process),
    its exit code and the end of its stderr."""
    env = dict(os.environ, TRITON_INTERPRET="1", HELIX_DEVICE="cpu", HELIX_BACKEND="cpu",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [arg for name in NAMES for arg in (str(EXAMPLES / name), name)]
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    entries = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    return {entry["op"]: entry for entry in entries}, proc.returncode, proc.stderr[-3000:]


def _report(reports: tuple[dict[str, dict], int, str], name: str) -> dict:
    by_name, code, stderr = reports
    assert code == 0 and name in by_name, f"the child (exit code {code}) gave no report for {name}: {stderr}"
    assert "error" not in by_name[name], by_name[name]["error"]
    return by_name[name]["report"]


def test_there_are_at_least_three_examples() -> None:
    assert {"softmax", "layernorm", "matmul"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_is_a_workspace_with_contract_headers(name: str) -> None:
    folder = EXAMPLES / name
    op, problems = layout.discover_operator(folder)
    assert op == folder / f"{name}.py" and not problems
    bench = parse_metadata((folder / f"bench_{name}.py").read_text())
    test = parse_metadata((folder / f"differential_test_{name}.py").read_text())
    assert bench["api-name"] == test["api-name"] == name
    assert bench["api-kind"] == test["api-kind"] == "triton-wrapper"
    assert test["test-mode"] == "differential"
    kernels = jit_functions(op.read_text(), op)
    assert kernels and set(metadata_kernels(bench)) == set(kernels) == set(metadata_kernels(test))
    for harness in (f"bench_{name}.py", f"differential_test_{name}.py"):
        assert "from helix_engine.harness import device" in (folder / harness).read_text()
    # nothing a run would write is shipped in the example
    assert not list(folder.glob("*_perf.txt")) and not list(folder.glob("*_result.pt"))
    assert not (folder / layout.BASELINE_DIR).exists() and not (folder / layout.HELIX_DIR).exists()


@pytest.mark.parametrize("name", NAMES)
def test_candidates_are_real_kernel_changes_with_notes(name: str) -> None:
    folder = EXAMPLES / name
    parent = (folder / f"{name}.py").read_text()
    expects = []
    for n in (1, 2):
        source = (folder / "candidates" / f"round-{n}.py").read_text()
        assert kernel_continuity_ok(source), f"round-{n} lost its Triton launch"
        assert not same_code(source, parent), f"round-{n} is the parent unchanged"
        assert f"def {name}(" in source, "the candidate must keep the operator API name"
        parent = source
        note = (folder / "candidates" / f"round-{n}.md").read_text()
        head = dict(line.split(":", 1) for line in note.split("\n\n", 1)[0].splitlines())
        assert set(NOTE_KEYS) <= set(head), f"round-{n}.md lacks {set(NOTE_KEYS) - set(head)}"
        assert "Hypothesis:" in note
        expects.append(head["expect"].strip())
    assert expects == ["improvement", "regression"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_variant_matches_torch_on_the_interpreter(reports: tuple[dict[str, dict], int, str], name: str) -> None:
    report = _report(reports, name)
    assert set(report) == {"baseline", "round-1", "round-2"}
    for variant, data in report.items():
        assert len(data["cases"]) >= 5, f"{variant}: a differential test needs at least 5 cases"
        assert data["compute"] is True
        bad = [c for c in data["cases"] if not c["ok"]]
        assert not bad, f"{name} {variant} differs from torch: {bad}"
        assert data["bench_cases"] and data["bench_ran"] == data["bench_cases"][:1]
