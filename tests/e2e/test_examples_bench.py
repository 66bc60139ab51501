"""benchmarks/run_all.py: discovers bench scripts, survives a broken one, prints one table;
benchmarks/bench_examples.py: its figures come from real per-case medians."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(f"_t_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader
    spec.loader.exec_module(module)
    return module


def test_run_all_turns_a_broken_script_into_one_error_row(tmp_path: Path) -> None:
    run_all = _load("run_all")
    broken = tmp_path / "bench_broken.py"
    broken.write_text("def run():\n    raise RuntimeError('no GPU here')\n")
    rows, seconds = run_all.run_script(broken)
    assert seconds >= 0 and len(rows) == 1
    assert rows[0]["benchmark"] == "broken" and rows[0]["figure"] == "(script failed)"
    assert "RuntimeError: no GPU here" in rows[0]["note"] and math.isnan(rows[0]["value"])


def test_run_all_table_and_markdown_have_every_row() -> None:
    run_all = _load("run_all")
    rows = [{"benchmark": "status", "figure": "helix status", "value": 0.25, "unit": "s",
             "compare_to": "upstream (0.38 s)", "ratio": 0.66, "note": "median of 5"},
            {"benchmark": "examples", "figure": "no GPU", "value": math.nan, "unit": "", "compare_to": None,
             "ratio": None, "note": "skipped | no CUDA"}]
    text = run_all.table(rows)
    assert text.splitlines()[0].split() == ["benchmark", "figure", "value", "reference", "ratio"]
    assert "0.25 s" in text and "0.66" in text and "n/a" in text
    md = run_all.markdown(rows, "2026-01-01", "2 cores").splitlines()
    assert len(md) == 2 and all(line.count("|") == 8 for line in md)  # the "|" in a note is escaped


def test_run_all_discovers_every_bench_script_and_filters() -> None:
    run_all = _load("run_all")
    names = {p.stem for p in run_all.discover()}
    assert "bench_examples" in names and all(n.startswith("bench_") for n in names)
    assert [p.stem for p in run_all.discover(only={"examples"})] == ["bench_examples"]
    assert "bench_examples" not in {p.stem for p in run_all.discover(skip={"examples"})}
    assert run_all.main(["--only", "no-such-benchmark"]) == 1


def test_bench_examples_rows_are_geomeans_of_the_cases() -> None:
    bench = _load("bench_examples")
    result = {"op": "softmax", "cases": {"a": {"baseline": 40.0, "round-1": 10.0, "round-2": 20.0},
                                          "b": {"baseline": 90.0, "round-1": 10.0, "round-2": 40.0}},
              "max_rel_err": {"baseline": 0.0, "round-1": 1e-7, "round-2": 1e-7}}
    r1, r2 = bench.rows_for(result, "test method")
    assert r1["value"] == 6.0 and r1["compare_to"] == "baseline"  # sqrt(4 * 9)
    assert r2["value"] == round(math.sqrt(0.5 * 0.25), 3) and r2["compare_to"] == "round-1"
    assert "test method" in r1["note"] and "test method" in r2["note"]


def test_run_all_reports_a_script_that_skips_with_its_reason(tmp_path: Path) -> None:
    run_all = _load("run_all")
    gpu_only = tmp_path / "bench_gpu_only.py"
    gpu_only.write_text("import sys\ndef run():\n    print('skipped, no CUDA device', file=sys.stderr)\n    return []\n")
    rows, _ = run_all.run_script(gpu_only)
    assert [r["figure"] for r in rows] == ["(no figures on this machine)"]
    assert rows[0]["note"] == "skipped, no CUDA device"
