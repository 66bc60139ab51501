"""Verdicts you can gate on (issue 10): A/A false verdicts, detection of a real 5% change, and
probe-bench time to a stable verdict.

  python3 benchmarks/bench_verdicts.py --backend cpu --quick --out DIR     # this CPU box, < 10 min
  python3 benchmarks/bench_verdicts.py --backend cuda --out DIR            # one H200, < ~8 min

Figures (each a case comparison = one case of one run-bench job; every run is its own job):
(a) A/A false-verdict rate: an operator against an identical copy, paired in one job
    (run-bench --baseline-operator-file), verdict of the ratio of means != within-noise.
    Reported with the default 1% margin and with the margins `helix calibrate` measured first
    (A/A rounds in jobs of their own: 3 on cuda, 5 on cpu), for the ratio of means and the ratio
    of medians, and, for contrast, unpaired: run 0's reference records against run j's candidate
    records (separate jobs, as two run-bench files are compared today). Goal <= 1%.
(b) Detection rate of a real 5% change: the reference does 5% more work (cpu: 21 instead of 20
    element-wise passes; cuda: a Triton copy kernel that reads and writes 5% more bytes, on the
    large cases only: in L2 the extra bytes cost less than 5%), verdict must be "faster".
    Goal >= 95%.
(c) probe-bench --adaptive time to a settled verdict (perf/sequential.py: the geomean's interval
    wholly beyond or inside the margin) against canonical run-bench of both sides (two unpaired
    jobs, as upstream), on a clear change (the reference does 1.5x the work: the truth is a gain).
    Goal <= 1/3. Also the paired probe (one job). Each probe's classification is checked against
    the truth and against canonical compare-perf's, classified by the ratio of means (upstream's
    number) and by the ratio of medians (what the probe classifies since issue 10).

Writes DIR/bench_verdicts.json (rows + every verdict) and DIR/bench_verdicts.md (RESULTS.md rows).
Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _measure  # noqa: E402 - after the sys.path lines above

# ----------------------------------------------------------------------------- operators

CPU_OP = '''\
import torch

PASSES = {passes}


def scale(x, out):
    # element-wise passes over x; the 5% variant does 21 instead of 20, the clear one 30
    for _ in range(PASSES):
        torch.mul(x, 1.0001, out=out)
    return out
'''

CUDA_OP = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = (pid * BLOCK + tl.arange(0, BLOCK)) % n  # programs past n wrap: extra traffic over cold lines
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * 2.0)


EXTRA = {extra}  # fraction of extra bytes read and written (0.05: the 5% variant)


def scale(x, out):
    n = x.numel()
    block = 1024
    programs = triton.cdiv(int(n * (1.0 + EXTRA)), block)
    scale_kernel[(programs,)](x, out, n, BLOCK=block)
    return out
'''

BENCH = '''\
# api-name: scale
# api-kind: {kind}
# kernels: scale_kernel
import torch

from helix_engine.harness import device

SIZES = {sizes}


def build_operator_api(m):
    return m.scale


def build_bench_cases():
    return [{{"id": f"n{{n}}", "n": n, "warmup": {warmup}, "repeats": {repeats}}} for n in SIZES]


def build_bench_case_fn(api, case):
    torch.manual_seed(0)
    x = torch.randn(case["n"], device=device())
    out = torch.empty_like(x)
    return lambda: api(x, out)
'''

PROFILES: dict[str, dict[str, Any]] = {
    # cpu: 10 cases of a few hundred µs each; perf-counter timing
    "cpu": {"mode": "perf-counter", "sizes": [4096 * (i + 1) for i in range(10)], "warmup": 3, "repeats": 20,
            "runs": 12, "quick_runs": 10, "calib_rounds": 5, "budget_s": 60.0},
    # cuda: A/A over 4 small cases (64K-16M floats: launch- and L2-bound, a few µs, where drift and
    # launch jitter show) and 6 large ones (128-448 MB, far beyond the H200's L2); detection over the
    # large ones only, where the wrapped 5% is memory traffic (in L2 it would cost less than 5%)
    "cuda": {"mode": "device-event", "sizes": [2**16, 2**18, 2**20, 2**22] + [(32 + 16 * i) * 2**20 for i in range(6)],
             "detect_sizes": [(32 + 16 * i) * 2**20 for i in range(6)], "warmup": 5, "repeats": 30,
             "runs": 12, "detect_runs": 17, "quick_runs": 10, "calib_rounds": 3, "budget_s": 90.0},
}


def write_workspace(root: Path, backend: str, prof: dict[str, Any]) -> dict[str, Path]:
    """ws/scale.py (the candidate), baseline/ (same code), aa/ (an identical copy), more5/ (5%
    more work), more50/ (1.5x the work), and the bench harness."""
    ws = root / "scale_ws"
    kind = "triton-wrapper" if backend == "cuda" else "torch-function"
    (ws / ".helix").mkdir(parents=True, exist_ok=True)

    def op(variant: float) -> str:
        if backend == "cuda":
            return CUDA_OP.format(extra=variant)
        return CPU_OP.format(passes=round(20 * (1 + variant)))

    files = {"candidate": ws / "scale.py", "baseline": ws / "baseline" / "scale.py", "aa": ws / "aa" / "scale.py",
             "more5": ws / "more5" / "scale.py", "more50": ws / "more50" / "scale.py"}
    variants = {"candidate": 0.0, "baseline": 0.0, "aa": 0.0, "more5": 0.05, "more50": 0.5}
    for name, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(op(variants[name]), encoding="utf-8")
    bench = ws / "bench_scale.py"
    bench.write_text(BENCH.format(kind=kind, sizes=prof["sizes"], warmup=prof["warmup"], repeats=prof["repeats"]),
                     encoding="utf-8")
    detect = ws / "detect" / "bench_scale.py"  # the detection cases (same ids, a subset)
    detect.parent.mkdir(exist_ok=True)
    detect.write_text(BENCH.format(kind=kind, sizes=prof.get("detect_sizes", prof["sizes"]), warmup=prof["warmup"],
                                   repeats=prof["repeats"]), encoding="utf-8")
    return {**files, "bench": bench, "detect_bench": detect, "ws": ws}


# ------------------------------------------------------------------------------ running


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def paired_run(paths: dict[str, Path], cand: Path, ref: Path, tag: str, backend: str, mode: str,
               bench: Path) -> Path:
    """One paired run-bench job; returns the candidate's perf file (its sidecar beside it)."""
    from helix_engine.eval.bench import run_bench

    out = paths["ws"] / f"{tag}_perf.txt"
    result = run_bench(cand, bench, mode, output=out, backend=backend, baseline_operator_file=ref)
    if result.perf_file is None:
        raise RuntimeError(f"{tag}: the paired run-bench failed: {result.message or result.text[-400:]}")
    return out


