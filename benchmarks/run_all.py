"""Run every benchmark in this folder and print one table of figures and ratios.

    python3 benchmarks/run_all.py                 # every benchmarks/bench_*.py
    python3 benchmarks/run_all.py --only status,examples
    python3 benchmarks/run_all.py --json out.json --markdown

Each ``bench_<name>.py`` exposes ``run() -> list[dict]`` with rows
``{benchmark, figure, value, unit, compare_to, ratio, note}``; ``ratio`` is helix / reference,
both measured in the same run (peers such as the upstream tool are installed and run here, never
quoted; peak memory is measured from outside each process, see ``_measure.py``). A script
that fails is reported as one row with its error and the rest still run. GPU-only scripts
report a note row when no GPU is present. ``--markdown`` prints rows ready for RESULTS.md, with
today's date, this machine and the method (the row's note).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import io
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

COLUMNS = ("benchmark", "figure", "value", "unit", "compare_to", "ratio", "note")


def discover(only: set[str] | None = None, skip: set[str] | None = None) -> list[Path]:
    scripts = sorted(HERE.glob("bench_*.py"))
    names = {p: p.stem.removeprefix("bench_") for p in scripts}
    return [p for p in scripts if (not only or names[p] in only) and names[p] not in (skip or set())]


def machine() -> str:
    """One line: CPU count and model, GPU when nvidia-smi answers, OS."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    parts = [f"{os.cpu_count()} cores ({cpu})"]
    if shutil.which("nvidia-smi"):
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
            if gpu:
                parts.append(f"{len(gpu)}x {gpu[0]}")
        except (OSError, subprocess.SubprocessError):
            pass
    parts.append(f"{platform.system()} {platform.release()}, Python {platform.python_version()}")
    return ", ".join(parts)


def _load() -> str:
    try:
        return "{:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())
    except OSError:
        return "unknown"


def run_script(path: Path) -> tuple[list[dict[str, Any]], float]:
    """Import one bench script and call its run(); a failure becomes one error row."""
    start = time.perf_counter()
    said = io.StringIO()
    name = path.stem.removeprefix("bench_")
    try:
        spec = importlib.util.spec_from_file_location(f"helix_bench_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        with contextlib.redirect_stderr(_Tee(said, sys.stderr)):
            spec.loader.exec_module(module)
            rows = list(module.run())
    except Exception as exc:  # noqa: BLE001 - one broken script must not hide the others
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        rows = [{"benchmark": name, "figure": "(script failed)", "value": math.nan,
                 "unit": "", "compare_to": None, "ratio": None, "note": tb}]
    if not rows:  # GPU-only scripts skip without a GPU; say so in the table, with their reason
        reason = next((line.strip() for line in reversed(said.getvalue().splitlines()) if line.strip()),
                      "the script returned no figures on this machine")
        rows = [{"benchmark": name, "figure": "(no figures on this machine)", "value": math.nan, "unit": "",
                 "compare_to": None, "ratio": None, "note": reason}]
    return [_normalize(r, path) for r in rows], time.perf_counter() - start


class _Tee(io.TextIOBase):
    """Keep a copy of what a script prints to stderr while still showing it."""

    def __init__(self, keep: io.StringIO, show: Any) -> None:
        self.keep, self.show = keep, show

    def write(self, text: str) -> int:
        self.keep.write(text)
        return self.show.write(text)

    def flush(self) -> None:
        self.show.flush()


def _normalize(row: dict[str, Any], path: Path) -> dict[str, Any]:
    out = {k: row.get(k) for k in COLUMNS}
    out["benchmark"] = out["benchmark"] or path.stem.removeprefix("bench_")
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table: benchmark, figure, value+unit, reference, ratio."""
    head = ("benchmark", "figure", "value", "reference", "ratio")
    body = [(r["benchmark"], r["figure"], f"{_fmt(r['value'])} {r['unit'] or ''}".strip(),
             r["compare_to"] or "-", _fmt(r["ratio"])) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    widths[1] = min(widths[1], 60)
    lines = ["  ".join(str(c)[:w].ljust(w) for c, w in zip(head, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c)[:w].ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]], when: str, where: str) -> str:
    """Rows for RESULTS.md: figure, value, reference, ratio, date, machine, method."""
    lines = []
    for r in rows:
        cells = [f"{r['benchmark']}: {r['figure']}", f"{_fmt(r['value'])} {r['unit'] or ''}".strip(),
                 r["compare_to"] or "-", _fmt(r["ratio"]), when, where, (r["note"] or "").replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every benchmarks/bench_*.py and print one table.")
    parser.add_argument("--only", default="", help="comma-separated names (bench_<name>.py) to run")
    parser.add_argument("--skip", default="", help="comma-separated names to leave out")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    parser.add_argument("--markdown", action="store_true", help="also print RESULTS.md table rows")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    scripts = discover(only, skip)
    if not scripts:
        print("no benchmark matched; the scripts are: "
              + ", ".join(p.stem.removeprefix("bench_") for p in discover()), file=sys.stderr)
        return 1
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    where = machine()
    load_before = _load()
    rows: list[dict[str, Any]] = []
    for path in scripts:
        print(f"running {path.name} ...", file=sys.stderr, flush=True)
        got, seconds = run_script(path)
        print(f"  {len(got)} row(s) in {seconds:.1f} s", file=sys.stderr, flush=True)
        rows += got
    print(f"helix benchmarks, {when}, {where}; load average {load_before} at the start, {_load()} at the end "
          "(a shared box is noisy: compare ratios, each measured in one run)\n")
    print(table(rows))
    notes = [f"  [{r['benchmark']}] {r['figure']}: {r['note']}" for r in rows if r.get("note")]
    if notes:
        print("\nmethod / notes:")
        print("\n".join(notes))
    if args.markdown:
        print("\n" + markdown(rows, when, where))
    if args.json:
        args.json.write_text(json.dumps({"date": when, "machine": where, "rows": rows}, indent=2, default=str))
    failed = [r for r in rows if r["figure"] == "(script failed)"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
