"""The session's stop conditions, ``.helix/goals.json``: a target speedup and a round limit.

Why in the workspace: upstream's runner injects ``HELIX_OPTIMIZE_MIN_SPEEDUP`` and
``--current-round/--final-round`` into every submit-round; an agent driving helix's CLI by
itself has no runner, so it got no stop signal. ``prepare-baseline``, ``start-round`` and
``helix goals`` record the conditions here, submit-round's guideline reads them
(state/guideline.py), and `helix agent start` hands them to the agent. The environment and
upstream's flags still win, in upstream's order: ``HELIX_OPTIMIZE_MIN_SPEEDUP`` replaces the
target, ``--current-round/--final-round`` replace the round limit.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix_engine.workspace import files, layout
from helix_engine.workspace.filemodel import FileModel
from helix_engine.workspace.reading import load_model

if TYPE_CHECKING:
    from helix_engine.perf.results import SpeedupEstimate

MIN_SPEEDUP_ENV = "HELIX_OPTIMIZE_MIN_SPEEDUP"
GOALS_NAME = "goals.json"  # inside .helix/
FIX = "run `helix goals --target-speedup X --max-rounds N` to rewrite it, or `helix goals --clear`"


class Goals(FileModel):
    """``.helix/goals.json``. A field left None sets no condition."""

    schema_version: int = 1
    target_speedup: float | None = None
    max_rounds: int | None = None
    #: submit-round holds a round whose geomean is above this for review (state/plausibility.py);
    #: None: the default bound. Not a stop condition (``any`` ignores it)
    max_plausible_speedup: float | None = None
    updated_at: str | None = None
    updated_by: str | None = None

    @property
    def any(self) -> bool:
        return self.target_speedup is not None or self.max_rounds is not None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _positive(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError("target_speedup must be a number greater than 0")
    return value


def _at_least_one(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise ValueError("max_rounds must be at least 1")
    return value


def _above_one(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 1):
        raise ValueError("max_plausible_speedup must be a number greater than 1")
    return value


Goals._field_after = {"target_speedup": _positive, "max_rounds": _at_least_one, "max_plausible_speedup": _above_one}


def goals_path(workspace: Path) -> Path:
    return Path(workspace) / layout.HELIX_DIR / GOALS_NAME


def load_goals(workspace: Path) -> tuple[Goals | None, str | None]:
    """(the goals, None); (None, None) when none were set; (None, a sentence) when the file is
    unreadable or invalid (through the safe reader: no link, no FIFO, capped)."""
    path = goals_path(workspace)
    if not path.exists() and not path.is_symlink():
        return None, None
    goals, _raw, problems = load_model(path, Path(workspace), Goals, what="goals file", fix=FIX)
    if goals is None:
        return None, str(problems[0]) if problems else f"{path} cannot be read; {FIX}"
    return goals, None


def save_goals(workspace: Path, *, target_speedup: float | None = None, max_rounds: int | None = None,
               clear: bool = False, source: str, max_plausible_speedup: float | None = None) -> Goals:
    """Set the given conditions (the others are kept; ``clear`` drops them all first, the
    plausibility bound included) under the workspace lock, atomically. An unreadable goals file
    is replaced, not merged."""
    from helix_engine.state.workflow import utc_now

    with files.workspace_lock(Path(workspace)):
        current, _problem = (None, None) if clear else load_goals(workspace)
        data = current.to_json() if current is not None else {}
        if target_speedup is not None:
            data["target_speedup"] = target_speedup
        if max_rounds is not None:
            data["max_rounds"] = max_rounds
        if max_plausible_speedup is not None:
            data["max_plausible_speedup"] = max_plausible_speedup
        data.update(schema_version=1, updated_at=utc_now(), updated_by=source)
        goals = Goals.model_validate(data)
        files.atomic_write_json(goals_path(workspace), goals.to_json())
    return goals


def resolve_min_speedup() -> float | None:
    """T from HELIX_OPTIMIZE_MIN_SPEEDUP: unset → None; empty, non-float, ≤ 0 → ValueError."""
    raw = os.environ.get(MIN_SPEEDUP_ENV)
    if raw is None:
        return None
    text = raw.strip()
    if not text:
        raise ValueError(f"{MIN_SPEEDUP_ENV} is set but empty")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{MIN_SPEEDUP_ENV} must be a float, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{MIN_SPEEDUP_ENV} must be greater than 0")
    return value


@dataclass(frozen=True)
class TargetCheck:
    """The min-speedup check on the promoted best round's geomean (the evaluation core's estimate).

    Where upstream's rule decides (``HELIX_OPTIMIZE_MIN_SPEEDUP``), the point estimate is compared,
    as upstream does, and its sentences are kept byte for byte. For helix's own target
    (.helix/goals.json) the session stops only when the low end of the geomean's interval clears the
    target: a 2.18x [1.78x, 2.65x] round does not establish a 2.00x target. Without an interval
    (perf files with no samples) the point is all there is, and upstream's sentence is used."""

    best: float | None
    target: float | None
    interval: tuple[float, float] | None  # the interval rule's interval; None on upstream's rule
    met: bool

    @property
    def judged_by(self) -> str | None:
        if self.target is None or self.best is None:
            return None
        return "interval-low" if self.interval is not None else "point"

    @property
    def point_only(self) -> bool:
        """The point estimate reaches the target but the interval's low end does not."""
        return (not self.met and self.interval is not None and self.target is not None
                and self.best is not None and self.best >= self.target)

    def stop_text(self) -> str:
        best, target = self.best or 0.0, self.target or 0.0
        if self.interval is not None:
            low, high = self.interval
            return ("round check passed. Target speedup reached: the best completed round's geomean speedup is "
                    f"{best:.2f}x [{low:.2f}x, {high:.2f}x], and the low end of its 95% interval, {low:.2f}x, is at "
                    f"or above the target {target:.2f}x (.helix/goals.json). Stop the optimize session now instead "
                    "of opening another round.")
        return ("round check passed. Minimum speedup target satisfied: best completed-round geomean speedup "
                f"is {best:.2f}x (target {target:.2f}x). Stop the optimize session now instead of "
                "opening another round.")

    def not_met_text(self) -> str:
        """The sentence before the continue/stop text when the target is not met ('' otherwise)."""
        if self.met or self.target is None or self.best is None:
            return ""
        if self.point_only and self.interval is not None:
            low, high = self.interval
            return (f"Target speedup met by the point estimate only: the best completed round's geomean speedup "
                    f"is {self.best:.2f}x [{low:.2f}x, {high:.2f}x], but the low end of its 95% interval, "
                    f"{low:.2f}x, is below the target {self.target:.2f}x (.helix/goals.json), so the target is not "
                    "established yet. ")
        return ("Minimum speedup target not yet satisfied: best completed-round geomean speedup "
                f"is {self.best:.2f}x (target {self.target:.2f}x). ")


