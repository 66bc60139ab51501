"""``helix submit-baseline | start-round | set-current-round-state | submit-round``.

Thin wrappers over helix_engine.state.lifecycle: parse, call, print the JSON payload, return
0 on pass and 1 on fail (the payload always says why and what to do next).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from helix_engine.console import print_json
from helix_engine.workspace.models import ANALYSIS_POLICIES, ROUND_STRATEGIES


STRATEGY_HELP = "one of: " + ", ".join(ROUND_STRATEGIES)
POLICY_HELP = "one of: " + ", ".join(ANALYSIS_POLICIES)


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    p = sub.add_parser("submit-baseline", help="check baseline/ and mark the baseline passed")
    p.add_argument("--baseline-dir", required=True, help="the workspace's baseline/ folder")
    p.set_defaults(func=_submit_baseline)

    p = sub.add_parser("start-round", help="open opt-round-N (one active round at a time)")
    p.add_argument("--round-dir", required=True, help="opt-round-N inside the workspace")
    p.add_argument("--round-strategy", required=True, choices=ROUND_STRATEGIES, metavar="STRATEGY",
                   help=STRATEGY_HELP)
    p.add_argument("--analysis-policy", required=True, choices=ANALYSIS_POLICIES, metavar="POLICY",
                   help=POLICY_HELP)
    p.add_argument("--reason", required=True, help="why this round, in one sentence")
    p.set_defaults(func=_start_round)

    p = sub.add_parser("set-current-round-state", help="change the active round's strategy or deepen its analysis")
    p.add_argument("--round-strategy", choices=ROUND_STRATEGIES, metavar="STRATEGY", help=STRATEGY_HELP)
    p.add_argument("--analysis-policy", choices=ANALYSIS_POLICIES, metavar="POLICY",
                   help=POLICY_HELP + " (only deeper than the current one)")
    p.add_argument("--reason", required=True, help="why the round's contract changes, in one sentence")
    p.add_argument("--workspace", help="the workspace (default: found by walking up from the current folder)")
    p.set_defaults(func=_set_current_round_state)

    p = sub.add_parser("submit-round", help="check a round and record its outcome in the ledger")
    p.add_argument("--round-dir", required=True, help="the opt-round-N folder to check and submit")
    p.add_argument("--current-round", type=int, default=None,
                   help="N of this round in the current worker batch (with --final-round)")
    p.add_argument("--final-round", type=int, default=None,
                   help="the last round of the worker batch; the guideline then says whether to go on")
    p.add_argument("--optimize-target", choices=("kernel", "operator"), default=None,
                   help="kernel: judge by the kernel view; operator: by total-op (end to end)")
    p.set_defaults(func=_submit_round)


def _submit_baseline(args: argparse.Namespace) -> int:
    from helix_engine.state.lifecycle import submit_baseline

    payload, code = submit_baseline(Path(args.baseline_dir))
    print_json(payload)
    return code


def _start_round(args: argparse.Namespace) -> int:
    from helix_engine.state.lifecycle import start_round

    payload, code = start_round(Path(args.round_dir), args.round_strategy, args.analysis_policy, args.reason)
    print_json(payload)
    return code


def _set_current_round_state(args: argparse.Namespace) -> int:
    from helix_engine.state import workflow
    from helix_engine.state.lifecycle import set_current_round_state

    if args.workspace:
        workspace = Path(args.workspace)
    else:
        found = workflow.find_state_upwards(Path.cwd())
        # No state anywhere above: let the lifecycle report it with the upstream guideline.
        workspace = found.parent.parent if found else Path.cwd()
    payload, code = set_current_round_state(
        workspace, args.reason, round_strategy=args.round_strategy, analysis_policy=args.analysis_policy
    )
    print_json(payload)
    return code


def _submit_round(args: argparse.Namespace) -> int:
    from helix_engine.state.lifecycle import submit_round

    payload, code = submit_round(
        Path(args.round_dir), current_round=args.current_round, final_round=args.final_round,
        optimize_target=args.optimize_target,
    )
    print_json(payload)
    return code
