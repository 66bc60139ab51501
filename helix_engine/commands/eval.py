"""``helix run-test``, ``run-bench``, ``probe-bench`` and ``prepare-baseline``.

Thin: parse → call the engine function in helix_engine.eval → print its text or ``--json``.
Nothing here imports torch or triton: operator code runs only in job children.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix_engine.commands import compat
from helix_engine.commands.goal_flags import add_goal_flags, goals_line, record_from_args
from helix_engine.commands.workspace_flag import add_workspace_flag
from helix_engine.console import print_json
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean

BACKEND_CHOICES = ("auto", "npu", "cuda", "cpu")
BENCH_MODE_CHOICES = ("torch-npu-profiler", "msprof", "torch-profiler", "device-event", "perf-counter", "standalone")
BENCH_MODE_HELP = "one of: " + ", ".join(BENCH_MODE_CHOICES)


def _progress(args: argparse.Namespace) -> Any:
    """Live per-case lines on stderr when it is a terminal (never in --json mode)."""
    if getattr(args, "json", False) or not sys.stderr.isatty():
        return None

    def on_event(event: dict[str, Any]) -> None:
        if event.get("event") == "case_started":
            print(f"[{event.get('index', 0) + 1}/{event.get('total', '?')}] {clean(event.get('case_id'))} ...",
                  file=sys.stderr, flush=True)

    return on_event


def _devices(text: str | None) -> list[str] | None:
    if not text:
        return None
    from helix_engine.jobs.devices import parse_devices

    try:
        return parse_devices(text)
    except ValueError as exc:
        raise HelixError(f"--devices {text!r}: {exc}") from None


L2_HELP = ("the cache state to measure in: flushed (the L2 written over before every timed repetition, the default "
           "on CUDA: what a kernel meets in a model) or warm (each repetition finds what the one before left, the "
           "default of the NPU profiler modes and the CPU); recorded in each perf record as l2")


def _l2_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--l2", choices=("flushed", "warm"), default=None, help=L2_HELP)


def _use_l2(args: argparse.Namespace) -> None:
    """``--l2`` for every job this command starts (the backend adapter reads it: eval/backends)."""
    from helix_engine.eval.backends.base import L2_ENV

    if getattr(args, "l2", None):
        os.environ[L2_ENV] = args.l2


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default=None,
                        help="where to run (default: $HELIX_BACKEND, else auto-detect)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _run_test_arguments(p: argparse.ArgumentParser) -> None:
    """run-test's flags, shared by its sibling-skill aliases (run-test-baseline|convert|optimize)."""
    p.add_argument("--operator-file", required=True, type=Path)
    p.add_argument("--test-file", type=Path, help="default: test_<op>.py / differential_test_<op>.py")
    ref = p.add_mutually_exclusive_group()
    ref.add_argument("--ref-operator-file", "--baseline-operator-file", dest="ref_operator_file", type=Path,
                     metavar="REF_OP", help="reference operator, e.g. baseline/<op>.py (required for a round "
                     "candidate; its <stem>_result.pt is reused when present)")
    ref.add_argument("--ref-result", "--baseline-result", dest="ref_result", type=Path, metavar="REF_PT",
                     help="reference result archive (<stem>_result.pt)")
    p.add_argument("--test-mode", choices=("standalone", "differential"))
    p.add_argument("--accuracy-mode", choices=("npu-contract", "dtype-close"),
                   help="default npu-contract (env HELIX_RUN_TEST_ACCURACY_MODE); on cuda and cpu the PASS "
                   "line names the mode used")
    p.add_argument("--case-id", help="run one differential case, in memory (no .pt written)")
    p.add_argument("--verbose", action="store_true", help="keep [WARNING] lines")
    p.add_argument("-o", "--output", dest="report_file", type=Path, metavar="FILE",
                   help="also write the printed result (text, or JSON with --json) to FILE")
    compat.add_remote_flags(p)
    _common(p)


