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
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from helix_engine.workspace import files, layout
from helix_engine.workspace.reading import load_model

GOALS_NAME = "goals.json"  # inside .helix/
FIX = "run `helix goals --target-speedup X --max-rounds N` to rewrite it, or `helix goals --clear`"


class Goals(BaseModel):
    """``.helix/goals.json``. A field left None sets no condition."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    schema_version: int = 1
    target_speedup: float | None = None
    max_rounds: int | None = None
    updated_at: str | None = None
    updated_by: str | None = None

    @field_validator("target_speedup")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError("target_speedup must be a number greater than 0")
        return value

    @field_validator("max_rounds")
    @classmethod
    def _at_least_one(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("max_rounds must be at least 1")
        return value

    @property
    def any(self) -> bool:
        return self.target_speedup is not None or self.max_rounds is not None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


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
               clear: bool = False, source: str) -> Goals:
    """Set the given conditions (the other one is kept; ``clear`` drops both first) under the
    workspace lock, atomically. An unreadable goals file is replaced, not merged."""
    from helix_engine.state.workflow import utc_now

    with files.workspace_lock(Path(workspace)):
        current, _problem = (None, None) if clear else load_goals(workspace)
        data = current.to_json() if current is not None else {}
        if target_speedup is not None:
            data["target_speedup"] = target_speedup
        if max_rounds is not None:
            data["max_rounds"] = max_rounds
        data.update(schema_version=1, updated_at=utc_now(), updated_by=source)
        goals = Goals.model_validate(data)
        files.atomic_write_json(goals_path(workspace), goals.to_json())
    return goals