def target_check(estimate: SpeedupEstimate | None, target: float | None, *, from_env: bool) -> TargetCheck:
    """`TargetCheck` of the promoted best round's geomean against the target (see its docstring)."""
    best = estimate.point if estimate is not None else None
    interval = estimate.ci95 if estimate is not None and not from_env else None
    if best is None or target is None:
        return TargetCheck(best, target, interval, False)
    met = interval[0] >= target if interval is not None else best >= target
    return TargetCheck(best, target, interval, met)


def session_end(workspace: Path, best: SpeedupEstimate | None, best_label: str, last_round: int | None) -> str | None:
    """Why the session goals say the optimize session is over, or None while they say continue (or
    set nothing): the checks submit-round's guideline makes without a runner's batch flags, on the
    promoted best round's geomean (``best``, the evaluation core's) and the last submitted round.
    What `helix status` prints as its Next step, so it never proposes a round the guideline refused."""
    goals, problem = load_goals(workspace)
    if problem is not None or goals is None or not goals.any:
        return None
    try:
        target = resolve_min_speedup()
    except ValueError:
        target = None
    from_env = target is not None
    source = MIN_SPEEDUP_ENV if from_env else ".helix/goals.json"
    check = target_check(best, target if from_env else goals.target_speedup, from_env=from_env)
    if check.met and check.best is not None and check.target is not None:
        if check.interval is not None:
            low, high = check.interval
            how = (f"{best_label}'s geomean speedup {check.best:.2f}x [{low:.2f}x, {high:.2f}x] clears the target "
                   f"{check.target:.2f}x ({source}) by the low end of its 95% interval")
        else:
            how = f"{best_label}'s geomean speedup {check.best:.2f}x reaches the target {check.target:.2f}x ({source})"
        return f"none: the optimize session is done, {how}"
    if goals.max_rounds is not None and last_round is not None and last_round >= goals.max_rounds:
        return (f"none: the optimize session is done, opt-round-{last_round} was round {last_round} of at most "
                f"{goals.max_rounds} (.helix/goals.json); `helix goals --max-rounds N` allows more")
    return None
