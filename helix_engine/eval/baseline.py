"""``helix prepare-baseline [WORKSPACE]``: snapshot the operator, test it, bench it, submit.

The baseline is what every round is measured against, so it is recorded honestly: a failing
test or bench gives ``correctness_status``/``benchmark_status`` ``failed`` and
``baseline_established: false`` with the reason in ``preparation_notes`` and on stdout.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.eval.bench import run_bench
from helix_engine.eval.loader import find_bench_file, find_test_file, test_mode_of
from helix_engine.eval.test import run_test
from helix_engine.eval.usercode import UserCodeError
from helix_engine.workspace import layout
from helix_engine.workspace.files import atomic_write_json, atomic_write_text, workspace_lock
from helix_engine.workspace.models import BaselineState, Status
from helix_engine.workspace.reading import read_text_safe


def _rel(path: Path, start: Path) -> str:
    return os.path.relpath(Path(path).resolve(), Path(start).resolve())


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.startswith("FAIL"):
            return line
    return ""


def prepare_baseline(
    workspace: Path | str = ".",
    *,
    backend: str | None = None,
    bench_mode: str | None = None,
    test_mode: str | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Run the whole baseline preparation; returns a payload with ``exit_code`` and ``text``.
    Refuses (unless ``force``) when rounds already measure against an existing baseline/."""
    ws = Path(workspace).expanduser().resolve()
    if not ws.is_dir():
        raise HelixError(f"{ws} is not a folder; pass the operator workspace")
    op, problems = layout.discover_operator(ws)
    if op is None:
        raise HelixError(problems[0].message if problems else f"no operator found in {ws}")
    test_file = find_test_file(op, test_mode)
    mode = test_mode_of(test_file, test_mode)
    bench_file = find_bench_file(op)
    base_dir = layout.baseline_dir(ws)
    base_op = base_dir / op.name
    if not force:
        _refuse_replacing_a_used_baseline(ws, base_dir)
    source, problem = read_text_safe(op, ws)
    if problem is not None:
        raise HelixError(f"cannot snapshot the operator {op.name}: it {problem.message}.")
    with workspace_lock(ws):
        atomic_write_text(base_op, source or "")
    for stale in (layout.result_path_for(base_op), layout.perf_path_for(base_op)):
        stale.unlink(missing_ok=True)  # never report a result of an older snapshot

    try:
        test = run_test(base_op, test_file, mode, backend=backend, on_event=on_event)
        bench = run_bench(base_op, bench_file, bench_mode, backend=backend, on_event=on_event)
    except UserCodeError as exc:
        if Path(exc.file).resolve() != base_op.resolve():
            raise
        # baseline/<op>.py is a copy: name the file the user edits (same lines)
        raise UserCodeError(op, exc.line, exc.error, exc.user_traceback, exc.what) from None
    perf = layout.perf_path_for(base_op)
    correctness: Status = "passed" if test.exit_code == 0 else "failed"
    benchmark: Status = "passed" if bench.exit_code == 0 and perf.is_file() else "failed"
    reasons: list[str] = []
    if correctness == "failed":
        reasons.append("test failed: " + (test.message or _first_line(test.text) or f"return code {test.return_code}"))
    if benchmark == "failed":
        errs = [f"{r['case_label']}: {r['error_message']}" for r in bench.records if r.get("error_message")]
        reasons.append("bench failed: " + (bench.message or "; ".join(errs[:3]) or "see the bench output"))
    state = BaselineState(
        baseline_kind="original",
        source_operator=_rel(op, base_dir),
        baseline_operator=base_op.name,
        test_file=_rel(test_file, base_dir),
        test_mode=mode,
        bench_file=_rel(bench_file, base_dir),
        bench_mode=bench.bench_mode,
        perf_artifact=perf.name,
        correctness_status=correctness,
        benchmark_status=benchmark,
        baseline_established=not reasons,
        preparation_notes=("prepared by helix prepare-baseline" if not reasons else "; ".join(reasons)),
    )
    with workspace_lock(ws):
        atomic_write_json(base_dir / layout.BASELINE_STATE, state.to_json())
    submit, submit_rc = _submit(base_dir)
    lines = [
        f"Baseline operator: {base_op}",
        f"Test ({mode}): {correctness}",
        f"Bench ({bench.bench_mode}, {bench.backend}): {benchmark}",
        f"Perf file: {perf if perf.is_file() else 'none'}",
        f"State: {base_dir / layout.BASELINE_STATE} (baseline_established: {str(not reasons).lower()})",
    ]
    if submit is not None:
        lines.append(f"submit-baseline: {submit.get('status')} ({submit.get('guideline', '')})")
    if reasons:
        lines.append("FAIL: the baseline is not established: " + "; ".join(reasons))
    exit_code = 0 if not reasons and submit_rc == 0 else 1
    return {
        "workspace": str(ws), "baseline_dir": str(base_dir), "state": state.to_json(),
        "test": test.to_json(), "bench": bench.to_json(), "submit": submit, "submit_exit_code": submit_rc,
        "exit_code": exit_code, "text": "\n".join(lines),
    }


def _refuse_replacing_a_used_baseline(ws: Path, base_dir: Path) -> None:
    """Every round's speedup is measured against baseline/: re-snapshotting and re-measuring it
    under existing rounds changes their numbers (and submit-baseline resets the phase)."""
    rounds, _ = layout.list_round_dirs(ws)
    if not rounds or not (base_dir / layout.BASELINE_STATE).is_file():
        return
    names = ", ".join(p.name for _, p in sorted(rounds.items())[:3]) + (", …" if len(rounds) > 3 else "")
    raise HelixError(f"baseline/ already anchors {len(rounds)} round folder(s) ({names}); re-preparing it "
                     "would replace and re-measure the baseline and change every round's speedup. Reuse it "
                     "as it is (next: `helix start-round`), or pass --force to re-establish it")


def _submit(base_dir: Path) -> tuple[dict[str, Any] | None, int]:
    try:
        from helix_engine.state.lifecycle import submit_baseline
    except ImportError as exc:
        return {"status": "fail", "guideline": f"submit-baseline is unavailable ({exc})"}, 1
    payload, rc = submit_baseline(base_dir, reseal=True)  # snapshotted, tested and benched just now
    return payload, rc
