"""probe-bench on a CUDA GPU: verdict agreement with canonical run-bench, and time to verdict.

Pairs: fast vs slow softmax (a real gain) and fast vs an identical copy (no change). For each,
the canonical run-bench + compare-perf (torch-profiler, full repeats) gives a reference
geomean, classified with the probe's own thresholds; the capped probe and the adaptive probe
must agree with it. ratio = probe wall time / canonical wall time (lower is the point of a probe).
Single command: ``python3 benchmarks/bench_probe.py [OUT.json]`` (or HELIX_BENCH_JSON).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _gpu_softmax_ws import cuda_available, json_path, make_workspace, print_rows  # noqa: E402

ADAPTIVE_BUDGET_S = 180.0


def _row(figure: str, value: float, unit: str, compare_to: str | None, ratio: float | None, note: str) -> dict[str, Any]:
    return {"benchmark": "probe", "figure": figure, "value": float(value), "unit": unit,
            "compare_to": compare_to, "ratio": ratio, "note": note}


def run() -> list[dict[str, Any]]:
    ok, why = cuda_available()
    if not ok:
        print(f"probe: skipped, no CUDA device ({why})", file=sys.stderr)
        return []
    from helix_engine.eval.bench import run_bench
    from helix_engine.eval.probe import classify, probe_bench

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="helix-probe-") as tmp:
        ws = make_workspace(Path(tmp))
        bench = ws / "bench_softmax.py"
        pairs = {"fast vs slow": (ws / "softmax.py", ws / "baseline" / "softmax.py"),
                 "fast vs identical": (ws / "softmax.py", ws / "fast_copy" / "softmax.py")}
        for label, (cand, base) in pairs.items():
            for stale in (base.with_name("softmax_perf.txt"),):
                stale.unlink(missing_ok=True)
            t0 = time.monotonic()
            canon = run_bench(cand, bench, "torch-profiler", output=Path(tmp) / f"canon_{label[-4:]}.txt",
                              backend="cuda", baseline_operator_file=base)
            canon_s = time.monotonic() - t0
            speedups = [c["speedup"] for comp in (canon.comparison or []) for c in comp["cases"]]
            canon_cls = classify(speedups)
            geo = canon_cls.geomean or math.nan
            rows.append(_row(f"canonical run-bench geomean ({label})", geo, "x", None, None,
                             f"verdict by probe thresholds: {canon_cls.label}; {canon_s:.1f} s incl. baseline bench"))
            t0 = time.monotonic()
            probe = probe_bench(cand, base, bench_file=bench, bench_mode="torch-profiler", backend="cuda")
            probe_s = time.monotonic() - t0
            agree = probe.classification == canon_cls.label
            rows.append(_row(f"probe geomean ({label})", probe.geomean_speedup or math.nan, "x",
                             "canonical geomean", (probe.geomean_speedup or math.nan) / geo,
                             f"verdict {probe.classification}; agrees={agree}; {probe_s:.1f} s "
                             f"(cache {probe.cache}); {probe.message or ''}".strip()))
            rows.append(_row(f"probe wall time ({label})", probe_s, "s", "canonical run-bench wall time",
                             probe_s / canon_s, "baseline probe cache miss, then candidate"))
            t0 = time.monotonic()
            ad = probe_bench(cand, base, bench_file=bench, bench_mode="torch-profiler", backend="cuda",
                             adaptive=True, budget_s=ADAPTIVE_BUDGET_S)
            ad_s = time.monotonic() - t0
            ttv = ad.time_to_verdict_s
            rows.append(_row(f"adaptive probe time to verdict ({label})", ttv if ttv is not None else ad_s, "s",
                             "canonical run-bench wall time", (ttv if ttv is not None else ad_s) / canon_s,
                             f"verdict {ad.classification} after {len(ad.batches)} batches; stable={ad.stable}; "
                             f"agrees={ad.classification == canon_cls.label}; geomean {ad.geomean_speedup or math.nan:.3f}x"))
    return rows


if __name__ == "__main__":
    result = run()
    print_rows(result)
    path = json_path("bench_probe.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"JSON: {path}")
