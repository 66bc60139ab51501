"""Helpers for the state-lifecycle tests: a workspace with an accepted baseline, and rounds
written the way an agent writes them (real files, upstream layout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builders import RoundSpec, build_workspace, write_round

BASELINE = {"a": 10.0, "b": 20.0, "c": 40.0}


def new_workspace(root: Path, baseline: dict[str, Any] | None = None, **kwargs: Any) -> Path:
    """Operator + harnesses + baseline/ (no rounds, no opt-note, no .helix)."""
    return build_workspace(root, baseline=dict(baseline or BASELINE), rounds=[], workflow=False,
                           opt_note=False, **kwargs)


def scaled(factor: float, baseline: dict[str, Any] | None = None) -> dict[str, float]:
    """Case times of a round that is ``factor`` times the baseline latency."""
    return {k: round(float(v) * factor, 6) for k, v in (baseline or BASELINE).items()}


def put_round(ws: Path, n: int, cases: dict[str, Any] | None, *, parent: str = "baseline", block: int | None = None,
              hypothesis: str | None = None, **spec: Any) -> Path:
    """Write opt-round-n's artifact package, keeping attempts.md lines already there (the
    State Update blocks start-round appended)."""
    rdir = ws / f"opt-round-{n}"
    attempts = rdir / "attempts.md"
    before = attempts.read_text(encoding="utf-8") if attempts.exists() else ""
    write_round(ws, n, RoundSpec(cases, parent=parent, block=block or 256 * (2 ** n),
                                 hypothesis=hypothesis or f"hypothesis for round {n}", **spec))
    if before:
        attempts.write_text(before + "\n" + attempts.read_text(encoding="utf-8"), encoding="utf-8")
    return rdir


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def workflow_json(ws: Path) -> dict[str, Any]:
    return read_json(ws / ".helix" / "state.json")
