"""No side favoured, and the cache state measured (issue 28): A/A paired run-bench jobs on
operators helix did not write, with the L2 flushed and warm, against an interleaved do_bench.

  python3 benchmarks/bench_aa.py --backend cuda --public benchmarks/.public --out DIR   # one H200

Operators (each with cases of 1.5-270 MB, so some fit the H200's L2 and some run under 20 µs):
  rmsnorm    pytorch/torchtitan torchtitan/models/norms.py, its Triton part (autotuned forward and
             backward kernels in one file): PUBLIC/torchtitan_rmsnorm.py
  layernorm  triton-lang/triton python/tutorials/05-layer-norm.py, its forward kernel and autograd
             function: PUBLIC/tutorial_layer_norm.py
  softmax    helix's own example, round 1 (examples/softmax/candidates/round-1.py)
The public files are not in this repository (their code is theirs); fetch them and keep the
Triton part as the header of each file says.

Figures:
(a) A/A: each job is `run-bench --baseline-operator-file` of a file against a byte-identical copy
    in another folder, the two swapped between --operator-file and --baseline-operator-file every
    other job; per case, the paired ratio of means and its verdict under the default 1% margin.
    Any faster/slower is a false verdict (goal <= 1% over >= 200). Per case and cache state, the
    mean ratio with the copy named 'a' as the candidate against the jobs with 'b': a side
    favoured shows as both > 1 (the candidate is favoured) or both < 1.
(b) do_bench: the same pairs, interleaved in one process (triton.testing.do_bench, its L2 flush,
    alternating which side goes first), the ratio of medians; each case's paired ratio (median
    over jobs) is held to it (goal within +-1.5%).
(c) Detection of a real 5% change: a copy kernel whose reference reads and writes 5% more bytes
    (benchmarks/bench_verdicts.py's), verdict must be "faster" (goal >= 95%).

Writes DIR/bench_aa.json (every comparison) after each job, and DIR/bench_aa.md at the end. Not
run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_verdicts  # noqa: E402 - after the sys.path lines above

ROOT = Path(__file__).resolve().parents[1]

NORM_CASES = [  # (id, rows, cols, dtype): bytes read + written from 1.5 MB to 270 MB
    ("fp16_512x768", 512, 768, "float16"),
    ("fp32_1024x1024", 1024, 1024, "float32"),
    ("fp32_8192x512", 8192, 512, "float32"),  # 33.6 MB: inside the H200's L2
    ("bf16_4096x4096", 4096, 4096, "bfloat16"),
    ("bf16_16384x2048", 16384, 2048, "bfloat16"),
    ("fp32_8192x4096", 8192, 4096, "float32"),
]

NORM_BENCH = '''\
# api-name: {name}
# api-kind: triton-wrapper
# kernels: {kernels}
import torch

from helix_engine.harness import device

CASES = {cases!r}


def build_operator_api(m):
    return m.{api}


def build_bench_cases():
    return [{{"id": c[0], "rows": c[1], "cols": c[2], "dtype": c[3], "seed": i, "warmup": 5, "repeats": 50}}
            for i, c in enumerate(CASES)]


def build_bench_case_fn(api, case):
    torch.manual_seed(case["seed"])
    dtype = getattr(torch, case["dtype"])
    x = torch.randn((case["rows"], case["cols"]), dtype=dtype, device=device())
    w = torch.rand(case["cols"], dtype=dtype, device=device()) + 0.5
{extra}


def build_bench_case_work(case):
    elt = torch.empty((), dtype=getattr(torch, case["dtype"])).element_size()
    return {{"bytes": 2 * case["rows"] * case["cols"] * elt, "dtype": getattr(torch, case["dtype"])}}
'''

RMS_CALL = '''    return lambda: api(x, w, 1e-6)'''
LN_CALL = '''    b = torch.randn(case["cols"], dtype=dtype, device=device())
    return lambda: api(x, (case["cols"],), w, b, 1e-5)'''

DETECT_SIZES = [2**22, 2**24, 2**25, 2**26]  # floats: 16 MB (~8 µs) to 256 MB read + written


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def write_workspace(root: Path, public: Path) -> dict[str, dict[str, Path]]:
    """Per operator a workspace <op>_ws/ with baseline/<op>.py and b/<op>.py (byte-identical
    copies) and bench_<op>.py, so `helix calibrate` (which needs baseline/) measures its floors
    there; and detect_ws/ with plain/scale.py, more5/scale.py (5% more bytes) and its bench."""
    sources = {
        "rmsnorm": (public / "torchtitan_rmsnorm.py", NORM_BENCH.format(
            name="rmsnorm", kernels="_rms_norm_fwd_kernel", cases=NORM_CASES, api="fused_rms_norm_fn",
            extra=RMS_CALL)),
        "layernorm": (public / "tutorial_layer_norm.py", NORM_BENCH.format(
            name="layernorm", kernels="_layer_norm_fwd_fused", cases=NORM_CASES, api="layer_norm", extra=LN_CALL)),
        "softmax": (ROOT / "examples/softmax/candidates/round-1.py",
                    (ROOT / "examples/softmax/bench_softmax.py").read_text(encoding="utf-8")),
    }
    out: dict[str, dict[str, Path]] = {}
    for name, (src, bench_text) in sources.items():
        if not src.is_file():
            raise SystemExit(f"{src} is missing: see this file's docstring for where it comes from")
        ws = root / f"{name}_ws"
        (ws / ".helix").mkdir(parents=True, exist_ok=True)
        paths = {"bench": ws / f"bench_{name}.py", "ws": ws}
        for copy, folder in (("a", "baseline"), ("b", "b")):
            dest = ws / folder / f"{name}.py"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            paths[copy] = dest
        paths["bench"].write_text(bench_text, encoding="utf-8")
        shutil.copyfile(src, ws / f"{name}.py")  # the workspace's operator: what names baseline/<op>.py
        out[name] = paths
    ws = root / "detect_ws"
    (ws / ".helix").mkdir(parents=True, exist_ok=True)
    paths = {"bench": ws / "bench_scale.py", "ws": ws}
    for copy, folder, extra in (("plain", "baseline", 0.0), ("more5", "more5", 0.05)):
        dest = ws / folder / "scale.py"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(bench_verdicts.CUDA_OP.format(extra=extra), encoding="utf-8")
        paths[copy] = dest
    paths["bench"].write_text(bench_verdicts.BENCH.format(kind="triton-wrapper", sizes=DETECT_SIZES, warmup=5,
                                                          repeats=50), encoding="utf-8")
    shutil.copyfile(paths["plain"], ws / "scale.py")
    out["detect"] = paths
    return out


def calibrate_ws(ws: Path, l2: str, backend: str, rounds: int) -> dict[str, Any]:
    """`helix calibrate` in ``ws`` with the L2 ``l2``: its per-case margins (or the error)."""
    from helix_engine.eval.calibrate import calibrate

    os.environ["HELIX_L2"] = l2
    t0 = time.monotonic()
    got = calibrate(ws, rounds=rounds, backend=backend)
    return {"exit_code": got.get("exit_code"), "s": time.monotonic() - t0, "error": got.get("error"),
            "margins": {k: v.get("margin") for k, v in (got.get("cases") or {}).items()}}


def one_job(cand: Path, ref: Path, bench: Path, out: Path, l2: str, backend: str, mode: str | None
            ) -> tuple[dict[str, dict[str, Any]], dict[str, str], float]:
    """One paired run-bench job with the L2 ``l2``: per case its verdict numbers under the default
    1% margin and, as ``calibrated_verdict``, under the workspace's calibrated margins when its
    calibration matches (what the promotion rule uses), each record's cache state, the wall time."""
    from helix_engine.eval.bench import run_bench
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.calibration import margins_for
    from helix_engine.perf.margins import NoiseMargins

    os.environ["HELIX_L2"] = l2
    t0 = time.monotonic()
    result = run_bench(cand, bench, mode, output=out, backend=backend, baseline_operator_file=ref)
    took = time.monotonic() - t0
    if result.perf_file is None:
        raise RuntimeError(f"the paired run-bench failed: {result.message or result.text[-600:]}")
    found = bench_verdicts.verdicts_of(out, NoiseMargins())
    margins = margins_for(bench.parent, read_perf(out)[0])
    if margins.source == "calibrated":
        for lid, v in bench_verdicts.verdicts_of(out, margins).items():
            found[lid].update(calibrated_verdict=v["verdict"], calibrated_margin=v["margin"])
    states = {r.case_label: str(r.l2) for r in read_perf(out)[0]}
    return found, states, took


