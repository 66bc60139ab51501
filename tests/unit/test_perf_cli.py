"""`python3 -m helix_engine compare-perf ...` as a user runs it: stdout, stderr, exit code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "perf"
BASE = FIXTURES / "spec_example_baseline_perf.txt"
COMP = FIXTURES / "spec_example_compare_perf.txt"
NO_CI = "No CI available: the perf files carry no raw samples (samples_us).\n"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HELIX_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "helix_engine", "compare-perf", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )


def test_pass_prints_the_upstream_block_and_exits_0() -> None:
    proc = cli("--baseline", BASE, "--compare", COMP)
    expected = (FIXTURES / "spec_example_output.txt").read_text(encoding="utf-8")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected + NO_CI
    assert proc.stderr == ""


def test_fail_exits_1_with_a_fail_line(tmp_path: Path) -> None:
    proc = cli("--baseline", BASE, "--compare", COMP, "-m", "kernel")
    assert proc.returncode == 1
    assert proc.stdout == (
        f"FAIL: {COMP}:3 requires kernel latency for 'latency-fp32_8192' under --metric-source kernel\n"
    )


def test_all_mode_and_json(tmp_path: Path) -> None:
    proc = cli("--baseline", BASE, "--compare", COMP, "-m", "all", "--json")
    assert proc.returncode == 1  # the kernel section is unavailable
    payload = json.loads(proc.stdout)
    assert payload["passed"] is False and payload["problems"] == []
    kernel, total = payload["comparisons"]
    assert kernel["requested"] == "kernel" and kernel["errors"] and kernel["cases"] == []
    assert total["passed"] is True and total["metric_source"] == "total-op"
    assert [c["latency_id"] for c in total["cases"]] == [
        "latency-fp16_1024", "latency-fp16_4096", "latency-fp32_8192"
    ]
    # (10-8)/10, (40-25)/40, (120-100)/120 → mean 24.72…%; geomean 2.4 ** (1/3)
    assert abs(total["avg_improvement"] - 24.7222222) < 1e-6
    assert abs(total["geomean_speedup"] - 2.4 ** (1 / 3)) < 1e-9
    assert total["ci"]["available"] is False and "no raw samples" in total["ci"]["note"]


def test_json_single_comparison_passes() -> None:
    proc = cli("--baseline", BASE, "--compare", COMP, "--json")
    assert proc.returncode == 0
    payload = json.loads(proc.stdout)
    (only,) = payload["comparisons"]
    assert only["metric_source"] == "mixed"
    assert only["metric_source_line"] == "mixed (kernel + total-op fallback)"
    assert only["cases"][2]["baseline_display"] == "total-op=120.0"


def test_skip_latency_errors_still_exits_1(tmp_path: Path) -> None:
    comp = tmp_path / "opt_perf.txt"
    lines = COMP.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    record["error_message"] = "RuntimeError: launch failed"
    lines[1] = json.dumps(record, separators=(",", ":"))
    comp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    strict = cli("--baseline", BASE, "--compare", comp)
    assert strict.returncode == 1 and strict.stdout.startswith("FAIL: ")
    proc = cli("--baseline", BASE, "--compare", comp, "--skip-latency-errors")
    assert proc.returncode == 1
    out = proc.stdout.splitlines()
    assert "FAIL: skipped 1 latency entries due to latency errors" in out
    assert f"{comp}:2 cannot compare 'latency-fp16_4096' because 'error_message: " \
           "RuntimeError: launch failed' is present" in out
    assert "latency-fp16_1024: baseline=10.0, compare=8.0, delta=-20.00%" in out


def test_missing_and_binary_files_are_clear_errors_without_traceback(tmp_path: Path) -> None:
    proc = cli("--baseline", tmp_path / "nope_perf.txt", "--compare", COMP)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error: cannot read the baseline perf file")
    assert "missing" in proc.stderr and "Traceback" not in proc.stderr
    binary = tmp_path / "bin_perf.txt"
    binary.write_bytes(b"\x00\xff\x00")
    proc = cli("--baseline", BASE, "--compare", binary)
    assert proc.returncode == 1 and "binary" in proc.stderr and "Traceback" not in proc.stderr


def test_malformed_lines_are_fail_lines_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad_perf.txt"
    shutil.copy(COMP, bad)
    with bad.open("a", encoding="utf-8") as handle:
        handle.write("not json\n[1]\n")
    proc = cli("--baseline", BASE, "--compare", bad)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    out = proc.stdout.splitlines()
    assert len(out) == 2
    assert out[0].startswith(f"FAIL: {bad}:4: has invalid JSON")
    assert out[1].startswith(f"FAIL: {bad}:5: is a JSON list")


def test_bad_metric_choice_is_an_argparse_error() -> None:
    proc = cli("--baseline", BASE, "--compare", COMP, "-m", "fastest")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_importing_the_comparison_stays_light() -> None:
    """status/compare import this on every call: numpy (bootstrap only) and torch stay out."""
    code = ("import sys, helix_engine.perf.compare, helix_engine.commands.perf; "
            "print(sorted(m for m in ('numpy', 'torch', 'triton', 'textual') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]"
