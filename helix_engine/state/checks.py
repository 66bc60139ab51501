"""The round checker: upstream's stages in upstream order (the first failing stage returns),
then helix's own (sequential numbering, a real parent, a real code change), then the seed's
hard rules as warnings.

``check_round`` has no side effects; submit-round runs the pass clean-up itself (lifecycle.py)
so that a preview from the cockpit never deletes files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.state import baseline as base
from helix_engine.state import continuity, lints
from helix_engine.state.goals import Goals
from helix_engine.workspace import layout
from helix_engine.workspace.models import METRIC_SOURCES, STATUSES, Problem, RoundState
from helix_engine.workspace.reading import read_text_safe

ROUND_REQUIRED_FIELDS: tuple[str, ...] = (
    "round",
    "parent_round",
    "hypothesis",
    "evidence_sources",
    "correctness_status",
    "benchmark_status",
    "summary_path",
    "opt_note_updated",
)
BENCHMARK_FIELDS: tuple[str, ...] = ("perf_artifact", "comparison_target_path", "effective_metric_source")
_ROUND_METADATA = {"attempts.md", "summary.md", "perf.txt", "perf-analysis.md", "round-state.json"}


@dataclass
class CheckResult:
    """What the checker found. ``payload()`` is the upstream JSON (kind, status, issues,
    guideline, next_option when set); the rest is for the cockpit and the ledger."""

    status: str
    issues: list[str]
    guideline: str = ""
    next_option: str | None = None
    kind: str = "round"
    stage: str | None = None
    terminal: bool = False
    round_state: RoundState | None = None
    operator_path: Path | None = None
    perf_path: Path | None = None
    baseline_perf_path: Path | None = None
    lints: list[Problem] = field(default_factory=list)
    best_speedup: float | None = None
    #: helix's continue/stop decision when session goals took part (state/guideline.stop_signal)
    stop_signal: dict[str, Any] | None = None
    #: holds for review the submitter accepted, each with the reason given (submit-round records
    #: them in the ledger): state/plausibility.accepted_text
    accepted: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "status": self.status,
            "issues": list(self.issues),
            "guideline": self.guideline,
        }
        if self.next_option is not None:
            data["next_option"] = self.next_option
        if self.stop_signal is not None:
            data["stop_signal"] = dict(self.stop_signal)
        return data


def fail_guideline(kind: str, issues: list[str]) -> str:
    return f"{kind} check requires fixes: {'; '.join(issues)}"


# ----------------------------------------------------------------------------- round state


def load_round_state(round_dir: Path) -> RoundState:
    """round-state.json as a model, or ValueError with an upstream-style sentence."""
    return validate_round_state(base.load_json_object(Path(round_dir) / layout.ROUND_STATE, "round-state.json"))


def validate_round_state(data: dict[str, Any]) -> RoundState:
    """The round-state rules on a dict (the file's, or what a form would write), as a model."""
    current, legacy = data.get("comparison_target_path"), data.get("comparison_target")
    if current is not None and legacy is not None and str(current) != str(legacy):
        raise ValueError(f"comparison_target_path and comparison_target disagree: {current!r} != {legacy!r}")
    missing = [name for name in ROUND_REQUIRED_FIELDS if name not in data]
    if missing:
        raise ValueError("missing required round-state fields: " + ", ".join(missing))
    sources = data["evidence_sources"]
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise ValueError("round-state evidence_sources must be a list of strings")
    for name in ("round", "parent_round", "hypothesis", "summary_path"):
        if not isinstance(data[name], str):
            raise ValueError(f"round-state {name} must be a string (got {data[name]!r})")
    for name in ("correctness_status", "benchmark_status"):
        if data[name] not in STATUSES:
            raise ValueError(f"round-state {name}={data[name]} is not one of {', '.join(STATUSES)}")
    if data["benchmark_status"] == "passed":
        merged = dict(data)
        if merged.get("comparison_target_path") is None and legacy is not None:
            merged["comparison_target_path"] = legacy
        gaps = [name for name in BENCHMARK_FIELDS if merged.get(name) in (None, "")]
        if gaps:
            raise ValueError("missing required round-state fields: " + ", ".join(gaps))
    metric = data.get("effective_metric_source")
    if metric is not None and metric not in METRIC_SOURCES:
        raise ValueError(f"round-state effective_metric_source={metric} is not one of {', '.join(METRIC_SOURCES)}")
    for name in ("perf_artifact", "comparison_target_path", "comparison_target", "analysis_skipped_reason",
                 "profile_dir", "ir_dir", "perf_analysis_path"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ValueError(f"round-state {name} must be a string (got {data[name]!r})")
    try:
        return RoundState.model_validate(data)
    except Exception as exc:  # noqa: BLE001 - pydantic's message, as a sentence
        raise ValueError(f"round-state.json is invalid: {exc}") from None


# -------------------------------------------------------------------------------- artifacts


def expected_names(workspace: Path) -> tuple[str, str, str | None]:
    """(opt_<op>.py, opt_<op>_perf.txt, <op>.py) for the workspace's operator."""
    operator, _ = layout.discover_operator(workspace)
    if operator is None:
        return "opt_<operator>.py", "opt_<operator>_perf.txt", None
    stem = layout.operator_stem(operator)
    return layout.round_operator_name(stem), layout.round_perf_name(stem), operator.name


def resolve_round_perf(round_dir: Path, perf_name: str) -> Path | None:
    for candidate in (round_dir / perf_name, round_dir / "perf.txt"):
        if candidate.is_file():
            return candidate
    found = sorted(p for p in round_dir.glob("*_perf.txt") if p.is_file())
    return found[0] if len(found) == 1 else None


def resolve_round_operator(round_dir: Path, op_name: str, legacy: str | None) -> Path | None:
    for name in (op_name, legacy):
        if name and (round_dir / name).is_file():
            return round_dir / name
    try:
        candidates = [
            p for p in sorted(round_dir.iterdir())
            if p.is_file() and p.name not in _ROUND_METADATA and not p.name.endswith("_perf.txt")
        ]
    except OSError:
        return None
    python = [p for p in candidates if p.suffix == ".py"]
    return python[0] if python else None


def _missing_path(field_name: str, declared: str | None, expected: str | None) -> str:
    if declared is None:
        return f"{field_name} is missing (expected {expected})" if expected else f"missing required path field: {field_name}"
    if expected is None:
        return f"{field_name} points to a missing file: {declared}"
    return f"{field_name} points to a missing file: {declared} (expected {expected})"


@dataclass
class Artifacts:
    issues: list[str]
    state: RoundState | None
    state_error: str | None
    operator_path: Path | None
    perf_path: Path | None


def inspect_round(round_dir: Path, state_data: dict[str, Any] | None = None, *,
                  summary_pending: bool = False) -> Artifacts:
    """Stage 1 (the artifact package), and the round-state load that stage 2 reports.
    ``state_data``: judge this round state instead of the file, and ``summary_pending``: count
    summary.md as there (what a form is about to write, before it writes it)."""
    round_dir = Path(round_dir)
    workspace = round_dir.parent
    op_name, perf_name, legacy = expected_names(workspace)
    state: RoundState | None = None
    state_error: str | None = None
    state_file = round_dir / layout.ROUND_STATE
    if state_data is not None or state_file.is_file():
        try:
            state = validate_round_state(state_data) if state_data is not None else load_round_state(round_dir)
        except ValueError as exc:
            state_error = str(exc)
    issues: list[str] = []
    if not (round_dir / layout.ATTEMPTS).is_file():
        issues.append("missing attempts.md")
    declared_summary = state.summary_path if state else None
    summary, outside = base.declared_file(workspace, round_dir, declared_summary)
    if outside:
        issues.append(f"summary_path {outside}")
    else:
        if summary is None and ((round_dir / layout.SUMMARY).is_file() or summary_pending):
            summary = round_dir / layout.SUMMARY
        if summary is None:
            issues.append(_missing_path("summary_path", declared_summary, "summary.md"))
        elif declared_summary is not None and (
            Path(declared_summary).name != summary.name or summary.name != layout.SUMMARY
        ):
            issues.append(f"summary_path must use summary.md (got {declared_summary})")
    if state_data is None and not state_file.is_file():
        issues.append("missing round-state.json")
    declared_perf = state.perf_artifact if state else None
    perf_path, perf_outside = base.declared_file(workspace, round_dir, declared_perf)
    if perf_outside:
        issues.append(f"perf_artifact {perf_outside}")
    else:
        if perf_path is None:
            perf_path = resolve_round_perf(round_dir, perf_name)
        perf_required = state is None or state.benchmark_status == "passed"
        if perf_path is None and perf_required:
            issues.append(_missing_path("perf_artifact", declared_perf, perf_name))
        elif perf_path is not None and declared_perf is not None and (
            Path(declared_perf).name != perf_path.name
            or ("<" not in perf_name and perf_path.name not in (perf_name, "perf.txt"))
        ):
            issues.append(f"perf_artifact must use {perf_name} (got {declared_perf})")
    declared_analysis = state.perf_analysis_path if state else None
    if declared_analysis is not None:
        analysis, analysis_outside = base.declared_file(workspace, round_dir, declared_analysis)
        if analysis_outside:
            issues.append(f"perf_analysis_path {analysis_outside}")
        elif analysis is None:
            issues.append(_missing_path("perf_analysis_path", declared_analysis, "perf-analysis.md"))
    operator = resolve_round_operator(round_dir, op_name, legacy)
    if operator is None:
        issues.append(f"missing {op_name}")
    return Artifacts(issues, state, state_error, operator, perf_path)


def is_terminal(round_dir: Path) -> bool:
    """Complete artifact package plus a round-state.json that loads."""
    if not Path(round_dir).is_dir():
        return False
    found = inspect_round(round_dir)
    return not found.issues and found.state is not None


def not_terminal_reason(round_dir: Path) -> str:
    """Why `is_terminal` says no, as a clause: the unreadable round-state.json first (fixing it with
    `helix round-state` is the way on), else the first missing piece of the package."""
    if not Path(round_dir).is_dir():
        return "its folder is missing"
    found = inspect_round(round_dir)
    if found.state is None and found.state_error is not None:
        first = found.state_error.splitlines()[0][:200]
        return (f"its round-state.json does not load: {first.rstrip('.')}, or rewrite it with "
                f"`helix round-state --round-dir {Path(round_dir).name} ...`")
    return "; ".join(found.issues[:3]) or "its round-state.json does not load"


def is_completed(round_dir: Path) -> bool:
    """Terminal with correctness and benchmark both passed."""
    if not Path(round_dir).is_dir():
        return False
    found = inspect_round(round_dir)
    return (
        not found.issues
        and found.state is not None
        and found.state.correctness_status == "passed"
        and found.state.benchmark_status == "passed"
    )


def _fail(issues: list[str], stage: str, **extra: Any) -> CheckResult:
    """A failing result; the hard-rule lints ride along for the cockpit (never in the payload)."""
    result = CheckResult(status="fail", issues=issues, guideline=fail_guideline("round", issues), stage=stage, **extra)
    operator = extra.get("operator_path")
    if operator is not None:
        try:
            result.lints = lints.lint_round(operator.parent)
        except Exception:  # noqa: BLE001 - lints are advisory; a failure here must not hide the verdict
            result.lints = []
    return result


# ------------------------------------------------------------------------------- the checker


def check_round(
    round_dir: Path,
    *,
    current_round: int | None = None,
    final_round: int | None = None,
    optimize_target: str | None = None,
    min_speedup: float | None = None,
    goals: Goals | None = None,
    state_data: dict[str, Any] | None = None,
    summary_pending: bool = False,
    accept_findings: str | None = None,
    accept_implausible: str | None = None,
) -> CheckResult:
    """Check one round directory; never writes anything. ``state_data``: check it as if its
    round-state.json held this (the submit form's values, before they are written).
    ``accept_findings`` / ``accept_implausible``: the submitter's reason for a round held for
    review (anti-cheat lint findings; an implausible geomean or bandwidth, state/plausibility.py)."""
    from helix_engine.state import guideline  # local: guideline imports this module

    round_dir = Path(round_dir)
    workspace = round_dir.parent
    if not round_dir.is_dir():
        issue = f"missing round directory: {round_dir.name}"
        return CheckResult(status="fail", issues=[issue], guideline=guideline.missing_round_dir_guideline(round_dir.name),
                           stage="artifacts")
    found = inspect_round(round_dir, state_data, summary_pending=summary_pending)
    terminal = not found.issues and found.state is not None
    common: dict[str, Any] = {"terminal": terminal, "round_state": found.state,
                              "operator_path": found.operator_path, "perf_path": found.perf_path}
    if found.issues:
        return _fail(found.issues, "artifacts", **common)
    if found.state_error is not None or found.state is None:
        return _fail([found.state_error or "missing round-state.json"], "round_state", **common)
    state = found.state
    if state.correctness_status != "passed":
        return _fail([f"correctness_status={state.correctness_status}"], "status", **common)
    if state.benchmark_status != "passed":
        return _fail([f"benchmark_status={state.benchmark_status}"], "status", **common)
    gate = base.baseline_gate_issues(workspace)
    if gate:
        return _fail(gate, "baseline", **common)
    from helix_engine.state import seals

    assert found.operator_path is not None
    sealed = seals.round_gate_issues(workspace, round_dir, found.operator_path, found.perf_path, state.parent_round)
    if sealed:  # refused, not recorded: the round can still be measured through the gate
        return _fail(sealed, "gate", **{**common, "terminal": False})
    baseline_perf = base.baseline_perf_path(workspace)
    common["baseline_perf_path"] = baseline_perf
    semantic = _comparison_issues(round_dir, state, baseline_perf)
    if semantic:
        return _fail(semantic, "comparison", **common)
    assert found.operator_path is not None
    source, problem = read_text_safe(found.operator_path, workspace)
    if source is None:
        return _fail([f"{found.operator_path.name} cannot be read as UTF-8 text ({problem.message if problem else ''})"],
                     "continuity", **common)
    launch_issue = continuity.continuity_issue(source, found.operator_path.name)
    if launch_issue is not None:
        return _fail([launch_issue], "continuity", **common)
    from helix_engine.state.lints import round_anti_cheat_findings

    held = round_anti_cheat_findings(found.operator_path, source, round_dir.name)  # its helpers' too
    if held and accept_findings is None:  # held for review: not promoted until a person says why it is honest
        return _fail([f"held for review: {p}" for p in held[:5]]
                     + ["submit it with `--accept-findings \"why this is honest\"` if it is"],
                     "held", **{**common, "terminal": False})
    from helix_engine.state import plausibility

    implausible = plausibility.findings(workspace, round_dir, found.perf_path, goals)
    if implausible and accept_implausible is None:  # too good to be true: not promoted until a person says why
        return _fail(plausibility.hold_issues(implausible), "held", **{**common, "terminal": False})
    n = layout.round_number(round_dir.name)
    ours = _sequence_issues(workspace, n) or _parent_issues(workspace, n, state)
    if not ours:
        ours = _same_code_issues(workspace, round_dir, state, source, found.operator_path)
    if ours:
        return _fail(ours, "helix", **common)
    result = guideline.build_pass(
        round_dir, state, found, baseline_perf, source,
        current_round=current_round, final_round=final_round,
        optimize_target=optimize_target, min_speedup=min_speedup, goals=goals,
    )
    if implausible and accept_implausible is not None:
        result.accepted.append(plausibility.accepted_text(accept_implausible, implausible))
    return result


def _comparison_issues(round_dir: Path, state: RoundState, baseline_perf: Path | None) -> list[str]:
    issues: list[str] = []
    workspace = round_dir.parent
    declared = state.comparison_target_path
    expected = os.path.relpath(baseline_perf.resolve(), round_dir.resolve()) if baseline_perf else None
    target, outside = base.declared_file(workspace, round_dir, declared)
    if outside:
        issues.append(f"comparison_target_path {outside}")
    elif target is None:
        issues.append(_missing_path("comparison_target_path", declared, expected))
    elif baseline_perf is not None and target.resolve() != baseline_perf.resolve():
        issues.append(
            "comparison_target_path must point to the canonical baseline perf artifact "
            f"{expected} (got {declared})"
        )
    if state.effective_metric_source not in METRIC_SOURCES:
        issues.append(f"effective_metric_source={state.effective_metric_source}")
    if not state.evidence_sources:
        issues.append("missing supporting evidence sources")
    return issues


def _sequence_issues(workspace: Path, n: int | None) -> list[str]:
    if n is None or n == 1:
        return []
    previous = workspace / layout.round_dir_name(n - 1)
    if is_terminal(previous):
        return []
    return [
        f"rounds are numbered in sequence: opt-round-{n} needs opt-round-{n - 1} to be a terminal round "
        f"(complete artifacts and a round-state.json that loads); finish or close opt-round-{n - 1} first"
    ]


def parent_number(parent: str) -> int | None:
    """0 for ``baseline``, N for ``opt-round-N``/``round-N``; None when it names nothing."""
    if parent.strip().lower() == "baseline":
        return 0
    return layout.parse_round_ref(parent)


def _parent_issues(workspace: Path, n: int | None, state: RoundState) -> list[str]:
    parent = state.parent_round
    number = parent_number(parent)
    if number is None:
        return [f"parent_round={parent} names no round: use baseline or opt-round-M (an earlier completed round)"]
    if number == 0:
        return []
    if n is not None and number >= n:
        return [f"parent_round={parent} must be an earlier round than opt-round-{n}"]
    if not is_completed(workspace / layout.round_dir_name(number)):
        return [
            f"parent_round={parent} is not a completed round (terminal with correctness and benchmark "
            "passed); branch from baseline or from a completed round"
        ]
    return []


def parent_operator(workspace: Path, state: RoundState) -> Path | None:
    return operator_of(workspace, state.parent_round)


def operator_of(workspace: Path, parent: str) -> Path | None:
    """The operator file of ``baseline`` or ``opt-round-M`` (None when it has none)."""
    number = parent_number(parent)
    if number is None:
        return None
    if number == 0:
        return base.inspect_baseline(workspace).operator_path
    op_name, _, legacy = expected_names(workspace)
    return resolve_round_operator(workspace / layout.round_dir_name(number), op_name, legacy)


def _same_code_issues(workspace: Path, round_dir: Path, state: RoundState, source: str, operator: Path) -> list[str]:
    parent_path = parent_operator(workspace, state)
    if parent_path is None:
        return []
    parent_source, _ = read_text_safe(parent_path, workspace)
    if parent_source is None:
        return []
    if not lints.same_code(source, parent_source):
        return []
    return [
        f"{operator.name} has the same code as its parent {state.parent_round} (only comments or "
        "whitespace differ): restoring the parent is not an optimization; make the round's change, or "
        "close the round as rejected with honest correctness_status/benchmark_status"
    ]
