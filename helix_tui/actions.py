"""What a key does, as plain functions (no textual): which CLI command a job runs, which engine
call a form makes, what a form pre-fills. The App runs these in worker threads.

Jobs are started by spawning the same ``helix`` CLI command an agent would type
(`jobs.launch.spawn_cli`), detached, so they outlive the cockpit and show up in any cockpit.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.workspace import layout
from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui.jobs_state import JobTracker
from helix_tui.render import BASELINE, key_round, round_key

EngineCall = Callable[[], tuple[dict[str, Any], int]]


class ActionRefused(HelixError):
    """The action cannot run for the current selection; the sentence says what to do."""


class BaselineMissing(ActionRefused):
    """The action needs the baseline, which is not prepared yet: the cockpit offers prepare-baseline."""


def baseline_missing(snap: WorkspaceSnapshot) -> bool:
    """No established baseline (a fresh operator folder, or one whose baseline/ was never finished)."""
    base = snap.baseline
    return base is None or base.operator_file is None or base.state is None or not base.state.baseline_established


def baseline_accepted(snap: WorkspaceSnapshot) -> bool:
    """The baseline passed submit-baseline (start-round needs that)."""
    wf = snap.workflow
    return wf is not None and wf.baseline.status == "passed"


def expected_operator(snap: WorkspaceSnapshot, key: str) -> str:
    """The operator file a round holds (``opt-round-3/opt_softmax.py``), for messages."""
    stem = snap.operator_file.stem if snap.operator_file else "<operator>"
    return f"{key}/{layout.round_operator_name(stem)}"


# ----------------------------------------------------------------------------- jobs

#: kind → (CLI subcommand for a round, for the baseline)
JOB_COMMANDS: dict[str, tuple[str, str]] = {
    "test": ("run-test", "run-test"),
    "bench": ("run-bench", "run-bench"),
    "bench-baseline": ("run-bench", "run-bench"),
    "probe": ("probe-bench", "probe-bench"),
    "profile": ("profile-bench", "profile-bench"),
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from helix_engine import cli

    parser = cli.build_parser()
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}  # noqa: SLF001


def job_argv(kind: str, snap: WorkspaceSnapshot, key: str, *,
             commands: dict[str, argparse.ArgumentParser] | None = None) -> list[str]:
    """The CLI arguments that run ``kind`` on the selected round or baseline.

    Built against the engine's own parser, so a flag the CLI does not have is never passed.
    """
    if kind not in JOB_COMMANDS:
        raise ActionRefused(f"unknown job kind {kind!r}")
    n = key_round(key)
    operator = _operator(snap, key)
    if operator is None and n is None:
        raise BaselineMissing(f"{JOB_COMMANDS[kind][1]} runs on the baseline, which is not prepared yet")
    if operator is None:
        raise ActionRefused(f"{expected_operator(snap, key)} does not exist: start-round creates it from the "
                            "parent's operator; write the round's operator there")
    if kind == "bench-baseline" and n is None:
        raise ActionRefused("v compares a round with the baseline in one job: select a round (b benches the "
                            "baseline itself)")
    if kind in ("bench", "bench-baseline"):
        _refuse_rebenching(operator)
    baseline_op = snap.baseline.operator_file if snap.baseline else None
    commands = _subparsers() if commands is None else commands
    command = JOB_COMMANDS[kind][0 if n is not None else 1]
    parser = commands.get(command)
    if parser is None:
        raise ActionRefused(f"this helix has no `{command}` command; update helix")
    flags = _flags(parser)
    argv = [command, "--operator-file", str(operator.relative_to(snap.root))]
    harness = layout.harness_files(snap.root, snap.operator_file.stem) if snap.operator_file else {}
    bench = harness.get("bench")
    if kind != "test" and bench is not None and "--bench-file" in flags:
        argv += ["--bench-file", bench.name]
    test_file = harness.get("differential_test") or harness.get("test")
    if kind == "test" and test_file and "--test-file" in flags:
        argv += ["--test-file", test_file.name]
    if kind == "test" and n is not None and baseline_op is not None:
        for flag in ("--ref-operator-file", "--baseline-operator-file"):
            if flag in flags:
                argv += [flag, str(baseline_op.relative_to(snap.root))]
                break
    if kind in ("bench", "bench-baseline") and n is not None and "--against" in flags:
        # a round is measured paired, as the CLI's gate wants it: beside its parent (b) or the baseline (v)
        argv += ["--against", "parent" if kind == "bench" and _has_parent(snap, n) else "baseline"]
    if kind == "probe":
        if n is None:
            raise ActionRefused("probe compares a round with the baseline: select a round first")
        if baseline_op is not None and "--baseline-operator-file" in flags:
            argv += ["--baseline-operator-file", str(baseline_op.relative_to(snap.root))]
    if kind == "profile":
        case = _first_case(snap, key)
        if case is None:
            raise ActionRefused("profiling needs a case id: run a benchmark (b) first so its cases are known")
        argv += ["--case-id", case]
    return [a for a in argv if a]


def _has_parent(snap: WorkspaceSnapshot, n: int) -> bool:
    """Whether round ``n`` records a parent (round-state.json, or what start-round recorded); a
    round that records none is benched against the baseline."""
    view = snap.rounds.get(n)
    if view is not None and view.state is not None:
        return True
    entry = snap.workflow.rounds.get(str(n)) if snap.workflow is not None else None
    return bool(getattr(entry, "parent_round", None))


def _refuse_rebenching(operator: Path) -> None:
    """The engine's rule (run-bench refuses to overwrite a submitted perf file), said with what the
    cockpit can do instead: the CLI's way out, ``--output``, is not something a key can pass."""
    from helix_engine.eval.bench import submitted_perf_refusal

    refusal = submitted_perf_refusal(operator)
    if refusal is None:
        return
    why, what = refusal
    if what == "baseline":
        raise ActionRefused(f"{why}. To compare a round with it without writing a perf file, select the round and "
                            "probe it (p)")
    raise ActionRefused(f"{why}; b would change a submitted result. Start a new round (n) to measure a new "
                        "version, or probe this one against the baseline (p), which writes no perf file")


