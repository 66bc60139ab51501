"""Profiler CSV aggregation on a generated 1M-row kernel_details.csv: helix vs polars' own
read-and-group vs a streaming csv.DictReader, measured in the same run.

The file has the real 47-column torch_npu header, rows shaped like the standalone_real_output
fixture (8 kernel names, 1000 steps, varied durations, TAB-suffixed start times), written to a
temp dir with a matching op_statistic.csv. Each method is a fresh process measured from
outside (`_measure.run`: wall time of the whole process, interpreter and imports included;
CPU time; peak RSS by GNU time), and prints its own in-process parse time too:

- helix: `helix_engine.profile.ascend.op_averages_from_kernel_details` (run-bench's per-op
  per-step averages: polars over `CHUNK_BYTES` chunks read from the safe reader's descriptor);
- polars: ``pl.scan_csv(path)`` → the three columns, cached, ``group_by("Name")`` sum of
  durations ÷ distinct Step Ids (polars reading the file its own way, from the path; of the
  forms tried, the fastest here: the streaming engine and two uncached scans were ~1.7x slower);
- csv.DictReader: the same sums row by row, streaming (constant memory);
- helix profile-report: the whole ``helix profile-report --json`` command on the folder.

helix and polars are interleaved ``HELIX_BENCH_CSV_REPEATS`` times (default 3; medians with
min–max); DictReader and profile-report run once (they are the slow ones). All three averages
must agree (checked). ``HELIX_BENCH_CSV_ROWS`` changes the row count.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from helix_engine.profile.csvstream import CHUNK_BYTES  # noqa: E402 - the figure's note names it

import _measure  # noqa: E402 - after the sys.path line above

FIXTURE = (ROOT / "tests" / "fixtures" / "ascend-profiler" / "standalone_real_output" / "ASCEND_PROFILER_OUTPUT"
           / "kernel_details.csv")
NAMES = ("matmul_kernel", "softmax_kernel", "layernorm_fwd", "gelu_kernel", "Cast", "TransData", "add_kernel", "MemcpyAsync")
STEPS = 1000
MEMORY_TARGET_MIB = 250

HELIX_CHILD = """
import json, sys, time
t = time.perf_counter()
from helix_engine.profile.ascend import op_averages_from_kernel_details
out = op_averages_from_kernel_details(sys.argv[1], repeats=50)
print(json.dumps({"seconds": time.perf_counter() - t, "averages": out}))
"""

POLARS_CHILD = """
import json, sys, time
t = time.perf_counter()
import polars as pl
frame = pl.scan_csv(sys.argv[1]).select("Step Id", "Name", "Duration(us)").cache()
sums, steps = pl.collect_all([frame.group_by("Name").agg(pl.col("Duration(us)").sum()),
                              frame.select(pl.col("Step Id").n_unique())])
n = steps.item()
print(json.dumps({"seconds": time.perf_counter() - t, "averages": {k: v / n for k, v in sums.iter_rows()}}))
"""

DICTREADER_CHILD = """
import csv, json, sys, time
t = time.perf_counter()
sums, steps = {}, set()
with open(sys.argv[1], newline="") as f:
    for r in csv.DictReader(f):
        sums[r["Name"]] = sums.get(r["Name"], 0.0) + float(r["Duration(us)"])
        steps.add(r["Step Id"])
print(json.dumps({"seconds": time.perf_counter() - t, "averages": {k: v / len(steps) for k, v in sums.items()}}))
"""


def generate(folder: Path, rows: int) -> Path:
    """``folder/ASCEND_PROFILER_OUTPUT/kernel_details.csv`` with ``rows`` rows shaped like the
    real fixture's (only Step Id, Name, Duration vary) and a matching op_statistic.csv."""
    out = folder / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    header, template = FIXTURE.read_text().splitlines()[:2]
    cells = template.split(",")
    tail = ",".join(cells[12:])
    mid = ",".join(cells[1:5])  # Device_id, Model ID, Task ID, Stream ID
    totals = dict.fromkeys(NAMES, 0.0)
    counts = dict.fromkeys(NAMES, 0)
    with open(out / "kernel_details.csv", "w", encoding="utf-8", newline="") as f:
        f.write(header + "\n")
        chunk: list[str] = []
        for i in range(rows):
            name = NAMES[i % len(NAMES)]
            duration = 50.0 + (i * 7919 % 1000) / 10.0
            totals[name] += duration
            counts[name] += 1
            chunk.append(f"{1 + i % STEPS},{mid},{name},{name},static,AI_CORE,{1778463157324709.118 + i:.3f}\t,"
                         f"{duration:.3f},0,{tail}\n")
            if len(chunk) == 10000:
                f.write("".join(chunk))
                chunk.clear()
        f.write("".join(chunk))
    grand = sum(totals.values()) or 1.0
    lines = ["OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"]
    for name in NAMES:
        if counts[name]:
            lines.append(f"{name},AI_CORE,{counts[name]},{totals[name]:.3f},50,{totals[name] / counts[name]:.3f},"
                         f"149.9,{totals[name] / grand * 100:.3f}")
    (out / "op_statistic.csv").write_text("\n".join(lines) + "\n")
    return out / "kernel_details.csv"


def _child(code: str, path: Path) -> tuple[_measure.Run, dict[str, Any]]:
    got = _measure.run([sys.executable, "-c", code, str(path)], cwd=ROOT.parent, timeout=1800,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    return got, json.loads(got.stdout.strip().splitlines()[-1])


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(b[k])) for k in b)