def verdicts_of(perf: Path, margins: Any) -> dict[str, dict[str, Any]]:
    """Per case: the paired ratio of means, its interval and verdict under ``margins``."""
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.paired import evaluate_paired, read_paired

    run, why = read_paired(perf)
    if run is None:
        raise RuntimeError(f"{perf}: no paired result ({why})")
    records, _ = read_perf(perf)
    ev = evaluate_paired(run, records, noise_margin=margins)
    return {c.latency_id: {"point": c.mean.point, "ci": c.mean.ci95, "verdict": c.mean.verdict,
                           "margin": c.noise_margin, "blocks": c.n_blocks,
                           "median_point": c.median.point if c.median else None,
                           "median_ci": c.median.ci95 if c.median else None,
                           "median_margin": c.median_noise_margin,
                           "median_verdict": c.median.verdict if c.median else None} for c in ev.cases}


def unpaired_verdicts(first: Path, later: Path) -> dict[str, str | None]:
    """Run 0's reference records against a later run's candidate records (two separate jobs)."""
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.evaluation import evaluate
    from helix_engine.perf.paired import read_paired

    run0, _ = read_paired(first)
    records, _ = read_perf(later)
    assert run0 is not None
    ev = evaluate(run0.reference_records, records)
    return {c.latency_id: (c.mean.verdict, c.median.verdict if c.median else None) for c in ev.cases}


def rate(verdicts: list[str | None], wanted: set[str]) -> tuple[float, int, int]:
    hits = sum(1 for v in verdicts if v in wanted)
    return (hits / len(verdicts) if verdicts else float("nan")), hits, len(verdicts)


