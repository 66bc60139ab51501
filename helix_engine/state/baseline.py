"""The baseline gate (submit-baseline, and stage 4 of the round checker).

Issue texts follow upstream word for word where upstream has them (agents and the runner match
on them); paths that leave the workspace are refused on top of that.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.workspace import files, layout
from helix_engine.workspace.json_text import parse_json
from helix_engine.workspace.models import STATUSES, BaselineState
from helix_engine.workspace.reading import MAX_JSON_BYTES, decode_text, read_bytes_safe

BASELINE_REQUIRED_FIELDS: tuple[str, ...] = (
    "baseline_kind",
    "source_operator",
    "baseline_operator",
    "test_file",
    "test_mode",
    "bench_file",
    "bench_mode",
    "perf_artifact",
    "correctness_status",
    "benchmark_status",
    "baseline_established",
)
_BASELINE_METADATA = {"state.json", "perf.txt"}


def load_json_object(path: Path, display_name: str, workspace: Path | None = None) -> dict[str, Any]:
    """Read a JSON object through the safe reader, or raise ValueError with a sentence naming
    the file. ``workspace`` defaults to the folder above the file's folder (baseline/state.json,
    opt-round-N/round-state.json)."""
    path = Path(path)
    root = Path(workspace) if workspace is not None else path.parent.parent
    if not os.path.lexists(path):
        raise ValueError(f"missing {display_name}")
    data_bytes, problem = read_bytes_safe(path, root, max_bytes=MAX_JSON_BYTES)
    if problem is not None:
        raise ValueError(f"{display_name} cannot be read: {problem}")
    text, problem = decode_text(data_bytes or b"", display_name)
    if problem is not None:
        raise ValueError(f"{display_name} cannot be read as UTF-8 text ({problem.message})")
    data, problem = parse_json(text or "", display_name)
    if problem is not None:
        raise ValueError(f"{display_name} {problem.message}")
    if not isinstance(data, dict):
        raise ValueError(f"{display_name} must contain a JSON object")
    return data


def declared_file(workspace: Path, declared_in: Path, value: str | None) -> tuple[Path | None, str | None]:
    """Resolve a declared path (declaring folder, then workspace). Returns (existing file or
    None, an issue when the path leaves the workspace)."""
    if value is None or not str(value).strip():
        return None, None
    try:
        path = files.resolve_inside(workspace, declared_in, str(value))
    except files.PathOutsideWorkspace as exc:
        return None, f"{value} is outside the workspace: {exc}"
    except ValueError:
        return None, None
    return (path if path.is_file() else None), None


def load_baseline_state(workspace: Path) -> BaselineState:
    """baseline/state.json as a model, or ValueError with the upstream-style issue."""
    data = load_json_object(layout.baseline_dir(workspace) / layout.BASELINE_STATE, "baseline/state.json")
    missing = [name for name in BASELINE_REQUIRED_FIELDS if name not in data]
    if missing:
        raise ValueError("missing required baseline-state fields: " + ", ".join(missing))
    for name in BASELINE_REQUIRED_FIELDS:
        if name == "baseline_established":
            if not isinstance(data[name], bool):
                raise ValueError(f"baseline-state baseline_established must be true or false (got {data[name]!r})")
        elif not isinstance(data[name], str):
            raise ValueError(f"baseline-state {name} must be a string (got {data[name]!r})")
    for name in ("correctness_status", "benchmark_status"):
        if data[name] not in STATUSES:
            raise ValueError(f"baseline {name}={data[name]} (expected one of {', '.join(STATUSES)})")
    return BaselineState.model_validate(data)


@dataclass
class BaselineInspection:
    state: BaselineState | None
    perf_path: Path | None
    operator_path: Path | None
    issues: list[str] = field(default_factory=list)


def inspect_baseline(workspace: Path) -> BaselineInspection:
    """Artifacts first (state.json, perf, operator snapshot), as upstream orders them."""
    root = layout.baseline_dir(workspace)
    state_file = root / layout.BASELINE_STATE
    state: BaselineState | None = None
    if state_file.is_file():
        try:
            state = load_baseline_state(workspace)
        except ValueError:
            state = None
    issues: list[str] = []
    perf_issue = op_issue = None
    if state is not None:
        perf_path, perf_issue = declared_file(workspace, root, state.perf_artifact)
        operator_path, op_issue = declared_file(workspace, root, state.baseline_operator)
    else:
        perf_path = _fallback_perf(root)
        operator_path = _fallback_operator(root)
    if not state_file.is_file():
        issues.append("missing baseline/state.json")
    if perf_issue:
        issues.append(f"perf_artifact {perf_issue}")
    elif perf_path is None:
        issues.append(f"missing {state.perf_artifact}" if state else "missing baseline perf artifact")
    if op_issue:
        issues.append(f"baseline_operator {op_issue}")
    elif operator_path is None:
        issues.append(f"missing {state.baseline_operator}" if state else "missing baseline operator snapshot")
    return BaselineInspection(state, perf_path, operator_path, issues)


def baseline_gate_issues(workspace: Path) -> list[str]:
    """Every reason the baseline cannot be used; empty when it passes."""
    inspection = inspect_baseline(workspace)
    if inspection.issues:
        return inspection.issues
    try:
        state = load_baseline_state(workspace)
    except ValueError as exc:
        return [str(exc)]
    issues: list[str] = []
    if not state.baseline_established:
        issues.append("baseline/state.json marks baseline as not established")
    if state.correctness_status != "passed":
        issues.append(f"baseline correctness_status={state.correctness_status}")
    if state.benchmark_status != "passed":
        issues.append(f"baseline benchmark_status={state.benchmark_status}")
    return issues


def baseline_perf_path(workspace: Path) -> Path | None:
    """The canonical baseline perf file (declared in baseline/state.json), when it exists."""
    try:
        state = load_baseline_state(workspace)
    except ValueError:
        return None
    path, _ = declared_file(workspace, layout.baseline_dir(workspace), state.perf_artifact)
    return path


def _fallback_perf(root: Path) -> Path | None:
    legacy = root / "perf.txt"
    if legacy.is_file():
        return legacy
    candidates = sorted(p for p in root.glob("*_perf.txt") if p.is_file()) if root.is_dir() else []
    return candidates[0] if len(candidates) == 1 else None


def _fallback_operator(root: Path) -> Path | None:
    if not root.is_dir():
        return None
    candidates = [p for p in sorted(root.iterdir()) if p.is_file() and p.name not in _BASELINE_METADATA]
    if len(candidates) == 1:
        return candidates[0]
    python = [p for p in candidates if p.suffix == ".py"]
    if len(python) == 1:
        return python[0]
    return candidates[0] if candidates else None