def _operator(snap: WorkspaceSnapshot, key: str) -> Path | None:
    n = key_round(key)
    if n is None:
        return snap.baseline.operator_file if snap.baseline else None
    view = snap.rounds.get(n)
    if view is not None and view.operator_file is not None:
        return view.operator_file
    if snap.operator_file is not None:
        cand = snap.root / key / layout.round_operator_name(snap.operator_file.stem)
        return cand if cand.is_file() else None
    return None


def _first_case(snap: WorkspaceSnapshot, key: str) -> str | None:
    n = key_round(key)
    records = snap.rounds[n].perf if n is not None and n in snap.rounds else []
    records = records or (snap.baseline.perf if snap.baseline else [])
    return records[0].case_label if records else None


SPAWN_REFUSAL_WAIT_S = 2.0  # a refused command (bad flags, a submitted round) exits well within this


def spawn_call(workspace: Path, argv: list[str]) -> EngineCall:
    def call() -> tuple[dict[str, Any], int]:
        from helix_engine.jobs.launch import spawn_cli

        pid = spawn_cli(workspace, argv, refusal_wait_s=SPAWN_REFUSAL_WAIT_S)
        return {"status": "started", "pid": pid, "argv": argv}, 0

    return call


def warm_worker_call(workspace: Path) -> EngineCall:
    """Stop the workspace's warm worker when one runs, else start one and wait until it answers
    (helix worker start|stop: eval/warm.py)."""
    def call() -> tuple[dict[str, Any], int]:
        from helix_engine.eval import warm

        stopped = warm.stop(workspace, None)
        if stopped is not None:
            return {"sentence": f"stopped the warm worker (pid {stopped.get('pid')}, "
                                f"{stopped.get('served', 0)} probe(s) served)"}, 0
        info = warm.start(workspace, None)
        return {"sentence": f"warm worker pid {info.get('pid')} ready ({info.get('backend')}): probes (p) run in "
                            "its fork; w again stops it"}, 0

    return call


