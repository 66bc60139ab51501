"""A differential test through the gate: the test harness makes the inputs here, each operator
(candidate, and the reference when there is one) runs in its own process on copies of them, and
the outputs are compared here. With ``held_out`` the inputs are derived anew (gate/heldout.py):
new seeds and shapes near the test's, never written anywhere, logged only as shapes.

Returns what the worker's ``run_test`` returns (return code, captured output, archive, comparison)
plus ``gate``: findings, the sha256 of the files that ran, whether every case ran.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
from pathlib import Path
from typing import Any

from helix_engine.gate.harness import DiffCase, TracedTest, fresh_seed
from helix_engine.gate.opclient import OperatorClient, OperatorFailed, start_clients
from helix_engine.gate.sides import CallResult, Finding, Sides, behaviour_findings, write_findings


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_test_gate(request: dict[str, Any], backend: Any, events: Any) -> dict[str, Any]:
    import torch

    from helix_engine.eval.accuracy import compare_payloads

    operator_file, test_file = Path(request["operator_file"]), Path(request["test_file"])
    ref_file = Path(request["ref_operator_file"]) if request.get("ref_operator_file") else None
    case_id = request.get("case_id")
    held_out = bool(request.get("held_out"))
    test = TracedTest(test_file)
    cases = test.cases()
    ids = [c.id for c in cases]
    if case_id is not None:
        cases = [c for c in cases if c.id == case_id]
        if not cases:
            from helix_engine.eval.loader import HarnessContractError

            raise HarnessContractError(test_file, "build_differential_test_cases",
                                       f"no case with id {case_id!r}; the ids are: {', '.join(ids)}")
    if held_out:
        from helix_engine.gate.heldout import held_out_cases

        cases, shapes_log = held_out_cases(test, cases, fresh_seed())
        events.emit("log", msg=f"held-out inputs: {len(cases)} case(s)", shapes=shapes_log)
    labels = ["candidate"] + (["reference"] if ref_file is not None else [])
    files = {"candidate": operator_file, "reference": ref_file}
    buf = io.StringIO()
    findings: list[Finding] = []
    outputs: dict[str, list[dict[str, Any]]] = {s: [] for s in labels}
    skipped: list[str] = []
    rc, raised = 0, None
    clients: dict[str, OperatorClient] = {}
    try:
        clients = start_clients({s: files[s] for s in labels}, backend)  # type: ignore[misc]
        from helix_engine.workspace import layout

        sides = Sides(test, clients, layout.workspace_of(operator_file))
        for index, case in enumerate(cases):
            events.case_started(case.id, index, len(cases))
            sides.load(f"t{index}", case.program, drop=[f"t{index - 1}"] if index else [])
            got: dict[str, CallResult] = {}
            for side in labels:
                try:
                    sides.slot(side, f"t{index}", case.program, None, 1, [], case.id)
                    got[side] = sides.fetch(side, -1)
                except OperatorFailed:
                    if side == "reference" and held_out:  # a shape the reference refuses is not the candidate's fault
                        skipped.append(case.id)
                        break
                    raise
            if case.id in skipped:
                continue
            findings += write_findings(case.id, got["candidate"].notes, sides.workspace)
            if "reference" in got:
                findings += behaviour_findings(case.id, got["candidate"].notes, got["reference"].notes)
            elif got["candidate"].notes.get("subclass"):
                findings += behaviour_findings(case.id, got["candidate"].notes, {})
            for side, result in got.items():
                if result.unreadable and side == "candidate":
                    findings.append(Finding("unreadable-output", case.id, result.unreadable))
                outputs[side].append({"id": case.id, "inputs": tuple(case.program.tensors), "result": result.outputs})
            events.case_finished(case.id, {"ok": True})
            events.progress(index + 1, len(cases))
    except OperatorFailed as exc:
        if exc.died:  # not a failing test: the job did not complete
            return {"error": str(exc), "return_code": 1, "stdout": "", "archived_result": None, "comparison": None,
                    "raised": None, "gate": {"findings": [], "split": True, "held_out": held_out}}
        rc, raised = 1, str(exc)
        buf.write(exc.traceback)
        sys.stderr.write(exc.traceback)
        if exc.user_code_error:
            from helix_engine.eval.usercode import UserCodeError

            raise UserCodeError.from_json(exc.user_code_error) from None
    finally:
        ran = {side: client.copy.sha256 for side, client in clients.items()}  # the bytes that ran
        ran_siblings = clients["candidate"].copy.siblings if "candidate" in clients else None
        ran_files = clients["candidate"].copy.round_files if "candidate" in clients else None
        for client in clients.values():
            client.close()
    payload = {"compute": test.compute, "cases": outputs["candidate"]}
    archived = None
    if rc == 0 and case_id is None and not held_out and request.get("archive_path"):
        with contextlib.suppress(OSError):
            torch.save(payload, request["archive_path"])
            archived = request["archive_path"]
    comparison = None
    if rc == 0:
        reference: Any = None
        if ref_file is not None:
            reference = {"compute": test.compute, "cases": outputs["reference"]}
        elif request.get("ref_archive"):
            reference = torch.load(request["ref_archive"], map_location="cpu", weights_only=True)
            if case_id is not None and isinstance(reference, dict) and isinstance(reference.get("cases"), list):
                reference = dict(reference, cases=[c for c in reference["cases"] if c.get("id") == case_id])
        if reference is not None:
            comparison = compare_payloads(reference, payload, request.get("accuracy_mode"), backend.name).to_json()
    if findings and comparison is not None:
        comparison["passed"] = False
        comparison["message"] = "FAIL: " + findings[0].message
    gate = {"findings": [f.to_json() for f in findings], "split": True, "held_out": held_out,
            "skipped_cases": skipped, "case_ids": [c.id for c in cases], "all_cases": case_id is None,
            "files": {"operator": ran.get("candidate") or _sha(operator_file), "test": _sha(test_file),
                      "siblings": ran_siblings, "round_files": ran_files,
                      **({"reference": ran.get("reference") or _sha(ref_file)} if ref_file is not None else {})},
            "reference": "operator" if ref_file is not None else "archive" if request.get("ref_archive") else None}
    return {"return_code": rc, "stdout": buf.getvalue(), "archived_result": archived, "comparison": comparison,
            "raised": raised, "gate": gate}


__all__ = ["DiffCase", "run_test_gate"]
