"""Profiler CSV aggregation: helix's streaming parser vs the simplest pure-Python aggregation.

Generates a 1M-row ``kernel_details.csv`` (the real 47-column torch_npu header, rows shaped like
the standalone_real_output fixture: 8 kernel names, 1000 steps, varied durations, TAB-suffixed
start times) in a temp dir, then aggregates per-op per-step averages two ways, each in a fresh
interpreter so peak RSS (``ru_maxrss``) is that method's alone:
- helix: `helix_engine.profile.ascend.op_averages_from_kernel_details` (csv.reader over the file,
  sums on the fly, constant memory);
- reference: ``list(csv.DictReader(f))`` then sum by Name and divide by distinct Step Ids.
Both must give the same averages (checked). Set HELIX_BENCH_CSV_ROWS to change the row count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "ascend-profiler" / "standalone_real_output" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
NAMES = ("matmul_kernel", "softmax_kernel", "layernorm_fwd", "gelu_kernel", "Cast", "TransData", "add_kernel", "MemcpyAsync")
STEPS = 1000

HELIX_CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from helix_engine.profile.ascend import op_averages_from_kernel_details
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
out = op_averages_from_kernel_details(sys.argv[1], repeats=50)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "import_rss_mb": base / 1024, "averages": out}))
"""

REFERENCE_CHILD = """
import csv, json, resource, sys, time
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
with open(sys.argv[1], newline="") as f:
    rows = list(csv.DictReader(f))
sums = {}
for r in rows:
    sums[r["Name"]] = sums.get(r["Name"], 0.0) + float(r["Duration(us)"])
steps = len({r["Step Id"] for r in rows})
out = {k: v / steps for k, v in sums.items()}
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "import_rss_mb": base / 1024, "averages": out}))
"""


def generate(path: Path, rows: int) -> None:
    """Write ``rows`` rows shaped like the real fixture's (only Step Id, Name, Duration vary)."""
    header, template = FIXTURE.read_text().splitlines()[:2]
    cells = template.split(",")
    tail = ",".join(cells[12:])
    mid = ",".join(cells[1:5])  # Device_id, Model ID, Task ID, Stream ID
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(header + "\n")
        chunk: list[str] = []
        for i in range(rows):
            name = NAMES[i % len(NAMES)]
            duration = 50.0 + (i * 7919 % 1000) / 10.0
            chunk.append(f"{1 + i % STEPS},{mid},{name},{name},static,AI_CORE,{1778463157324709.118 + i:.3f}\t,"
                         f"{duration:.3f},0,{tail}\n")
            if len(chunk) == 10000:
                f.write("".join(chunk))
                chunk.clear()
        f.write("".join(chunk))


def _child(code: str, path: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", code, str(path), str(ROOT)], capture_output=True, text=True,
                         check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(rows: int | None = None) -> list[dict[str, Any]]:
    rows = rows or int(os.environ.get("HELIX_BENCH_CSV_ROWS", "1000000"))
    with tempfile.TemporaryDirectory(prefix="helix-bench-csv-") as tmp:
        path = Path(tmp) / "kernel_details.csv"
        t = time.perf_counter()
        generate(path, rows)
        gen_s = time.perf_counter() - t
        size_mb = path.stat().st_size / 1e6
        helix = _child(HELIX_CHILD, path)
        ref = _child(REFERENCE_CHILD, path)
    same = helix["averages"].keys() == ref["averages"].keys() and all(
        abs(helix["averages"][k] - ref["averages"][k]) <= 1e-9 * max(1.0, abs(ref["averages"][k])) for k in ref["averages"])
    if not same:
        raise AssertionError("helix and the reference aggregation disagree on the per-op averages")
    where = f"{rows:,} rows, {size_mb:.0f} MB, 47 columns, generated in {gen_s:.1f} s; same averages"
    rss_note = (f"peak RSS of the whole child; interpreter+imports before parsing: helix {helix['import_rss_mb']:.0f} MB, "
                f"reference {ref['import_rss_mb']:.0f} MB; reference peak {ref['peak_rss_mb']:.0f} MB")
    return [
        {"benchmark": "profile_csv", "figure": "kernel_details.csv aggregation time", "value": round(helix["seconds"], 3),
         "unit": "s", "compare_to": "csv.DictReader into a list, then sum", "ratio": round(helix["seconds"] / ref["seconds"], 3),
         "note": f"{where}; reference took {ref['seconds']:.2f} s"},
        {"benchmark": "profile_csv", "figure": "kernel_details.csv aggregation peak memory",
         "value": round(helix["peak_rss_mb"], 1), "unit": "MB", "compare_to": "csv.DictReader into a list, then sum",
         "ratio": round(helix["peak_rss_mb"] / ref["peak_rss_mb"], 4), "note": rss_note},
        {"benchmark": "profile_csv", "figure": "kernel_details.csv aggregation memory above imports",
         "value": round(helix["peak_rss_mb"] - helix["import_rss_mb"], 1), "unit": "MB",
         "compare_to": "csv.DictReader into a list, then sum",
         "ratio": round((helix["peak_rss_mb"] - helix["import_rss_mb"]) / max(ref["peak_rss_mb"] - ref["import_rss_mb"], 1e-9), 6),
         "note": "growth of peak RSS while parsing (what scales with the file)"},
    ]


if __name__ == "__main__":
    for row in run():
        print(json.dumps(row))