def prepare_baseline_argv(snap: WorkspaceSnapshot) -> list[str]:
    """`helix prepare-baseline` for this workspace (it runs its own test and bench jobs)."""
    if snap.operator_file is None:
        raise ActionRefused("no operator file in the workspace: put <op>.py and its bench_/test harnesses here first")
    return ["prepare-baseline", "."]


def ir_capture_argv(snap: WorkspaceSnapshot, key: str) -> list[str]:
    """`helix ir capture` of the selected round's (or the baseline's) operator into its ``ir/``."""
    n = key_round(key)
    operator = _operator(snap, key)
    if operator is None and n is None:
        raise BaselineMissing("IR capture of the baseline needs the baseline, which is not prepared yet")
    if operator is None:
        raise ActionRefused(f"{expected_operator(snap, key)} does not exist: write the round's operator first")
    folder = snap.root / (key if n is not None else BASELINE) / "ir"
    if folder.exists() or folder.is_symlink():
        raise ActionRefused(f"{key}/ir/ already holds a capture (the IR pane, 6, shows it); remove the folder to "
                            "capture again")
    argv = ["ir", "capture", "--ir-dir", str(folder.relative_to(snap.root)),
            "--operator-file", str(operator.relative_to(snap.root))]
    harness = layout.harness_files(snap.root, snap.operator_file.stem) if snap.operator_file else {}
    bench = harness.get("bench")
    if bench is not None:
        argv += ["--bench-file", bench.name]
    return argv


def cancel_call(workspace: Path, job_id: str) -> EngineCall:
    """`helix jobs cancel`: the same engine call and the same sentence (a finished job says so)."""
    def call() -> tuple[dict[str, Any], int]:
        from helix_engine.jobs.registry import load_job
        from helix_engine.jobs.runner import cancel_job
        from helix_engine.jobs.summary import cancel_text

        before = load_job(workspace, job_id)
        info = cancel_job(workspace, before.id)
        return {"status": info.status, "job": info.id, "sentence": cancel_text(before, info)}, 0

    return call


def describe_payload(title: str, payload: dict[str, Any], code: int) -> str:
    """One notification line for an engine result."""
    if payload.get("status") == "started":
        return f"started `helix {' '.join(payload.get('argv', []))}` (pid {payload.get('pid')}); see the Jobs pane (3)"
    if payload.get("sentence"):
        return str(payload["sentence"])
    parts = [str(payload.get("status", "done" if code == 0 else "failed"))]
    if payload.get("message"):
        parts.append(str(payload["message"]))
    if payload.get("issues"):
        parts.append("; ".join(str(i) for i in payload["issues"]))
    recorded = ledger_line(payload)
    if recorded is not None:
        parts.append(recorded)
    return " · ".join(parts)


def ledger_line(payload: dict[str, Any]) -> str | None:
    """What submit-round's ``ledger`` key says the ledger now records (a pass is not a promotion):
    ``opt-note.md: round-2 not promoted, best round-1``; None without one."""
    ledger = payload.get("ledger")
    if not isinstance(ledger, dict) or not ledger.get("best_status"):
        return None
    return (f"opt-note.md: {ledger.get('round')} {ledger['best_status']}, best "
            f"{ledger.get('final_best_round') or 'baseline'}")


# ----------------------------------------------------------------------------- rounds


def next_round_number(snap: WorkspaceSnapshot) -> int:
    """One past the highest round folder or workflow entry (rounds are numbered in order)."""
    numbers = set(snap.rounds)
    if snap.workflow is not None:
        numbers |= {int(k) for k in snap.workflow.rounds if k.isdigit()}
    return max(numbers, default=0) + 1


def target_round(snap: WorkspaceSnapshot, key: str) -> int:
    """The round a submit applies to: the selected round, else the active one."""
    n = key_round(key)
    if n is None and snap.workflow is not None:
        n = snap.workflow.current_round
    if n is None:
        raise ActionRefused("select a round in the tree (or start one with n) before submitting")
    return n


