"""``helix submit-baseline | start-round | set-current-round-state | submit-round``.

Thin wrappers over helix_engine.state.lifecycle: parse, call, print the JSON payload, return
0 on pass and 1 on fail (the payload always says why and what to do next).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix_engine.commands.goal_flags import add_goal_flags, goals_line, parse_plausible_bound, record_from_args
from helix_engine.commands.workspace_flag import add_workspace_flag
from helix_engine.console import print_json
from helix_engine.workspace.vocabulary import ANALYSIS_POLICIES, ROUND_STRATEGIES

if TYPE_CHECKING:
    from helix_engine.state.goals import Goals


STRATEGY_HELP = "one of: " + ", ".join(ROUND_STRATEGIES)
POLICY_HELP = "one of: " + ", ".join(ANALYSIS_POLICIES)
STATUSES = ("passed", "failed", "not_run")
METRIC_SOURCES = ("kernel", "total-op", "mixed")


def _always_json(p: argparse.ArgumentParser) -> None:
    """``--json`` accepted where the output is JSON anyway (upstream's payload), so an agent that
    passes it to every command is not refused by these."""
    p.add_argument("--json", action="store_true", help="accepted for uniformity: the output is always JSON")


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    p = sub.add_parser("submit-baseline", help="check baseline/ and mark the baseline passed")
    p.add_argument("--baseline-dir", required=True, help="the workspace's baseline/ folder")
    add_workspace_flag(p, folder_flag="--baseline-dir")
    _always_json(p)
    p.set_defaults(func=_submit_baseline)

    p = sub.add_parser("start-round", help="open opt-round-N (one active round at a time)")
    p.add_argument("--round-dir", required=True, help="opt-round-N inside the workspace")
    p.add_argument("--round-strategy", required=True, choices=ROUND_STRATEGIES, metavar="STRATEGY",
                   help=STRATEGY_HELP)
    p.add_argument("--analysis-policy", required=True, choices=ANALYSIS_POLICIES, metavar="POLICY",
                   help=POLICY_HELP)
    p.add_argument("--reason", required=True, help="why this round, in one sentence")
    p.add_argument("--parent-round", metavar="PARENT",
                   help="baseline or a completed opt-round-M to build on (default: the current best "
                   "round, else baseline); its operator is copied to opt-round-N/opt_<op>.py")
    add_goal_flags(p)
    add_workspace_flag(p, folder_flag="--round-dir")
    _always_json(p)
    p.set_defaults(func=_start_round)

    p = sub.add_parser("set-current-round-state", help="change the active round's strategy or deepen its analysis")
    p.add_argument("--round-strategy", choices=ROUND_STRATEGIES, metavar="STRATEGY", help=STRATEGY_HELP)
    p.add_argument("--analysis-policy", choices=ANALYSIS_POLICIES, metavar="POLICY",
                   help=POLICY_HELP + " (only deeper than the current one)")
    p.add_argument("--reason", required=True, help="why the round's contract changes, in one sentence")
    p.add_argument("workspace", nargs="?", default=None, metavar="WORKSPACE",
                   help="the workspace (default: found by walking up from the current folder)")
    add_workspace_flag(p)
    _always_json(p)
    p.set_defaults(func=_set_current_round_state)

    p = sub.add_parser("round-state", help="write opt-round-N/round-state.json from the workspace's measurements",
                       description="Write round-state.json: paths, metric source and statuses are derived "
                       "from the round's perf file, the baseline perf file and the round's latest run-test / "
                       "run-bench jobs unless given; profile_dir / ir_dir when the round's profile/ and ir/ folders "
                       "hold output. Writes a summary.md skeleton only when it is missing.")
    p.add_argument("--round-dir", required=True, help="the opt-round-N folder")
    p.add_argument("--hypothesis", required=True, help="the round's one hypothesis, in one sentence")
    p.add_argument("--evidence", required=True, metavar="LIST",
                   help="comma-separated evidence sources, e.g. benchmark,profile (also ir, compiler-source)")
    p.add_argument("--parent-round", metavar="PARENT",
                   help="baseline or opt-round-M (default: the parent start-round recorded, else the best "
                   "completed round, else baseline)")
    p.add_argument("--correctness", choices=STATUSES, metavar="STATUS",
                   help="passed, failed or not_run (default: the round's latest run-test job)")
    p.add_argument("--benchmark", choices=STATUSES, metavar="STATUS",
                   help="passed, failed or not_run (default: the round's latest run-bench job)")
    p.add_argument("--metric-source", choices=METRIC_SOURCES, metavar="SOURCE",
                   help="kernel, total-op or mixed (default: from comparing the perf files)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_workspace_flag(p, folder_flag="--round-dir")
    p.set_defaults(func=_round_state)

    p = sub.add_parser("submit-round", help="check a round and record its outcome in the ledger")
    p.add_argument("--round-dir", required=True, help="the opt-round-N folder to check and submit")
    p.add_argument("--current-round", type=int, default=None,
                   help="N of this round in the current worker batch (with --final-round)")
    p.add_argument("--final-round", type=int, default=None,
                   help="the last round of the worker batch; the guideline then says whether to go on")
    p.add_argument("--optimize-target", choices=("kernel", "operator"), default=None,
                   help="kernel: judge by the kernel view; operator: by total-op (end to end)")
    p.add_argument("--accept-findings", metavar="REASON", default=None,
                   help="submit a round the gate holds for review (an anti-cheat lint finding), saying why it is "
                        "honest; the reason is recorded in the ledger")
    p.add_argument("--accept-implausible", metavar="REASON", default=None,
                   help="submit a round the gate holds for review because its numbers are implausible (a geomean "
                        "above the bound of `helix goals --max-plausible-speedup`, default 10x, or a case above the "
                        "copy peak with a working set larger than the L2), saying why they are real; the reason is "
                        "recorded in the ledger")
    p.add_argument("--check", action="store_true",
                   help="only say what submit-round would do and what fails; write nothing")
    p.add_argument("--json", action="store_true",
                   help="with --check: print JSON (submit-round itself always prints JSON)")
    add_workspace_flag(p, folder_flag="--round-dir")
    p.set_defaults(func=_submit_round)

    p = sub.add_parser("repair", help="clean up after a killed helix command (temp files, a half-done start-round)",
                       description="Remove temp files interrupted writes left (over 10 minutes old), finish a "
                       "start-round killed after it wrote .helix/state.json, and say which command finishes a "
                       "half-done submit-round. Every state-changing command does the same first; `helix status` "
                       "reports what is left.")
    p.add_argument("workspace", nargs="?", default=".", type=Path, metavar="WORKSPACE",
                   help="the operator workspace (default: the current folder)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_workspace_flag(p)
    p.set_defaults(func=_repair)

    p = sub.add_parser("goals", help="show or set the session's stop conditions (target speedup, max rounds)",
                       description="The stop conditions submit-round's guideline reads when no runner passes "
                       "--current-round/--final-round: stop once the best round's geomean speedup reaches the "
                       "target (the low end of its 95% interval, when the perf files carry samples), or after the "
                       "last allowed round. Kept in .helix/goals.json; "
                       "HELIX_OPTIMIZE_MIN_SPEEDUP overrides the target. prepare-baseline and start-round take "
                       "the same flags.")
    p.add_argument("workspace", nargs="?", default=".", type=Path, metavar="WORKSPACE",
                   help="the operator workspace (default: the current folder)")
    add_goal_flags(p)
    p.add_argument("--max-plausible-speedup", type=parse_plausible_bound, default=None, metavar="X",
                   help="submit-round holds a round whose geomean speedup is above X for review, until "
                        "`--accept-implausible REASON` (default 10; kept in .helix/goals.json)")
    p.add_argument("--clear", action="store_true",
                   help="remove both conditions and the plausibility bound (before setting any given)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_workspace_flag(p)
    p.set_defaults(func=_goals)


def _submit_baseline(args: argparse.Namespace) -> int:
    from helix_engine.state.lifecycle import submit_baseline

    payload, code = submit_baseline(Path(args.baseline_dir))
    print_json(payload)
    return code


def _start_round(args: argparse.Namespace) -> int:
    from helix_engine.state.lifecycle import start_round

    payload, code = start_round(Path(args.round_dir), args.round_strategy, args.analysis_policy, args.reason,
                                parent_round=args.parent_round)
    if code == 0:  # a refused start-round changes nothing, goals included
        set_goals = record_from_args(Path(args.round_dir).expanduser().resolve().parent, args, "start-round")
        if set_goals is not None:
            payload["goals"] = _goals_json(set_goals)
    print_json(payload)
    return code


def _goals_json(goals: Goals) -> dict[str, float | int | None]:
    return {"target_speedup": goals.target_speedup, "max_rounds": goals.max_rounds}


def _goals(args: argparse.Namespace) -> int:
    from helix_engine.errors import HelixError
    from helix_engine.sanitize import clean
    from helix_engine.state.goals import MIN_SPEEDUP_ENV, goals_path, load_goals, save_goals
    from helix_engine.workspace.snapshot import is_workspace

    workspace = Path(args.workspace).expanduser().resolve()
    if not is_workspace(workspace):
        raise HelixError(f"{clean(workspace)} is not an operator workspace; run helix goals in the workspace "
                         "folder or pass it as WORKSPACE")
    bound = args.max_plausible_speedup
    if args.clear or args.target_speedup is not None or args.max_rounds is not None or bound is not None:
        goals: Goals | None = save_goals(workspace, target_speedup=args.target_speedup, max_rounds=args.max_rounds,
                                         clear=args.clear, source="goals", max_plausible_speedup=bound)
    else:
        goals, problem = load_goals(workspace)
        if problem is not None:
            raise HelixError(problem)
    from helix_engine.state.plausibility import speedup_bound

    shown = _goals_json(goals) if goals is not None else {"target_speedup": None, "max_rounds": None}
    plausible = speedup_bound(workspace, goals)  # the default when goals.json sets none
    if args.json:
        print_json({**shown, "max_plausible_speedup": plausible, "path": str(goals_path(workspace))})
        return 0
    print(goals_line(goals) if goals is not None and goals.any else
          "Session goals: none set; submit-round gives no stop signal of its own (set them with "
          "`helix goals --target-speedup X --max-rounds N`).")
    custom = goals is not None and goals.max_plausible_speedup is not None
    print(f"Plausibility bound: submit-round holds a round whose geomean speedup is above {plausible:g}x for review "
          f"({'.helix/goals.json' if custom else 'the default'}; `helix goals --max-plausible-speedup X` sets it)")
    if os.environ.get(MIN_SPEEDUP_ENV) is not None:
        print(f"Note: {MIN_SPEEDUP_ENV}={clean(os.environ[MIN_SPEEDUP_ENV])} is set and overrides the target")
    return 0


def _set_current_round_state(args: argparse.Namespace) -> int:
    from helix_engine.state import workflow
    from helix_engine.state.lifecycle import set_current_round_state

    found = None
    if args.workspace:
        workspace = Path(args.workspace)
    else:
        found = workflow.find_state_upwards(Path.cwd())
        # No state anywhere above: let the lifecycle report it with the upstream guideline.
        workspace = found.parent.parent if found else Path.cwd()
    payload, code = set_current_round_state(
        workspace, args.reason, round_strategy=args.round_strategy, analysis_policy=args.analysis_policy
    )
    if code != 0 and payload.get("issues") == [workflow.STATE_MISSING]:
        # The upstream issue stays; the guideline first says where helix looked and how to point it.
        where = (f"{workspace} has no .helix/state.json" if args.workspace else
                 f"no .helix/state.json in {Path.cwd()} or any folder above it")
        payload["guideline"] = (f"{where[0].upper()}{where[1:]}: cd into the operator workspace (or pass "
                                "--workspace PATH) and run `helix set-current-round-state` again. If the "
                                f"workspace itself has none: {payload.get('guideline', '')}")
    print_json(payload)
    return code


def _submit_round(args: argparse.Namespace) -> int:
    from helix_engine.state.lifecycle import submit_round

    if args.check:
        from helix_engine.sanitize import clean
        from helix_engine.state.submit_check import check_submit, check_text

        payload, code = check_submit(Path(args.round_dir), current_round=args.current_round,
                                     final_round=args.final_round, optimize_target=args.optimize_target)
        if args.json:
            print_json(payload)
        else:
            print(clean(check_text(payload), multiline=True))
        return code
    payload, code = submit_round(
        Path(args.round_dir), current_round=args.current_round, final_round=args.final_round,
        optimize_target=args.optimize_target, accept_findings=args.accept_findings,
        accept_implausible=args.accept_implausible,
    )
    print_json(payload)
    return code


def _repair(args: argparse.Namespace) -> int:
    from helix_engine.errors import HelixError
    from helix_engine.sanitize import clean
    from helix_engine.state.recovery import repair
    from helix_engine.workspace.snapshot import is_workspace

    workspace = Path(args.workspace).expanduser().resolve()
    if not is_workspace(workspace):
        raise HelixError(f"{clean(workspace)} is not an operator workspace; run helix repair in the workspace "
                         "folder or pass it as WORKSPACE")
    payload, code = repair(workspace)
    if args.json:
        print_json(payload)
        return code
    lines = [f"repaired: {x}" for x in payload["repaired"]]
    lines += [f"to do: {x}" for x in payload["unresolved"]]
    print("\n".join(clean(x) for x in lines or [payload["guideline"]]))
    return code


def _number_json(c: Any) -> dict[str, Any]:
    """round_number's fields (the number every screen shows; avg_improvement in percent here, as
    this payload always had it), and the perf files' own geomean under upstream's name."""
    from helix_engine.perf.report import estimate_to_json
    from helix_engine.perf.round_number import round_number

    number = round_number(c)
    if number is None:
        return {"geomean_speedup": None, "geomean_mean": None, "avg_improvement": None, "measured": None,
                "upstream_geomean_speedup": c.geomean_speedup}
    return {"geomean_speedup": number.point, "geomean_mean": estimate_to_json(number.geomean),
            "avg_improvement": number.avg_improvement_pct, "measured": number.measured,
            "upstream_geomean_speedup": number.upstream_geomean,
            "upstream_avg_improvement": number.upstream_avg_improvement_pct}


def _round_state(args: argparse.Namespace) -> int:
    from helix_engine.errors import HelixError
    from helix_engine.state import round_fill
    from helix_engine.state.lifecycle import existing_round_state, write_round_state
    from helix_engine.workspace import layout

    round_dir = Path(args.round_dir)
    ws, _ = round_fill.round_workspace(round_dir)
    from helix_engine.state.seals import require_baseline_intact

    require_baseline_intact(ws)  # statuses judged against a changed baseline are judged on nothing
    evidence = [e.strip() for e in str(args.evidence).split(",") if e.strip()]
    if not evidence:
        raise HelixError("--evidence is empty; name what the round's decision rests on, e.g. --evidence benchmark,profile")
    if not args.hypothesis.strip():
        raise HelixError("--hypothesis is empty; state the round's one hypothesis in a sentence")
    parent = args.parent_round
    if parent is not None and parent != layout.BASELINE_DIR and layout.round_number(parent) is None:
        raise HelixError(f"--parent-round {parent!r} is neither baseline nor opt-round-M; pass one of those")
    existing = existing_round_state(round_dir)
    derived = round_fill.derive(round_dir, existing if parent is None else {**existing, "parent_round": parent})
    try:
        path = write_round_state(
            round_dir, derived.fields, round=round_dir.resolve().name, hypothesis=args.hypothesis.strip(),
            evidence_sources=evidence, parent_round=parent, correctness_status=args.correctness,
            benchmark_status=args.benchmark, effective_metric_source=args.metric_source,
            self_reported_statuses=round_fill.self_reported(derived, args.correctness, args.benchmark),
        )
    except ValueError as exc:
        raise HelixError(f"{exc}; pass the field explicitly (see helix round-state --help)") from None
    state = existing_round_state(round_dir)
    summary = round_fill.write_summary_skeleton(round_dir, state, derived)
    if args.json:
        c = derived.comparison
        print_json({"round_state_path": str(path), "round_state": state,
                    "summary_written": str(summary) if summary else None,
                    "comparison": None if c is None else {**_number_json(c),
                                                          "metric_source": c.metric_source, "errors": c.errors},
                    "notes": derived.notes})
    else:
        print(round_fill.report_text(round_dir, path, state, summary, derived))
    return 0