def run(rows: int | None = None, repeats: int | None = None) -> list[dict[str, Any]]:
    rows = rows or int(os.environ.get("HELIX_BENCH_CSV_ROWS", "1000000"))
    repeats = repeats or int(os.environ.get("HELIX_BENCH_CSV_REPEATS", "3"))
    runs: dict[str, list[_measure.Run]] = {"helix": [], "polars": []}
    inside: dict[str, list[float]] = {"helix": [], "polars": []}
    with tempfile.TemporaryDirectory(prefix="helix-bench-csv-") as tmp:
        path = generate(Path(tmp) / "profile", rows)
        size_mb = path.stat().st_size / 1e6
        answers = {}
        for _ in range(repeats):
            for name, code in (("helix", HELIX_CHILD), ("polars", POLARS_CHILD)):
                got, out = _child(code, path)
                runs[name].append(got)
                inside[name].append(out["seconds"])
                answers[name] = out["averages"]
        load = _measure.load_average()
        dict_run, dict_out = _child(DICTREADER_CHILD, path)
        answers["csv.DictReader"] = dict_out["averages"]
        script = _measure.which_python_script("helix", sys.executable)
        report_argv = [*([script] if script else [sys.executable, "-m", "helix_engine"]),
                       "profile-report", "--profile-dir", str(path.parent.parent), "--json"]
        report_run = _measure.run(report_argv, cwd=ROOT.parent, timeout=1800)
        report = json.loads(report_run.stdout)
    if not (_same(answers["helix"], answers["polars"]) and _same(answers["helix"], answers["csv.DictReader"])):
        raise AssertionError(f"the aggregations disagree: {answers}")
    if report["op_summary"]["count"] != rows // len(NAMES) + (1 if rows % len(NAMES) else 0):
        raise AssertionError(f"profile-report counted {report['op_summary']['count']} matmul_kernel invocations")

    def med(name: str, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in runs[name])

    where = (f"{rows:,} rows, {size_mb:.0f} MB, 47 columns; same averages from all three; {load}; "
             f"{runs['helix'][0].method}")
    helix_wall, polars_wall = med("helix", "wall_s"), med("polars", "wall_s")
    cpu = (f"; CPU median helix {med('helix', 'cpu_s'):.2f} s, polars {med('polars', 'cpu_s'):.2f} s"
           if runs["helix"][0].cpu_s is not None else "")
    return [
        {"benchmark": "profile_csv", "figure": "kernel_details.csv per-op averages, whole process: wall",
         "value": round(helix_wall, 3), "unit": "s",
         "compare_to": f"polars scan_csv + group_by, same run: {_measure.spread([r.wall_s for r in runs['polars']])} s",
         "ratio": round(helix_wall / polars_wall, 3),
         "note": f"helix {_measure.spread([r.wall_s for r in runs['helix']])} s{cpu}; interpreter and imports "
                 f"included on both sides; {where}"},
        {"benchmark": "profile_csv", "figure": "kernel_details.csv per-op averages, parse only (in process)",
         "value": round(statistics.median(inside["helix"]), 3), "unit": "s",
         "compare_to": f"polars, same run: {_measure.spread(inside['polars'])} s",
         "ratio": round(statistics.median(inside["helix"]) / statistics.median(inside["polars"]), 3),
         "note": f"helix {_measure.spread(inside['helix'])} s: time from the first import of the parser to "
                 "the averages (polars' import included on both sides)"},
        {"benchmark": "profile_csv", "figure": "kernel_details.csv per-op averages: peak RSS",
         "value": round(med("helix", "peak_mib"), 1), "unit": "MiB",
         "compare_to": f"polars, same run: {_measure.spread([r.peak_mib for r in runs['polars']])} MiB",
         "ratio": round(med("helix", "peak_mib") / med("polars", "peak_mib"), 3),
         "note": f"helix {_measure.spread([r.peak_mib for r in runs['helix']])} MiB (target ≤ {MEMORY_TARGET_MIB} "
                 f"MiB); polars' own scan holds the whole file in memory, helix reads {CHUNK_BYTES >> 20} MiB "
                 "chunks"},
        {"benchmark": "profile_csv", "figure": "kernel_details.csv per-op averages: csv.DictReader, whole process",
         "value": round(dict_run.wall_s, 3), "unit": "s", "compare_to": "helix, same run (median)",
         "ratio": round(dict_run.wall_s / helix_wall, 3),
         "note": f"one run, streaming (sums on the fly), {dict_run.peak_mib:.0f} MiB peak; in process "
                 f"{dict_out['seconds']:.2f} s"},
        {"benchmark": "profile_csv", "figure": f"helix profile-report --json on the {rows:,}-row folder: wall",
         "value": round(report_run.wall_s, 3), "unit": "s", "compare_to": "polars read-and-group, same run (median)",
         "ratio": round(report_run.wall_s / polars_wall, 3),
         "note": f"one run, {report_run.peak_mib:.0f} MiB peak"
                 + (f", CPU {report_run.cpu_s:.2f} s" if report_run.cpu_s is not None else "")
                 + "; op_statistic + every op's totals + the target's invocations in detail"},
    ]


if __name__ == "__main__":
    for row in run():
        print(json.dumps(row))
