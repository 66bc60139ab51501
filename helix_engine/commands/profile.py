"""``helix profile-report`` and ``helix profile-bench`` (thin: parse → engine call → print)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helix_engine.commands import compat
from helix_engine.console import print_json
from helix_engine.sanitize import clean


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    report = sub.add_parser(
        "profile-report",
        help="explain a profile: hotspots, core buckets, bound, patterns to read next",
        description="Read an Ascend profile (ASCEND_PROFILER_OUTPUT/ or mindstudio_profiler_output/) or a "
        "torch.profiler trace directory written by `helix profile-bench`, and report what is hot and why.",
    )
    report.add_argument("--profile-dir", required=True, type=Path, help="profile folder (PROF_*, its parent, …)")
    report.add_argument("--target-op", default=None, help="exact op/kernel name (default: largest total time)")
    report.add_argument("--top", type=int, default=5, help="rows in the hotspot table (default 5)")
    report.add_argument("--json", action="store_true", help="print JSON (the upstream keys plus helix's)")
    report.add_argument("--format", choices=("markdown", "json"), default=None, help="upstream spelling of --json")
    report.set_defaults(func=_profile_report)

    bench = sub.add_parser(
        "profile-bench",
        help="profile one bench case as a job and write the round's profile/ folder",
        description="Run one case of the bench harness under the backend's profiler (torch_npu profiler, "
        "torch.profiler with CUDA activity, or torch.profiler around the interpreter on cpu), then print the report.",
    )
    bench.add_argument("--operator-file", required=True, type=Path)
    bench.add_argument("--case-id", required=True, help="the bench case to profile (required, as upstream)")
    bench.add_argument("--bench-file", type=Path, default=None, help="default: bench_<op>.py beside the operator")
    bench.add_argument("--out", type=Path, default=None, help="profile folder (default: <operator dir>/profile)")
    bench.add_argument("--backend", default=None, choices=("auto", "npu", "cuda", "cpu"))
    bench.add_argument("--target-op", default=None,
                       help="exact op/kernel name the report explains (default: largest total time)")
    bench.add_argument("--top", type=int, default=5)
    bench.add_argument("--json", action="store_true")
    compat.add_job_verbose(bench)
    compat.add_remote_flags(bench)
    bench.set_defaults(func=_profile_bench)


def _profile_report(args: argparse.Namespace) -> int:
    from helix_engine.profile.report import build_report

    report = build_report(args.profile_dir, target_op=args.target_op, top=args.top)
    if args.json or args.format == "json":
        print_json(report.to_json())
    else:
        sys.stdout.write(report.to_markdown())
    return 0


def _profile_bench(args: argparse.Namespace) -> int:
    from helix_engine.commands.eval import user_code_failure
    from helix_engine.eval.usercode import UserCodeError
    from helix_engine.profile.bench import profile_bench

    try:
        outcome = profile_bench(
            operator_file=args.operator_file, case_id=args.case_id, bench_file=args.bench_file,
            out_dir=args.out, backend=args.backend, top=args.top, target_op=args.target_op,
        )
    except UserCodeError as exc:
        return user_code_failure(args, exc)
    if args.json:
        print_json(outcome.to_json())
        return outcome.return_code
    if args.verbose and outcome.job_id:
        print(compat.job_output(args.operator_file, [outcome.job_id]))
    print(f"Return code: {outcome.return_code}")
    shown = clean(outcome.profile_dir) if outcome.profile_dir else "none (a failed profile keeps no folder)"
    print(f"Profile directory: {shown}")
    if outcome.report is not None:
        sys.stdout.write(outcome.report.to_markdown())
        print(f"Hint: `helix profile-report --profile-dir {clean(outcome.profile_dir)} --target-op <op>` re-reads it; "
              "`helix ir capture` shows the compiler's output.")
    elif outcome.message:
        print(clean(outcome.message, multiline=True))
    return outcome.return_code