def register(sub: Any) -> None:
    run_test_names = {"run-test": ("run the operator's test in a job and check accuracy", False),
                      **compat.RUN_TEST_SIBLINGS}
    for name, (help_text, _) in run_test_names.items():
        p = sub.add_parser(name, help=help_text,
                           description="Run a standalone or differential test for an operator (in a job "
                           "child) and judge accuracy with accuracy mode npu-contract (upstream's NPU "
                           "thresholds, on every backend) or dtype-close."
                           + ("" if name == "run-test" else f" {name} is the sibling skill's name: {help_text}."))
        _run_test_arguments(p)
        p.set_defaults(func=cmd_run_test, sibling=None if name == "run-test" else name)

    p = sub.add_parser("run-bench", help="benchmark the operator in a job and write <op>_perf.txt",
                       description="Benchmark every case of the bench harness and write the perf "
                       "JSONL; with --baseline-operator-file also print compare-perf.")
    p.add_argument("--operator-file", required=True, type=Path)
    p.add_argument("--bench-file", type=Path, help="default: bench_<op>.py")
    p.add_argument("--bench-mode", choices=BENCH_MODE_CHOICES, metavar="MODE",
                   help=BENCH_MODE_HELP + "; default: the backend's default")
    _l2_flag(p)
    p.add_argument("-o", "--output", type=Path, help="default: <op_stem>_perf.txt beside the operator")
    p.add_argument("--baseline-operator-file", type=Path,
                   help="reference operator: measured in the same job, interleaved (see --unpaired)")
    p.add_argument("--against", choices=("baseline", "parent", "best"),
                   help="reference from the workspace: baseline/, the round's parent, or the promoted best round")
    p.add_argument("--unpaired", dest="paired", action="store_false",
                   help="reuse the reference's perf file (or bench it first) instead of measuring both in one job")
    p.add_argument("-m", "--metric-source", default="auto", choices=("auto", "kernel", "total-op", "all"))
    p.add_argument("--devices", "--npu-devices", dest="devices", help="device pool, e.g. 0,2,4-7")
    p.add_argument("--skip-latency-errors", "--skip-error", dest="skip_latency_errors", action="store_true")
    compat.add_job_verbose(p)
    compat.add_remote_flags(p)
    _common(p)
    p.set_defaults(func=cmd_run_bench)

    p = sub.add_parser("probe-bench", help="fast, non-authoritative screen: candidate vs baseline",
                       description="Capped bench of baseline and candidate and a likely_gain / "
                       "likely_regression / inconclusive verdict. Run canonical run-bench before any claim.")
    p.add_argument("--operator-file", required=True, type=Path)
    p.add_argument("--baseline-operator-file", type=Path, help="reference operator (or --against)")
    p.add_argument("--against", choices=("baseline", "parent", "best"),
                   help="reference from the workspace: baseline/, the round's parent, or the promoted best round")
    p.add_argument("--unpaired", dest="paired", action="store_false",
                   help="upstream's probe: a cached baseline probe, then the candidate in its own job")
    p.add_argument("--bench-file", type=Path)
    p.add_argument("--bench-mode", choices=BENCH_MODE_CHOICES, metavar="MODE", help=BENCH_MODE_HELP)
    _l2_flag(p)
    p.add_argument("-m", "--metric-source", default="auto", choices=("auto", "kernel", "total-op"))
    p.add_argument("--devices", "--npu-devices", dest="devices")
    p.add_argument("--adaptive", action="store_true", help="sample in batches until the verdict is stable")
    p.add_argument("--budget-s", type=float, default=120.0, help="time budget of --adaptive (seconds)")
    p.add_argument("--cold", dest="warm", action="store_false",
                   help="start a fresh process even when the warm worker runs (helix worker start)")
    p.add_argument("--verbose", action="store_true")
    compat.add_remote_flags(p)
    _common(p)
    p.set_defaults(func=cmd_probe_bench)

    p = sub.add_parser("calibrate", help="measure each case's noise floor: an A/A run of the baseline against itself",
                       description="Bench the baseline operator against itself, paired in one job, --rounds "
                       "times, and store each case's noise floor in .helix/calibration.json; verdicts and "
                       "the promotion rule then use it as the case's margin (never below 1%%).")
    p.add_argument("workspace", nargs="?", default=".", type=Path)
    add_workspace_flag(p)
    p.add_argument("--cases", help="comma-separated case ids (default: every case)")
    p.add_argument("--rounds", type=int, default=3, help="A/A rounds, each its own job (default 3)")
    p.add_argument("--bench-mode", choices=BENCH_MODE_CHOICES, metavar="MODE",
                   help=BENCH_MODE_HELP + "; default: the baseline perf file's mode")
    _l2_flag(p)
    p.add_argument("--devices", "--npu-devices", dest="devices", help="device pool, e.g. 0,2,4-7")
    p.add_argument("--peak", action="store_true",
                   help="instead: measure this device's copy bandwidth and torch.matmul throughput (fp16, bf16, "
                   "fp32) once, into .helix/peaks.json; roofline fractions then use them instead of the datasheet")
    _common(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("prepare-baseline", help="snapshot the operator into baseline/, test, bench, submit",
                       description="Copy the operator into baseline/, run its test and bench there, "
                       "write baseline/state.json and the perf file, then run submit-baseline.")
    p.add_argument("workspace", nargs="?", default=".", type=Path)
    add_workspace_flag(p)
    p.add_argument("--bench-mode", choices=BENCH_MODE_CHOICES, metavar="MODE", help=BENCH_MODE_HELP)
    _l2_flag(p)
    p.add_argument("--test-mode", choices=("standalone", "differential"))
    p.add_argument("--force", action="store_true",
                   help="re-establish baseline/ even though opt-round-N folders measure against it")
    add_goal_flags(p)
    _common(p)
    p.set_defaults(func=cmd_prepare_baseline)


def user_code_failure(args: argparse.Namespace, exc: Any) -> int:
    """A user file that does not import: one FAIL sentence with file and line, exit 1
    (its traceback, user frames only, is in the job's output.log)."""
    if getattr(args, "json", False):
        print_json({"passed": False, "exit_code": 1, "error": str(exc),
                    "user_code_error": {k: v for k, v in exc.to_json().items() if k != "user_traceback"}})
    else:
        print(f"FAIL: {clean(exc, multiline=True)}")
    return 1


def _failing_user_code(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    @functools.wraps(handler)
    def wrapped(args: argparse.Namespace) -> int:
        from helix_engine.eval.usercode import UserCodeError

        try:
            return handler(args)
        except UserCodeError as exc:
            return user_code_failure(args, exc)

    return wrapped


def _report(args: argparse.Namespace, outcome: Any) -> int:
    """Print an eval outcome (``--json``: its JSON, else its text) and return its exit code.
    The text quotes case labels, harness output and errors: escaped here, for every eval command."""
    if args.json:
        print_json(outcome.to_json())
    else:
        print(clean(outcome.text, multiline=True))
    if getattr(args, "report_file", None) is not None:
        shown = json.dumps(outcome.to_json(), indent=2, ensure_ascii=False, default=str) if args.json \
            else clean(outcome.text, multiline=True)
        compat.write_report_copy(args.report_file, shown)
    return int(outcome.exit_code)


@_failing_user_code
def cmd_run_test(args: argparse.Namespace) -> int:
    from helix_engine.eval.test import run_test

    compat.check_sibling_reference(args)
    outcome = run_test(args.operator_file, args.test_file, args.test_mode, args.ref_operator_file,
                       args.ref_result, args.accuracy_mode, args.case_id, args.backend, args.verbose,
                       on_event=_progress(args))
    return _report(args, outcome)


@_failing_user_code
def cmd_run_bench(args: argparse.Namespace) -> int:
    _use_l2(args)
    from helix_engine.eval.bench import run_bench

    outcome = run_bench(args.operator_file, args.bench_file, args.bench_mode, args.output, args.backend,
                        _devices(args.devices), args.baseline_operator_file, args.metric_source,
                        args.skip_latency_errors, on_event=_progress(args), against=args.against,
                        paired=args.paired)
    shown = (outcome.output or "").strip()
    if args.verbose and not args.json and shown and shown not in outcome.text:
        print(clean(outcome.output, multiline=True).rstrip())
    return _report(args, outcome)


@_failing_user_code
def cmd_probe_bench(args: argparse.Namespace) -> int:
    _use_l2(args)
    from helix_engine.eval.probe import probe_bench

    outcome = probe_bench(args.operator_file, args.baseline_operator_file, bench_file=args.bench_file,
                          bench_mode=args.bench_mode, metric_source=args.metric_source, backend=args.backend,
                          devices=_devices(args.devices), adaptive=args.adaptive, budget_s=args.budget_s,
                          verbose=args.verbose, on_event=_progress(args), against=args.against,
                          paired=args.paired, warm=args.warm)
    return _report(args, outcome)


@_failing_user_code
def cmd_calibrate(args: argparse.Namespace) -> int:
    _use_l2(args)
    from helix_engine.eval.calibrate import calibrate

    cases = [c.strip() for c in args.cases.split(",") if c.strip()] if args.cases else None
    if args.peak:
        from helix_engine.eval.peak import calibrate_peak

        payload = calibrate_peak(args.workspace, backend=args.backend, devices=_devices(args.devices),
                                 on_event=_progress(args))
    else:
        payload = calibrate(args.workspace, cases=cases, rounds=args.rounds, backend=args.backend,
                            bench_mode=args.bench_mode, devices=_devices(args.devices), on_event=_progress(args))
    if args.json:
        print_json({k: v for k, v in payload.items() if k != "text"})
    else:
        print(clean(payload.get("text", ""), multiline=True))
    return int(payload.get("exit_code", 1))


@_failing_user_code
def cmd_prepare_baseline(args: argparse.Namespace) -> int:
    _use_l2(args)
    from helix_engine.eval.baseline import prepare_baseline

    payload = prepare_baseline(args.workspace, backend=args.backend, bench_mode=args.bench_mode,
                               test_mode=args.test_mode, on_event=_progress(args), force=args.force)
    # the session's stop conditions hold whatever the baseline's outcome (a rerun keeps them)
    goals = record_from_args(Path(args.workspace).expanduser().resolve(), args, "prepare-baseline")
    if goals is not None:
        payload["goals"] = {"target_speedup": goals.target_speedup, "max_rounds": goals.max_rounds}
        payload["text"] = str(payload.get("text", "")).rstrip("\n") + "\n" + goals_line(goals)
    if args.json:
        print_json(payload)
    else:
        print(clean(payload.get("text", ""), multiline=True))
    return int(payload.get("exit_code", 1))