def default_parent(snap: WorkspaceSnapshot, n: int) -> str:
    """The parent a new round builds on by default: the promotion rule's current best, else the
    baseline (what start-round and `helix round-state` assume)."""
    best = snap.promoted_best_round
    return round_key(best) if best is not None and best != n else BASELINE


@dataclass
class SubmitPrefill:
    """What the submit form starts with: the round's state if it has one, else defaults; the
    statuses come from the round's latest test and bench jobs that ran to a verdict, the
    evidence sources from what the round folder holds."""

    round_dir: Path
    number: int
    parent_round: str
    hypothesis: str = ""
    evidence_sources: list[str] = field(default_factory=list)
    correctness_status: str = "not_run"
    benchmark_status: str = "not_run"
    perf_artifact: str | None = None
    comparison_target_path: str | None = None
    effective_metric_source: str = "kernel"
    summary_path: str = layout.SUMMARY
    status_source: str = "defaults"
    hypothesis_source: str = ""  # "round-state.json", "start-round reason" or ""
    summary_missing: bool = False  # the form then asks for the summary and writes it first


def submit_prefill(snap: WorkspaceSnapshot, key: str, tracker: JobTracker | None) -> SubmitPrefill:
    from helix_engine.state import round_fill

    n = target_round(snap, key)
    view = snap.rounds.get(n)
    folder = snap.root / round_key(n)
    parent = view.parent if view is not None and view.parent_source and view.parent else None
    if parent is None:  # neither round-state.json nor start-round says: most likely the current best
        parent = default_parent(snap, n)  # the engine's promotion rule, as `helix round-state` uses it
    prefill = SubmitPrefill(round_dir=folder, number=n, parent_round=parent)
    stem = snap.operator_file.stem if snap.operator_file else None
    if stem:
        prefill.perf_artifact = layout.round_perf_name(stem)
    if snap.baseline is not None and snap.baseline.perf_file is not None:
        prefill.comparison_target_path = "../" + str(snap.baseline.perf_file.relative_to(snap.root))
    state = view.state if view is not None else None
    # ticked only where the round folder holds the evidence (and, once round-state.json lists
    # sources, only those it lists): a ctrl+s must not record claims nobody made
    found = round_fill.evidence_found(folder, state.model_dump() if state is not None else None)
    prefill.evidence_sources = [e for e in found if state is None or e in state.evidence_sources]
    if state is not None:
        prefill.hypothesis = state.hypothesis
        prefill.correctness_status = state.correctness_status
        prefill.benchmark_status = state.benchmark_status
        prefill.perf_artifact = state.perf_artifact or prefill.perf_artifact
        prefill.comparison_target_path = state.comparison_target_path or prefill.comparison_target_path
        prefill.effective_metric_source = state.effective_metric_source or prefill.effective_metric_source
        prefill.summary_path = state.summary_path or prefill.summary_path
        prefill.status_source = "round-state.json"
        prefill.hypothesis_source = "round-state.json" if state.hypothesis else ""
    elif view is not None and view.comparison is not None and view.comparison.metric_source:
        prefill.effective_metric_source = view.comparison.metric_source
    if not prefill.hypothesis.strip():
        reason = start_reason(folder)
        if reason:
            prefill.hypothesis, prefill.hypothesis_source = reason, "start-round reason"
    prefill.summary_missing = summary_file(prefill) is None
    if tracker is not None:
        test = latest_job_status(tracker, n, "test")
        bench = latest_job_status(tracker, n, "bench")
        if test:
            prefill.correctness_status = test
        if bench:
            prefill.benchmark_status = bench
        if test or bench:
            prefill.status_source = "latest jobs"
    return prefill