def row(figure: str, value: float, unit: str, reference: str, ratio: float | None, machine: str,
        method: str) -> dict[str, Any]:
    return {"figure": figure, "value": value, "unit": unit, "reference": reference, "ratio": ratio,
            "date": date.today().isoformat(), "machine": machine, "method": method}


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| Figure | Value | Reference | Ratio | Date | Machine | Method |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        value = f"{r['value']:.3g} {r['unit']}".strip()
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}"
        lines.append(f"| {r['figure']} | {value} | {r['reference']} | {ratio} | {r['date']} | {r['machine']} | "
                     f"{r['method']} |")
    return "\n".join(lines) + "\n"


def _probe_section(paths: dict[str, Path], ws: Path, mode: str, backend: str, prof: dict[str, Any], repeats: int,
                   machine: str, rows: list[dict[str, Any]], details: dict[str, Any]) -> None:
    """(c): canonical run-bench of both sides (two cold jobs, as upstream), the adaptive probe in a
    fresh process ("cold") and in the warm worker's fork ("warm", eval/warm.py: started once before,
    as `helix worker start` is once per session; its start is reported, not counted), and the
    paired probe both ways; interleaved ``repeats`` times, medians with min–max."""
    from helix_engine.eval import warm
    from helix_engine.eval.bench import run_bench
    from helix_engine.eval.probe import classify, probe_bench, probe_speedups
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.filecompare import compare_perf_files

    truth = "likely_gain"  # the reference does 1.5x the work
    log("(c) starting the warm worker")
    t0 = time.monotonic()
    info = warm.start(ws, backend)
    details["warm_worker_start_s"] = round(time.monotonic() - t0, 2)
    series: dict[str, list[float]] = {k: [] for k in ("canonical", "adaptive cold", "adaptive warm", "paired cold",
                                                       "paired warm")}
    ready: dict[str, list[float]] = {"adaptive cold": [], "adaptive warm": []}
    labels: dict[str, list[str | None]] = {k: [] for k in series}
    runs: list[dict[str, Any]] = []
    try:
        for i in range(repeats):
            log(f"(c) round {i + 1}/{repeats}: canonical run-bench of both sides")
            t0 = time.monotonic()
            ref_out = run_bench(paths["more50"], paths["bench"], mode, output=ws / "c_ref_perf.txt", backend=backend)
            cand_out = run_bench(paths["candidate"], paths["bench"], mode, output=ws / "c_cand_perf.txt",
                                 backend=backend)
            series["canonical"].append(time.monotonic() - t0)
            comps = compare_perf_files(ws / "c_ref_perf.txt", ws / "c_cand_perf.txt",
                                       read_perf(ws / "c_ref_perf.txt")[0], read_perf(ws / "c_cand_perf.txt")[0],
                                       with_ci=False)
            labels["canonical"].append(classify(probe_speedups(comps[0])).label)
            entry: dict[str, Any] = {"canonical_s": series["canonical"][-1], "canonical_rc": [ref_out.exit_code,
                                                                                                 cand_out.exit_code],
                                     "canonical_label_median": labels["canonical"][-1],
                                     "canonical_label_mean": classify([c.speedup for c in comps[0].cases]).label}
            for how, is_warm in (("cold", False), ("warm", True)):
                log(f"(c) probe-bench --adaptive ({how})")
                probe = probe_bench(paths["candidate"], paths["more50"], bench_file=paths["bench"], bench_mode=mode,
                                    backend=backend, adaptive=True, budget_s=prof["budget_s"], warm=is_warm)
                if is_warm and probe.worker != "warm":
                    raise RuntimeError(f"the warm probe ran cold: {probe.worker_note}")
                took = probe.time_to_verdict_s if probe.time_to_verdict_s is not None else (probe.elapsed_s or math.nan)
                series[f"adaptive {how}"].append(took)
                if probe.ready_s is not None:
                    ready[f"adaptive {how}"].append(probe.ready_s)
                labels[f"adaptive {how}"].append(probe.classification)
                entry[f"adaptive_{how}"] = probe.to_json()
                log(f"(c) probe-bench, paired, one job ({how})")
                t0 = time.monotonic()
                quick = probe_bench(paths["candidate"], paths["more50"], bench_file=paths["bench"], bench_mode=mode,
                                    backend=backend, warm=is_warm)
                series[f"paired {how}"].append(time.monotonic() - t0)
                labels[f"paired {how}"].append(quick.classification)
                entry[f"paired_{how}"] = quick.to_json()
            runs.append(entry)
    finally:
        warm.stop(ws, backend)
    details["probe"] = {"runs": runs, "series": series, "ready": ready, "labels": labels,
                        "worker": {k: v for k, v in info.items() if k != "fingerprint"}}
    canonical = statistics.median(series["canonical"])
    for key in ("adaptive warm", "adaptive cold", "paired warm", "paired cold"):
        values, got = series[key], labels[key]
        agree = sum(1 for label in got if label == truth)
        startup = f"; start-up {_measure.spread(ready[key])} s" if ready.get(key) else ""
        what = ("--adaptive time to a settled verdict" if key.startswith("adaptive") else "(paired, one job) wall time")
        worker = ("in the warm worker's fork (started once before, in "
                  f"{details['warm_worker_start_s']:.1f} s, not counted)" if key.endswith("warm")
                  else "in a fresh process")
        rows.append(row(f"verdicts: probe-bench {what}, {key.split()[1]}", statistics.median(values), "s",
                        f"canonical run-bench of both sides ({_measure.spread(series['canonical'])} s)",
                        statistics.median(values) / canonical, machine,
                        f"goal <= 0.333; {worker}; {_measure.spread(values)} s{startup}; {agree} of {len(got)} runs "
                        f"classified {truth} (the truth: the reference does 1.5x the work); canonical compare-perf "
                        f"by ratio of medians: {', '.join(str(x) for x in labels['canonical'])}; interleaved "
                        f"canonical, cold, warm x {len(values)}; {mode}; wall time incl. job start"))


