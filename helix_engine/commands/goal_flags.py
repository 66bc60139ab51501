"""``--target-speedup`` / ``--max-rounds``: the session's stop conditions as flags.

Kept apart from state/goals.py so registering the flags imports no pydantic (`helix --help`
stays cheap); the commands that take them save them through state.goals.save_goals.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helix_engine.state.goals import Goals


def parse_target(text: str) -> float:
    """argparse type of ``--target-speedup``: a finite number > 0 (a geomean speedup, e.g. 1.5)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a speedup; give a number greater than 0, e.g. 1.5")
    return value


def parse_rounds(text: str) -> int:
    """argparse type of ``--max-rounds``: a whole number ≥ 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a round count; give a whole number of at least 1, e.g. 5")
    return value


def parse_plausible_bound(text: str) -> float:
    """argparse type of ``--max-plausible-speedup``: a finite number > 1 (a geomean speedup, e.g. 20)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value > 1):
        raise argparse.ArgumentTypeError(f"{text!r} is not a plausibility bound; give a speedup greater than 1, "
                                         "e.g. 20")
    return value


def add_goal_flags(parser: Any) -> None:
    """``--target-speedup`` and ``--max-rounds`` on a command that records them."""
    parser.add_argument("--target-speedup", type=parse_target, default=None, metavar="X",
                        help="stop the session once the best round's geomean speedup reaches X "
                        "(kept in .helix/goals.json; HELIX_OPTIMIZE_MIN_SPEEDUP overrides it)")
    parser.add_argument("--max-rounds", type=parse_rounds, default=None, metavar="N",
                        help="stop the session after round N (kept in .helix/goals.json; "
                        "submit-round's --current-round/--final-round override it)")


def record_from_args(workspace: Path, args: Any, source: str) -> Goals | None:
    """Save the goal flags a command was given; None when it was given none."""
    from helix_engine.state.goals import save_goals

    target, rounds = getattr(args, "target_speedup", None), getattr(args, "max_rounds", None)
    if target is None and rounds is None:
        return None
    return save_goals(workspace, target_speedup=target, max_rounds=rounds, source=source)


def goals_line(goals: Goals) -> str:
    """One line saying what the session's stop conditions now are."""
    target = f"geomean speedup {goals.target_speedup:g}x" if goals.target_speedup is not None else "no target speedup"
    rounds = f"at most {goals.max_rounds} rounds" if goals.max_rounds is not None else "no round limit"
    return f"Session goals (.helix/goals.json): {target}, {rounds}; submit-round's guideline says when to stop."