def start_reason(round_dir: Path) -> str | None:
    """The reason of the latest State Update block in the round's attempts.md (start-round
    writes it), or None when there is none or the file cannot be read."""
    from helix_engine.workspace.markdown import parse_state_updates
    from helix_engine.workspace.reading import read_bytes_safe

    data, _ = read_bytes_safe(round_dir / layout.ATTEMPTS, Path(round_dir).parent)
    if data is None:
        return None
    text = data.decode("utf-8", errors="replace")
    reasons = [u.reason.strip() for u in parse_state_updates(text) if u.reason and u.reason.strip()]
    return reasons[-1] if reasons else None


def summary_target(prefill: SubmitPrefill) -> Path:
    """Where the round's summary lives: the declared summary_path inside the round folder,
    else ``summary.md`` (a declared path outside the folder is never written)."""
    folder = prefill.round_dir.resolve()
    declared = (folder / prefill.summary_path).resolve() if prefill.summary_path else None
    if declared is not None and declared.parent == folder and declared.name:
        return declared
    return folder / layout.SUMMARY


def summary_file(prefill: SubmitPrefill) -> Path | None:
    """The round's summary file when it exists (declared path or summary.md)."""
    for path in (summary_target(prefill), prefill.round_dir / layout.SUMMARY):
        if path.is_file():
            return path
    return None


def write_summary(prefill: SubmitPrefill, text: str) -> Path:
    """Write the summary the form collected (atomic), before submit-round checks for it."""
    from helix_engine.workspace.files import atomic_write_text

    if not text.strip():
        raise ActionRefused("write the round summary: submit-round needs summary.md")
    path = summary_target(prefill)
    atomic_write_text(path, text.rstrip() + "\n")
    return path


def latest_job_status(tracker: JobTracker, n: int, kind: str) -> str | None:
    """passed/failed of the newest job of ``kind`` for round ``n`` that ran to a verdict (the
    engine's rule, `round_fill.latest_verdict`: a later cancelled or lost job does not count;
    probe-bench and profile-bench never do)."""
    from helix_engine.state import round_fill

    name = round_key(n)
    jobs = []
    with tracker.lock:  # the jobs view, in memory (workers fold into it under the same lock)
        for job_id in tracker.order:  # newest first
            live = tracker.jobs.get(job_id)
            if live is None or live.info is None:
                continue
            job_kind = f"run-{live.kind}" if live.kind == kind else live.kind
            job_round = name if layout.parse_round_ref(live.round) == n else live.round
            jobs.append((job_kind, job_round, live.status))
    return round_fill.latest_verdict(jobs, name, f"run-{kind}")


def round_state_fields(prefill: SubmitPrefill, hypothesis: str, evidence: list[str], correctness: str,
                       benchmark: str, metric_source: str, parent_round: str | None = None) -> dict[str, Any]:
    """The round-state.json fields the submit form writes (upstream names and rules)."""
    fields: dict[str, Any] = {
        "round": round_key(prefill.number),
        "parent_round": (parent_round or "").strip() or prefill.parent_round,
        "hypothesis": hypothesis.strip(),
        "evidence_sources": evidence,
        "correctness_status": correctness,
        "benchmark_status": benchmark,
        "summary_path": prefill.summary_path,
        "opt_note_updated": True,
    }
    if benchmark == "passed":
        fields["perf_artifact"] = prefill.perf_artifact
        fields["comparison_target_path"] = prefill.comparison_target_path
        fields["effective_metric_source"] = metric_source
    return fields


def file_for_pane(snap: WorkspaceSnapshot, key: str, tab: str, notes_tab: str) -> Path:
    """The file behind what is on screen: the note being read, the perf file, else the operator."""
    n = key_round(key)
    folder = snap.root / (key if n is not None else BASELINE)
    if tab == "tab-attempts":
        name = {"tab-summary-md": layout.SUMMARY, "tab-analysis-md": layout.PERF_ANALYSIS}.get(notes_tab, layout.ATTEMPTS)
        return folder / name
    view = snap.rounds.get(n) if n is not None else None
    if tab == "tab-perf":
        perf = view.perf_file if view is not None else (snap.baseline.perf_file if snap.baseline else None)
        if perf is not None:
            return perf
    operator = _operator(snap, key)
    return operator if operator is not None else folder / layout.ATTEMPTS
