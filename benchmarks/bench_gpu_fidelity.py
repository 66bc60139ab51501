"""Harness fidelity on a CUDA GPU: helix run-bench medians vs triton.testing.do_bench.

For a one-pass Triton softmax and a slower three-pass variant, on three shapes:
run-test (differential, slow vs fast), run-bench in ``torch-profiler`` and ``device-event``
modes (each a real helix job), and the median of ``triton.testing.do_bench`` on the same
closures, repeated 7 times to show its spread. ratio = helix median / do_bench median.
Single command: ``python3 benchmarks/bench_gpu_fidelity.py [OUT.json]`` (or HELIX_BENCH_JSON);
prints a table and writes the rows as JSON. Without CUDA it prints a note and returns [].
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _gpu_softmax_ws import cuda_available, json_path, make_workspace, print_rows  # noqa: E402

DO_BENCH_REPEATS = 7
MODES = ("torch-profiler", "device-event")


def _row(figure: str, value: float, unit: str, compare_to: str | None, ratio: float | None, note: str) -> dict[str, Any]:
    return {"benchmark": "gpu_fidelity", "figure": figure, "value": float(value), "unit": unit,
            "compare_to": compare_to, "ratio": ratio, "note": note}


def _do_bench_medians(op: Path, bench: Path) -> dict[str, list[float]]:
    """do_bench medians (µs) of each case's closure, DO_BENCH_REPEATS times (in this process)."""
    import os

    os.environ["HELIX_DEVICE"] = "cuda"
    from triton.testing import do_bench

    from helix_engine.eval.loader import load_bench_harness

    harness = load_bench_harness(bench, op)
    out: dict[str, list[float]] = {}
    for case in harness.cases:
        fn = harness.build_fn(case)
        out[case.id] = [float(do_bench(fn, return_mode="median")) * 1e3 for _ in range(DO_BENCH_REPEATS)]
    return out


def run() -> list[dict[str, Any]]:
    ok, why = cuda_available()
    if not ok:
        print(f"gpu fidelity: skipped, no CUDA device ({why})", file=sys.stderr)
        return []
    from helix_engine.eval.bench import run_bench
    from helix_engine.eval.test import run_test

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="helix-gpu-fidelity-") as tmp:
        ws = make_workspace(Path(tmp))
        ops = {"softmax": ws / "softmax.py", "softmax_slow": ws / "baseline" / "softmax.py"}
        bench = ws / "bench_softmax.py"
        t0 = time.monotonic()
        test = run_test(ops["softmax_slow"], test_mode="differential", ref_operator_file=ops["softmax"], backend="cuda")
        first = next((ln for ln in test.text.splitlines() if ln.startswith(("PASS", "FAIL"))), test.message or "")
        rows.append(_row("run-test differential: slow vs fast (1=pass)", 1.0 if test.exit_code == 0 else 0.0, "bool",
                         None, None, f"{first[:70]} ({time.monotonic() - t0:.1f} s)"))
        helix: dict[tuple[str, str], dict[str, Any]] = {}
        for name, op in ops.items():
            for mode in MODES:
                t0 = time.monotonic()
                out = run_bench(op, bench, mode, output=Path(tmp) / f"{name}_{mode}_perf.txt", backend="cuda")
                wall = time.monotonic() - t0
                for rec in out.records:
                    helix[(name, mode, rec["case_label"])] = dict(rec, wall_s=wall)  # type: ignore[index]
        refs = {name: _do_bench_medians(op, bench) for name, op in ops.items()}
        for name in ops:
            for case, medians in refs[name].items():
                ref = statistics.median(medians)
                spread = (max(medians) - min(medians)) / ref * 100
                rows.append(_row(f"do_bench median {name}/{case}", ref, "us", None, None,
                                 f"{DO_BENCH_REPEATS} repeats: {min(medians):.2f}..{max(medians):.2f} us, spread {spread:.1f}%"))
                for mode in MODES:
                    rec = helix.get((name, mode, case))  # type: ignore[call-overload]
                    if rec is None or not rec.get("stats"):
                        err = rec.get("error_message") if rec else "missing"
                        rows.append(_row(f"run-bench {mode} {name}/{case}", 0.0, "us", "do_bench median", None, f"error: {err}"))
                        continue
                    med = rec["stats"]["median"]
                    note = (f"kernel={rec.get('kernel_avg_time_us')} total-op={rec.get('total_op_avg_time_us')} "
                            f"n={rec['stats']['n']} p10..p90={rec['stats']['p10']:.2f}..{rec['stats']['p90']:.2f}")
                    if rec.get("error_message"):
                        note += f" ({rec['error_message']})"
                    rows.append(_row(f"run-bench {mode} {name}/{case}", med, "us", "do_bench median", med / ref, note))
    return rows


if __name__ == "__main__":
    result = run()
    print_rows(result)
    path = json_path("bench_gpu_fidelity.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"JSON: {path}")