def _finish(args: argparse.Namespace, rows: list[dict[str, Any]], details: dict[str, Any], started: float) -> int:
    details["total_s"] = time.monotonic() - started
    out_dir = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_verdicts.json").write_text(json.dumps({"rows": rows, "details": details}, indent=1, default=str)
                                                 + "\n", encoding="utf-8")
    (out_dir / "bench_verdicts.md").write_text(markdown(rows), encoding="utf-8")
    print(markdown(rows))
    log(f"done in {details['total_s']:.0f} s; wrote {out_dir / 'bench_verdicts.json'} and bench_verdicts.md")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--quick", action="store_true", help="fewer runs (still >= 100 case comparisons)")
    parser.add_argument("--bench-mode", help="override the profile's bench mode (cpu: perf-counter, "
                        "cuda: device-event)")
    parser.add_argument("--runs", type=int, help="runs per figure (each a job of 10 cases)")
    parser.add_argument("--only-probe", action="store_true", help="calibrate, then figure (c) only")
    parser.add_argument("--probe-repeats", type=int, default=3,
                        help="figure (c): rounds of canonical, cold probe, warm probe, interleaved (default 3)")
    args = parser.parse_args(argv)
    backend = args.backend
    os.environ["HELIX_BACKEND"] = backend
    prof = PROFILES[backend]
    mode = args.bench_mode or prof["mode"]
    runs = args.runs or (prof["quick_runs"] if args.quick else prof["runs"])
    machine = f"{backend}: {platform.node()} ({os.cpu_count()} cores)"
    started = time.monotonic()
    from helix_engine.eval.calibrate import calibrate
    from helix_engine.perf.calibration import margins_for
    from helix_engine.perf.margins import NoiseMargins

    details: dict[str, Any] = {"backend": backend, "bench_mode": mode, "runs": runs, "cases": len(prof["sizes"]),
                               "quick": args.quick}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="helix-verdicts-") as tmp:
        paths = write_workspace(Path(tmp), backend, prof)
        ws = paths["ws"]
        log(f"calibrate: {prof['calib_rounds']} A/A rounds of baseline/scale.py ({mode})")
        t0 = time.monotonic()
        cal = calibrate(ws, rounds=prof["calib_rounds"], backend=backend, bench_mode=mode)
        if cal.get("exit_code") != 0:
            raise RuntimeError(f"calibrate failed: {cal.get('error')}")
        details["calibrate_s"] = time.monotonic() - t0
        details["calibration"] = cal["cases"]
        default, calibrated = NoiseMargins(), None

        # (a) A/A and (b) a real 5% change ----------------------------------------------------
        if args.only_probe:
            _probe_section(paths, ws, mode, backend, prof, args.probe_repeats, machine, rows, details)
            return _finish(args, rows, details, started)
        from helix_engine.perf.artifact import read_perf

        figures = {"aa": ("aa", "baseline", {"faster", "slower"}, "bench", runs),
                   "detect": ("candidate", "more5", {"faster"}, "detect_bench",
                              args.runs or (prof.get("detect_runs", runs) if not args.quick else runs))}
        for figure, (cand_key, ref_key, counted, bench_key, n_runs) in figures.items():
            verdicts: dict[str, list[Any]] = {}
            wrong: list[dict[str, Any]] = []  # each A/A case called faster/slower, with its numbers
            files: list[Path] = []
            points: list[float] = []
            t0 = time.monotonic()
            for i in range(n_runs):
                log(f"({'a' if figure == 'aa' else 'b'}) {figure} run {i + 1}/{n_runs}")
                perf = paired_run(paths, paths[cand_key], paths[ref_key], f"{figure}{i}", backend, mode,
                                  paths[bench_key])
                files.append(perf)
                if calibrated is None:
                    calibrated = margins_for(ws, read_perf(perf)[0])
                for margin_key, margins in (("default", default), ("calibrated", calibrated)):
                    found = verdicts_of(perf, margins)
                    for stat, field in (("mean", "verdict"), ("median", "median_verdict")):
                        verdicts.setdefault(f"paired/{margin_key}/{stat}", []).extend(
                            v[field] for v in found.values())
                        if figure == "aa":
                            wrong += [{"run": i, "case": lid, "margins": margin_key, "statistic": stat, **v}
                                      for lid, v in found.items() if v[field] in counted]
                    if margin_key == "default":
                        points += [v["point"] for v in found.values()]
                if i > 0:
                    for mean_v, median_v in unpaired_verdicts(files[0], perf).values():
                        verdicts.setdefault("unpaired/default/mean", []).append(mean_v)
                        verdicts.setdefault("unpaired/default/median", []).append(median_v)
            details[f"{figure}_s"] = time.monotonic() - t0
            details[f"{figure}_verdicts"] = {k: dict(Counter(map(str, v))) for k, v in verdicts.items()}
            details[f"{figure}_points"] = points
            if figure == "aa":
                details["aa_false_verdicts"] = wrong
            details["margin"] = calibrated.describe() if calibrated is not None else None
            median_point = sorted(points)[len(points) // 2] if points else float("nan")
            for key, found in verdicts.items():
                how, margin_key, stat = key.split("/")
                value, hits, n = rate(found, counted)
                label = (f"{how}, ratio of {stat}s, " + ("calibrated margins" if margin_key == "calibrated"
                                                         else "default 1% margin"))
                if figure == "aa":
                    rows.append(row(f"verdicts: A/A false-verdict rate ({label})", value * 100, "%", "goal <= 1%",
                                    value / 0.01 if not math.isnan(value) else None, machine,
                                    f"{hits} of {n} case comparisons called faster/slower; {n_runs} run-bench jobs "
                                    f"x {len(prof['sizes'])} cases, {mode}; identical operator files"
                                    + ("; unpaired = run 0's reference vs run j's candidate (separate jobs)"
                                       if how == "unpaired" else "")))
                else:
                    rows.append(row(f"verdicts: detection rate of a real 5% change ({label})", value * 100, "%",
                                    "goal >= 95%", value / 0.95 if not math.isnan(value) else None, machine,
                                    f"{hits} of {n} case comparisons called faster; the reference does 5% more "
                                    f"work (median measured ratio of means {median_point:.3f}x); {mode}"))

        # (c) probe time to a settled verdict ----------------------------------------------
        _probe_section(paths, ws, mode, backend, prof, args.probe_repeats, machine, rows, details)
    return _finish(args, rows, details, started)


if __name__ == "__main__":
    sys.exit(main())