DOBENCH = r'''
import importlib.util, json, statistics, sys
import torch
from triton.testing import do_bench, do_bench_cudagraph
spec = json.loads(sys.argv[1])
def load(path, name):
    s = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m
out = {}
for op, files in spec["ops"].items():
    bench = load(files["bench"], f"bench_{op}")
    apis = {side: bench.build_operator_api(load(files[side], f"{op}_{side}")) for side in files["sides"]}
    for case in bench.build_bench_cases():
        fns = {side: bench.build_bench_case_fn(api, case) for side, api in apis.items()}
        times = {side: [] for side in fns}
        graph = {side: [] for side in fns}
        for fn in fns.values():
            fn(); torch.cuda.synchronize()
        for r in range(spec["reps"]):
            order = list(fns) if r % 2 == 0 else list(fns)[::-1]
            for side in order:
                times[side].append(float(do_bench(fns[side], warmup=10, rep=50, return_mode="median")) * 1e3)
                graph[side].append(float(do_bench_cudagraph(fns[side], rep=50, return_mode="median")) * 1e3)
        out[f"{op}/{case['id']}"] = times
        out[f"graph:{op}/{case['id']}"] = graph
print(json.dumps(out))
'''


def dobench_pairs(paths: dict[str, dict[str, Path]], reps: int) -> dict[str, dict[str, list[float]]]:
    """(b): per operator and case, do_bench medians (µs) of each side, interleaved in one process."""
    spec = {"reps": reps, "ops": {}}
    for op, p in paths.items():
        sides = ["plain", "more5"] if op == "detect" else ["a", "b"]
        spec["ops"][op] = {"bench": str(p["bench"]), "sides": sides, **{s: str(p[s]) for s in sides}}
    env = dict(os.environ, HELIX_DEVICE="cuda", HELIX_BACKEND="cuda", PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}")
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-c", DOBENCH, json.dumps(spec)], capture_output=True, text=True,
                          env=env, check=False, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"do_bench child failed: {proc.stderr[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(comparisons: list[dict[str, Any]], dob: dict[str, Any] | None) -> tuple[list[str], dict[str, Any]]:
    """The report lines and the figures: false verdicts per cache state, the side bias per case,
    the paired ratio against do_bench's, detection."""
    lines: list[str] = []
    figures: dict[str, Any] = {}
    by_state: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in comparisons:
        by_state[(c["figure"], c["l2"])].append(c)  # type: ignore[index]
    for (figure, l2), rows in sorted(by_state.items()):
        if figure == "aa":
            wrong = [r for r in rows if r["verdict"] in ("faster", "slower")]
            wrong_med = [r for r in rows if r["median_verdict"] in ("faster", "slower")]
            rate = len(wrong) / len(rows)
            cal = [r for r in rows if r.get("calibrated_verdict")]
            wrong_cal = [r for r in cal if r["calibrated_verdict"] in ("faster", "slower")]
            figures[f"aa/{l2}"] = {"false": len(wrong), "n": len(rows), "rate": rate,
                                   "false_median": len(wrong_med), "false_calibrated": len(wrong_cal),
                                   "n_calibrated": len(cal)}
            lines.append(f"A/A, L2 {l2}: {len(wrong)} of {len(rows)} per-case verdicts false ({100 * rate:.2f}%; "
                         f"ratio of medians: {len(wrong_med)}) with the default 1% margin; goal <= 1%")
            if cal:
                lines.append(f"A/A, L2 {l2}, calibrated margins (helix calibrate first, as the promotion rule "
                             f"uses them): {len(wrong_cal)} of {len(cal)} false "
                             f"({100 * len(wrong_cal) / len(cal):.2f}%)")
                for r in wrong_cal:
                    lines.append(f"    false (calibrated, margin {r['calibrated_margin']:.3f}): {r['op']}/{r['case']} "
                                 f"job {r['job']} {r['point']:.4f}x [{r['ci'][0]:.4f}, {r['ci'][1]:.4f}]")
            for r in wrong:
                lines.append(f"    false: {r['op']}/{r['case']} job {r['job']} cand={r['cand']} "
                             f"{r['point']:.4f}x [{r['ci'][0]:.4f}, {r['ci'][1]:.4f}] {r['verdict']}")
            cases: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            for r in rows:
                cases[f"{r['op']}/{r['case'].removeprefix('latency-')}"][r["cand"]].append(r["point"])
            for key, sides in sorted(cases.items()):
                a, b = sides.get("a", []), sides.get("b", [])
                all_points = a + b
                med = statistics.median(all_points)
                dob_ratio = graph_ratio = None
                if dob and key in dob:
                    t = dob[key]
                    dob_ratio = statistics.median(t["b"]) / statistics.median(t["a"])  # a as candidate: ref/cand
                if dob and f"graph:{key}" in dob:
                    t = dob[f"graph:{key}"]
                    graph_ratio = statistics.median(t["b"]) / statistics.median(t["a"])
                figures.setdefault(f"cases/{l2}", {})[key] = {
                    "median_point": med, "cand_a_mean": statistics.fmean(a) if a else None,
                    "cand_b_mean": statistics.fmean(b) if b else None, "n": len(all_points),
                    "min": min(all_points), "max": max(all_points), "dobench_ratio": dob_ratio,
                    "median_us": statistics.median(r["cand_us"] for r in rows
                                                   if f"{r['op']}/{r['case'].removeprefix('latency-')}" == key
                                                   and r["cand_us"]),
                    "dobench_us": statistics.median(dob[key]["a"]) if dob and key in dob else None,
                    "graph_ratio": graph_ratio,
                    "graph_us": statistics.median(dob[f"graph:{key}"]["a"]) if graph_ratio else None}
                f = figures[f"cases/{l2}"][key]
                fav = ("candidate favoured" if (f["cand_a_mean"] or 1) > 1 and (f["cand_b_mean"] or 1) > 1 else
                       "reference favoured" if (f["cand_a_mean"] or 1) < 1 and (f["cand_b_mean"] or 1) < 1 else "")
                lines.append(f"    {key}: paired {med:.4f}x [{f['min']:.4f}-{f['max']:.4f}] n={f['n']}; cand=a "
                             f"{_fmt(f['cand_a_mean'])} cand=b {_fmt(f['cand_b_mean'])} {fav}; "
                             f"{f['median_us']:.2f} us"
                             + (f"; do_bench {dob_ratio:.4f}x ({f['dobench_us']:.2f} us), paired/do_bench "
                                f"{med / dob_ratio:.4f}" if dob_ratio else "")
                             + (f"; do_bench_cudagraph {graph_ratio:.4f}x ({f['graph_us']:.2f} us), paired/graph "
                                f"{med / graph_ratio:.4f}" if graph_ratio else ""))
        else:
            hits = [r for r in rows if r["verdict"] == "faster"]
            figures[f"detect/{l2}"] = {"faster": len(hits), "n": len(rows), "rate": len(hits) / len(rows)}
            points = defaultdict(list)
            for r in rows:
                points[r["case"]].append(r["point"])
            shown = []
            for k, v in sorted(points.items()):
                key = "detect/" + k.removeprefix("latency-")
                ref = (f" (do_bench {statistics.median(dob[key]['more5']) / statistics.median(dob[key]['plain']):.4f}x)"
                       if dob and key in dob else "")
                shown.append(f"{k} {statistics.median(v):.4f}x{ref}")
            cal = [r for r in rows if r.get("calibrated_verdict")]
            hits_cal = [r for r in cal if r["calibrated_verdict"] == "faster"]
            figures[f"detect/{l2}"].update(faster_calibrated=len(hits_cal), n_calibrated=len(cal))
            lines.append(f"5% change, L2 {l2}: {len(hits)} of {len(rows)} called faster "
                         f"({100 * len(hits) / len(rows):.1f}%) with the default margin"
                         + (f", {len(hits_cal)} of {len(cal)} with calibrated margins" if cal else "")
                         + "; goal >= 95%; " + ", ".join(shown))
    return lines, figures


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--public", type=Path, default=ROOT / "benchmarks/.public")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-aa"))
    parser.add_argument("--l2", default="flushed,warm", help="cache states, comma-separated, interleaved")
    parser.add_argument("--aa-jobs", type=int, default=8, help="A/A jobs per operator and cache state")
    parser.add_argument("--ops", default="rmsnorm,layernorm,softmax")
    parser.add_argument("--detect-jobs", type=int, default=0, help="5%%-change jobs per cache state")
    parser.add_argument("--dobench-reps", type=int, default=7, help="(b): do_bench medians per side; 0: skip")
    parser.add_argument("--budget-s", type=float, default=520.0, help="no job starts after this many seconds")
    parser.add_argument("--bench-mode", default=None)
    parser.add_argument("--first-job", type=int, default=0, help="job numbering offset (a second call)")
    parser.add_argument("--calibration-dir", type=Path, default=None,
                        help="where each workspace's calibration.json is kept (<op>.json): written after "
                        "calibrating, read instead of calibrating when --calibrate-rounds is 0")
    parser.add_argument("--calibrate-rounds", type=int, default=0,
                        help="`helix calibrate --rounds N` per workspace and cache state first (0: none); the A/A "
                        "and detection verdicts are then also judged with the calibrated margins")
    args = parser.parse_args(argv)
    os.environ["HELIX_BACKEND"] = args.backend
    started = time.monotonic()
    states = [s for s in args.l2.split(",") if s]
    ops = [o for o in args.ops.split(",") if o]
    args.out.mkdir(parents=True, exist_ok=True)
    comparisons: list[dict[str, Any]] = []
    details: dict[str, Any] = {"machine": f"{args.backend}: {platform.node()} ({os.cpu_count()} cores)",
                               "states": states, "ops": ops, "jobs": [], "errors": []}

    def save() -> None:
        (args.out / "bench_aa.json").write_text(json.dumps({"details": details, "comparisons": comparisons},
                                                           indent=1, default=str) + "\n", encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="helix-aa-") as tmp:
        paths = write_workspace(Path(tmp), args.public)
        dob = None
        if args.dobench_reps and args.backend == "cuda":
            log("(b) do_bench, interleaved")
            t0 = time.monotonic()
            dob = dobench_pairs({k: v for k, v in paths.items() if k in ops or (k == "detect" and args.detect_jobs)},
                                args.dobench_reps)
            details["dobench"] = dob
            details["dobench_s"] = time.monotonic() - t0
            save()
        details["calibration"] = {}
        for op in ops + (["detect"] if args.detect_jobs else []):
            kept = args.calibration_dir / f"{op}.json" if args.calibration_dir else None
            target = paths[op]["ws"] / ".helix" / "calibration.json"
            if args.calibrate_rounds:  # one calibration per workspace: .helix/calibration.json is one file
                log(f"calibrate {op} (L2 {states[0]}, {args.calibrate_rounds} rounds)")
                got = calibrate_ws(paths[op]["ws"], states[0], args.backend, args.calibrate_rounds)
                details["calibration"][op] = got
                log(f"calibrate {op}: {got}")
                if kept is not None and target.is_file():
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(target, kept)
            elif kept is not None and kept.is_file():
                shutil.copyfile(kept, target)
                details["calibration"][op] = {"reused": str(kept)}
        save()
        plan: list[tuple[str, str, int]] = []
        for job in range(args.first_job, args.first_job + max(args.aa_jobs, args.detect_jobs)):
            for op in ops + ["detect"]:
                n = args.detect_jobs if op == "detect" else args.aa_jobs
                if job - args.first_job < n:
                    plan += [(op, l2, job) for l2 in (states if job % 2 == 0 else states[::-1])]
        for i, (op, l2, job) in enumerate(plan):
            if time.monotonic() - started > args.budget_s:
                details["stopped"] = f"budget: {len(plan) - i} of {len(plan)} jobs not started"
                log(details["stopped"])
                break
            p = paths[op]
            if op == "detect":
                cand, ref, cand_name = p["plain"], p["more5"], "plain"
            else:
                cand_name = "a" if job % 2 == 0 else "b"
                cand, ref = p[cand_name], p["b" if cand_name == "a" else "a"]
            out = p["bench"].parent / f"{op}-{l2}-{job}_perf.txt"
            try:
                found, recorded, took = one_job(cand, ref, p["bench"], out, l2, args.backend, args.bench_mode)
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                details["errors"].append({"op": op, "l2": l2, "job": job, "error": str(exc)[-1500:]})
                log(f"{op} {l2} job {job}: FAILED {str(exc)[-400:]}")
                save()
                continue
            from helix_engine.perf.artifact import read_perf

            cand_us = {r.latency_id: r.kernel_avg_time_us for r in read_perf(out)[0]}
            details["jobs"].append({"op": op, "l2": l2, "job": job, "s": took, "recorded_l2": recorded})
            for case, v in found.items():
                comparisons.append({"figure": "detect" if op == "detect" else "aa", "op": op, "case": case,
                                    "l2": l2, "job": job, "cand": cand_name, "cand_us": cand_us.get(case), **v})
            log(f"{op} {l2} job {job} ({cand_name} as candidate): {took:.1f} s; "
                + ", ".join(f"{c} {v['point']:.3f}{'*' if v['verdict'] in ('faster', 'slower') else ''}"
                            for c, v in found.items()))
            save()
    lines, figures = summarize(comparisons, dob)
    details["figures"] = figures
    details["total_s"] = time.monotonic() - started
    save()
    text = "\n".join(lines) + "\n"
    (args.out / "bench_aa.md").write_text(text, encoding="utf-8")
    print(text)
    log(f"done in {details['total_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
