"""``helix run-test``: run a standalone or differential test in a job and judge accuracy.

Parent side (no torch): resolves files and the reference, runs the worker, and renders the
upstream stdout (captured output, ``Return code: N``, ``Archived result: <path>``, then the
PASS/FAIL block with per-case thresholds and diagnostics).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.eval.jobrun import check_file, resolve_backend, round_name_of, round_timing, run_worker
from helix_engine.eval.loader import find_test_file, test_mode_of
from helix_engine.workspace import layout

ACCURACY_MODES: tuple[str, ...] = ("npu-contract", "dtype-close")


@dataclass
class TestOutcome:
    __test__ = False  # not a pytest class

    exit_code: int
    return_code: int
    test_mode: str
    operator_file: str
    test_file: str
    archived_result: str | None
    stdout: str
    comparison: dict[str, Any] | None
    job_id: str | None
    job_status: str | None
    message: str | None
    reference_archive: str | None = None
    text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("text")
        data["passed"] = self.passed
        return data


def filter_warnings(text: str, verbose: bool = False) -> str:
    """Drop ``[WARNING]`` lines unless verbose (upstream's run-test output filter)."""
    if verbose:
        return text
    return "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("[WARNING]"))


def format_comparison_block(comparison: dict[str, Any]) -> list[str]:
    lines = [str(comparison.get("message", ""))]
    for case in comparison.get("case_results", []):
        if case.get("passed"):
            continue
        diag = dict(case.get("diagnostics") or {})
        thresholds = diag.pop("thresholds", {})
        lines.append(str(case.get("message", "")))
        lines.append(f"  thresholds={json.dumps(thresholds, sort_keys=True)}")
        lines.append(f"  diagnostics={json.dumps(diag, sort_keys=True, default=str)}")
    return lines


def run_test(
    operator_file: Path | str,
    test_file: Path | str | None = None,
    test_mode: str | None = None,
    ref_operator_file: Path | str | None = None,
    ref_result: Path | str | None = None,
    accuracy_mode: str | None = None,
    case_id: str | None = None,
    backend: str | None = None,
    verbose: bool = False,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    timeout_s: float | None = None,
    held_out: bool = False,
) -> TestOutcome:
    """Run the test for ``operator_file`` as a job; never raises for a failing operator.
    ``held_out``: submit-round's check on inputs derived now (gate/heldout.py): nothing archived,
    no evidence recorded, the job is a ``held-out`` job."""
    op = check_file(operator_file, "operator file", "--operator-file")
    test = check_file(test_file, "test file", "--test-file") if test_file else find_test_file(op, test_mode)
    mode = test_mode_of(test, test_mode)
    if mode == "standalone" and (case_id or ref_operator_file or ref_result):
        raise HelixError("standalone tests take no --case-id, --ref-operator-file or --ref-result; "
                         "use --test-mode differential with a differential test file")
    if ref_operator_file and ref_result:
        raise HelixError("give at most one reference: --ref-operator-file or --ref-result, not both")
    if accuracy_mode is not None and accuracy_mode not in ACCURACY_MODES:
        raise HelixError(f"unknown accuracy mode {accuracy_mode!r}; use npu-contract or dtype-close")
    if mode == "differential" and not (ref_operator_file or ref_result):
        _require_reference_for_round(op)
    ws = layout.workspace_of(op)
    if not held_out and (round_name_of(op) or "").startswith(layout.ROUND_PREFIX):
        from helix_engine.state.seals import require_baseline_intact

        require_baseline_intact(ws)  # a round is judged against the accepted baseline, or not at all
    delete_pt = _delete_after_compare(op)
    be = resolve_backend(backend)
    request: dict[str, Any] = {
        "action": "test", "test_mode": mode, "operator_file": str(op), "test_file": str(test),
        "case_id": case_id, "accuracy_mode": accuracy_mode, "held_out": held_out,
    }
    archive = layout.result_path_for(op) if mode == "differential" and case_id is None and not held_out else None
    request["archive_path"] = str(archive) if archive else None
    ref_archive: Path | None = None
    if ref_result:
        ref_archive = check_file(ref_result, "reference result", "--ref-result")
    elif ref_operator_file:  # the reference runs live beside the candidate, never from an archive it could edit
        ref_op = check_file(ref_operator_file, "reference operator", "--ref-operator-file")
        request["ref_operator_file"] = str(ref_op)
    request["ref_archive"] = str(ref_archive) if ref_archive else None
    with round_timing(ws, "run_test"):
        run = run_worker(ws, "held-out" if held_out else "run-test", request, backend=be, cwd=test.parent,
                         round_name=round_name_of(op), on_event=on_event, timeout_s=timeout_s)
    result = run.result or {}
    rc = int(result.get("return_code", run.job.exit_code if run.job.exit_code else 1) or 0)
    if run.result is None or result.get("error"):
        rc = rc or 1
    captured = result.get("stdout") if "stdout" in result else run.output
    comparison = result.get("comparison")
    archived = result.get("archived_result")
    ok = rc == 0 and run.result is not None and not result.get("error")
    if comparison is not None and not comparison.get("passed"):
        ok = False
    lines: list[str] = []
    shown = filter_warnings(captured or "", verbose).rstrip("\n")
    if shown:
        lines.append(shown)
    lines.append(f"Return code: {rc}")
    if mode == "differential":
        lines.append(f"Archived result: {archived if archived else 'none (kept in memory)' if case_id else 'none'}")
    if archived and comparison is not None and delete_pt:
        Path(archived).unlink(missing_ok=True)
        lines.append(f"Deleted candidate archive (HELIX_OPTIMIZE_DELETE_PT_FILES=run-test): {archived}")
    message = None
    if run.result is None or result.get("error"):
        message = run.failure_text()
        lines.append(f"FAIL: the test did not complete: {message}")
    if comparison is not None:
        lines += format_comparison_block(comparison)
    from helix_engine.state.seals import record_evidence

    if not held_out:
        record_evidence(ws, round_name_of(op), "run-test", job_id=run.job.id, passed=ok and comparison is not None,
                        gate={**(result.get("gate") or {}), **({"split": False} if ref_archive else {})},
                        operator=op, harness=test,
                        reference=Path(request["ref_operator_file"]) if request.get("ref_operator_file") else None)
    return TestOutcome(
        exit_code=0 if ok else 1, return_code=rc, test_mode=mode, operator_file=str(op), test_file=str(test),
        archived_result=archived, stdout=captured or "", comparison=comparison, job_id=run.job.id,
        job_status=run.job.status, message=message,
        reference_archive=str(ref_archive) if ref_archive else None, text="\n".join(lines),
    )


def _require_reference_for_round(op: Path) -> None:
    """A round candidate's differential test without a reference compares nothing, yet would
    exit 0; upstream's run-test-optimize requires exactly one reference, so refuse."""
    name = round_name_of(op)
    if name is None or not name.startswith(layout.ROUND_PREFIX):
        return
    stem = op.stem[len("opt_"):] if op.stem.startswith("opt_") else op.stem
    ref = f"{layout.BASELINE_DIR}/{stem}.py"
    raise HelixError(f"{name}/{op.name} is a round candidate: a differential test without a reference "
                     f"would check nothing; add --ref-operator-file {ref} (or --ref-result <stem>_result.pt)")


def _delete_after_compare(op: Path) -> bool:
    """Upstream PT cleanup: a round candidate's archive is deleted right after its comparison
    only when HELIX_OPTIMIZE_DELETE_PT_FILES=run-test (legacy 1); never/round (default)/0 keep it."""
    raw = os.environ.get("HELIX_OPTIMIZE_DELETE_PT_FILES", "round").strip().lower() or "round"
    value = {"1": "run-test", "0": "never"}.get(raw, raw)
    if value not in ("never", "round", "run-test"):
        raise HelixError(f"HELIX_OPTIMIZE_DELETE_PT_FILES={raw!r} is not valid; use never, round or run-test")
    name = round_name_of(op)
    return value == "run-test" and name is not None and name.startswith(layout.ROUND_PREFIX)


def _reference_failed(op: Path, test: Path, mode: str, ref_run: TestOutcome) -> TestOutcome:
    text = ref_run.text + ("\nFAIL: the reference operator's test failed, so there is nothing to compare against; fix the "
                           "reference first")
    return TestOutcome(
        exit_code=1, return_code=ref_run.return_code or 1, test_mode=mode, operator_file=str(op),
        test_file=str(test), archived_result=None, stdout=ref_run.stdout, comparison=None,
        job_id=ref_run.job_id, job_status=ref_run.job_status,
        message="the reference operator's test failed", text=text,
    )
