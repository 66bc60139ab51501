"""``helix compare-perf --baseline A --compare B [-m ...] [--skip-latency-errors] [--json]``.

Thin: read both perf files (problems become messages, never tracebacks), compare, print the
upstream block (plus our CI lines) or ``--json``. Exit 0 on PASS, 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from helix_engine.console import print_json
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "compare-perf",
        help="compare two perf files (upstream compare-perf, plus confidence intervals)",
        description="Compare a candidate perf file with a baseline perf file: per-case delta, "
        "Avg improvement, Geomean speedup, and bootstrap 95% CIs when both files carry raw "
        "samples. Exit 0 on PASS, 1 otherwise.",
    )
    parser.add_argument("--baseline", required=True, type=Path, help="baseline *_perf.txt")
    parser.add_argument("--compare", required=True, type=Path, help="candidate *_perf.txt")
    parser.add_argument(
        "-m", "--metric-source", dest="metric_source", default="auto",
        choices=("auto", "kernel", "total-op", "all"),
        help="per-case metric (default auto: kernel, else total-op for that case)",
    )
    parser.add_argument(
        "--skip-latency-errors", "--skip-error", dest="skip_latency_errors",
        action="store_true",
        help="skip (and list) cases whose bench failed instead of stopping; still exits 1",
    )
    parser.add_argument("--no-ci", dest="with_ci", action="store_false",
                        help="skip the bootstrap confidence intervals")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run_compare_perf)


def _read(path: Path, role: str) -> tuple[list[Any], list[str]]:
    from helix_engine.perf.artifact import read_perf

    records, problems = read_perf(path)
    fatal = [p for p in problems if p.line is None and p.severity == "error" and not records]
    if fatal:
        why = fatal[0].message.rstrip(".")
        # the safe reader's problems are phrased for a file name ("is missing", "is a folder")
        reason = f"it {why}" if why.startswith(("is ", "was ", "has ")) else why
        raise HelixError(
            f"cannot read the {role} perf file {path}: {reason}. "
            "Pass the *_perf.txt written by run-bench."
        )
    return records, [str(p) for p in problems if p.severity == "error"]


def run_compare_perf(args: argparse.Namespace) -> int:
    from helix_engine.perf import compare

    baseline, b_problems = _read(args.baseline, "baseline")
    candidate, c_problems = _read(args.compare, "compare")
    problems = b_problems + c_problems
    comparisons = []
    if not problems:
        from helix_engine.perf.filecompare import compare_perf_files

        comparisons = compare_perf_files(args.baseline, args.compare, baseline, candidate, args.metric_source,
                                         args.skip_latency_errors, args.with_ci)
    passed = not problems and compare.comparisons_passed(comparisons)
    from helix_engine.perf import roofline
    from helix_engine.perf.calibration import workspace_of_file

    ws = workspace_of_file(args.compare) or workspace_of_file(args.baseline)
    if args.json:
        print_json(
            {
                "baseline": str(args.baseline),
                "compare": str(args.compare),
                "metric_source": args.metric_source,
                "skip_latency_errors": args.skip_latency_errors,
                "passed": passed,
                "problems": problems,
                "comparisons": [compare.comparison_to_json(c) for c in comparisons],
                "roofline": roofline.comparisons_to_json(comparisons, baseline, candidate, ws),
            }
        )
    elif problems:
        print("".join(f"FAIL: {clean(problem)}\n" for problem in problems), end="")
    else:
        print(compare.format_comparisons(comparisons), end="")
        # ours, after upstream's block (which stays byte-identical): achieved GB/s, TFLOP/s, % of peak
        for line in roofline.format_block(comparisons, baseline, candidate, ws):
            print(clean(line))
    return 0 if passed else 1
