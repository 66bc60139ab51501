"""Files of record bound to what was measured: the baseline's seal and each round's gate evidence.

Why (issue 27): the round's operator and the agent that wrote it can both write the workspace.
Accepting the baseline records the sha256 of its files and of the harness files; every command
that judges against it checks them again, and a change is refused with the list of changed files
and the command that re-establishes a baseline. Each run-test and run-bench of a round records
what it ran (the sha256 of the operator, the reference, the test or bench file, whether every case
ran, the gate's findings, the perf file it wrote); submit-round accepts a round only on evidence
for the round's current bytes against the accepted baseline, so a swap between test, bench and
submit is refused with the changed file named.

The records live in ``.helix/gate/``, each sealed with an HMAC under this user's private key (the
key of workspace/sealed.py): a record edited by hand, or copied from another workspace, does not
verify. Without a private key the records are kept unsealed, and say so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.workspace import layout
from helix_engine.workspace.files import atomic_write_json
from helix_engine.workspace.reading import read_json_object
from helix_engine.workspace.siblings import round_digests, sibling_digests

GATE_DIR = "gate"
FORMAT = 1
FORCE_HINT = "helix prepare-baseline --force"
#: baseline/ files that are records (its operator, perf files, archived results, state)
_RECORD_SUFFIXES = (".py", "_perf.txt", ".paired.json", "_result.pt", "state.json")


def gate_dir(ws: Path) -> Path:
    return Path(ws) / layout.HELIX_DIR / GATE_DIR


def sha256_file(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mac(body: dict[str, Any], name: str) -> str | None:
    from helix_engine.workspace.sealed import user_key

    key = user_key()
    if key is None:
        return None
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key, f"{name}\n{text}".encode(), hashlib.sha256).hexdigest()


def write_record(ws: Path, name: str, body: dict[str, Any]) -> Path:
    body = {"format": FORMAT, **body}
    mac = _mac(body, name)
    path = gate_dir(ws) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {**body, "mac": mac})
    return path


def read_record(ws: Path, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None), (None, None) when there is none, or (None, why it is not believed)."""
    path = gate_dir(ws) / f"{name}.json"
    if not path.exists():
        return None, None
    data, problems = read_json_object(path, ws, what="gate record", fix="run the command that made it again")
    if data is None:
        return None, problems[0].message if problems else f"{path.name} is unreadable"
    mac = data.pop("mac", None)
    expected = _mac(data, name)
    if expected is not None and not (isinstance(mac, str) and hmac.compare_digest(mac, expected)):
        return None, (f".helix/{GATE_DIR}/{name}.json does not verify: it was edited, or made by another user or "
                      "workspace")
    return data, None


# ------------------------------------------------------------------------------ baseline


@dataclass
class BaselineFiles:
    operator: Path | None
    files: dict[str, str]  # workspace-relative path -> sha256


def baseline_files(ws: Path) -> BaselineFiles:
    from helix_engine.eval.discovery import find_bench_file, find_test_file
    from helix_engine.state.baseline import inspect_baseline

    ws = Path(ws)
    root = layout.baseline_dir(ws)
    found: dict[str, str] = {}
    if root.is_dir():
        for p in sorted(root.iterdir()):
            if p.is_file() and not p.is_symlink() and p.name.endswith(_RECORD_SUFFIXES):
                digest = sha256_file(p)
                if digest:
                    found[p.relative_to(ws).as_posix()] = digest
    op = inspect_baseline(ws).operator_path
    if op is not None:
        for finder in (find_bench_file, find_test_file):
            try:
                harness = finder(op)
            except HelixError:
                continue
            digest = sha256_file(harness)
            if digest:
                found[_rel(ws, harness)] = digest
    return BaselineFiles(op, found)


def _rel(ws: Path, path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(ws).resolve()).as_posix()
    except ValueError:
        return str(Path(path).resolve())


def seal_baseline(ws: Path) -> Path:
    found = baseline_files(ws)
    return write_record(ws, "baseline", {"files": found.files,
                                         "operator": _rel(ws, found.operator) if found.operator else None})


def baseline_changes(ws: Path) -> list[str] | None:
    """What changed in the accepted baseline (empty: nothing); None when no seal was made."""
    record, why = read_record(ws, "baseline")
    if why is not None:
        return [why]
    if record is None:
        return None
    sealed = _dict(record.get("files"))
    now = baseline_files(ws).files
    changes = [f"{path} {'is gone' if path not in now else 'changed'}" for path, digest in sorted(sealed.items())
               if now.get(path) != digest]
    changes += [f"{path} is new" for path in sorted(set(now) - set(sealed)) if path.endswith((".py", "_perf.txt"))]
    return changes


def require_baseline_intact(ws: Path) -> None:
    """Raise the refusal sentence when the accepted baseline's files changed (nothing when no seal
    was made: a baseline accepted by an older helix is judged at submit-round, round_gate_issues)."""
    why = baseline_problem(ws)
    if why is not None:
        raise HelixError(why)


def baseline_problem(ws: Path) -> str | None:
    """``baseline_refusal``'s sentence when a seal exists and the accepted baseline's files changed
    (or the seal does not verify); None when they are as accepted, or no seal was made."""
    changes = baseline_changes(ws)
    return baseline_refusal(changes) if changes else None


def baseline_refusal(changes: list[str]) -> str:
    shown = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "")
    return (f"the accepted baseline is not what was accepted: {shown}. Nothing is judged against it until it is "
            f"re-established: `{FORCE_HINT}`")


def sealed_sha(ws: Path, rel_path: str) -> str | None:
    record, _ = read_record(ws, "baseline")
    value = _dict(_dict(record).get("files")).get(rel_path)
    return value if isinstance(value, str) else None


def sealed_operator_sha(ws: Path) -> str | None:
    record, _ = read_record(ws, "baseline")
    if not record or not isinstance(record.get("operator"), str):
        return None
    return sealed_sha(ws, record["operator"])


# ------------------------------------------------------------------------------ evidence


def evidence_name(round_name: str, kind: str) -> str:
    return f"{round_name}.{kind}"


def record_evidence(ws: Path, round_name: str | None, kind: str, *, job_id: str | None, passed: bool,
                    gate: dict[str, Any] | None, operator: Path, reference: Path | None, harness: Path,
                    perf_file: Path | None = None) -> None:
    """What a run-test / run-bench of a round ran, for submit-round (never for the baseline)."""
    if not round_name or not round_name.startswith(layout.ROUND_PREFIX):
        return
    from helix_engine.perf.context import now_iso

    gate = gate or {}
    files = _dict(gate.get("files"))
    body = {"kind": kind, "round": round_name, "job_id": job_id, "created_at": now_iso(), "passed": bool(passed),
            "split": bool(gate.get("split")), "all_cases": bool(gate.get("all_cases")),
            "findings": list(gate.get("findings") or []),
            "operator": {"path": _rel(ws, operator), "sha256": files.get("operator") or sha256_file(operator),
                         "siblings": _dict(files.get("siblings")) if "siblings" in files else sibling_digests(operator),
                         "round_files": (_dict(files.get("round_files")) if files.get("round_files") is not None
                                         else round_digests(operator))},
            "reference": ({"path": _rel(ws, reference), "sha256": files.get("reference") or sha256_file(reference)}
                          if reference is not None else None),
            "harness": {"path": _rel(ws, harness), "sha256": files.get("test") or files.get("bench")
                        or sha256_file(harness)},
            "perf_sha256": sha256_file(perf_file) if perf_file is not None else None}
    write_record(ws, evidence_name(round_name, kind), body)


COMMANDS = {"run-test": "helix run-test --operator-file {op} --ref-operator-file {base}",
            "run-bench": "helix run-bench --operator-file {op} --baseline-operator-file {base}"}


def evidence_issues(ws: Path, round_dir: Path, kind: str, operator: Path, perf_file: Path | None,
                    references: dict[str, str]) -> list[str]:
    """Why the round's latest ``kind`` evidence does not count (empty: it does). ``references``:
    sha256 → what it is, the operators a round may be measured against (the baseline; its parent)."""
    ws = Path(ws)
    name = Path(round_dir).name
    base = sealed_record_path(ws)
    again = COMMANDS[kind].format(op=_rel(ws, operator), base=base or "baseline/<op>.py")
    record, why = read_record(ws, evidence_name(name, kind))
    if why is not None:
        return [f"{why}; run `{again}`"]
    if record is None:
        return [f"{name} has no {kind} through the gate: run `{again}`"]
    issues: list[str] = []
    job = f"job {record.get('job_id')}" if record.get("job_id") else "its last run"
    if not record.get("passed"):
        issues.append(f"the {kind} of {name} ({job}) did not pass")
    for finding in record.get("findings") or []:
        if isinstance(finding, dict):
            issues.append(f"the {kind} of {name} found: {finding.get('message')}")
    if not record.get("split"):
        issues.append(f"the {kind} of {name} ({job}) ran the operator beside the reference, not through the gate "
                      f"(an unpaired run, an archive reference or a standalone test): run `{again}`")
    if not record.get("all_cases"):
        issues.append(f"the {kind} of {name} ({job}) ran only some cases: run `{again}` without --case-id")
    op = _dict(record.get("operator"))
    if op.get("sha256") != sha256_file(operator):
        issues.append(f"{_rel(ws, operator)} changed after its {kind} ({job}): the file tested, benched and "
                      f"submitted must be the same bytes; run `{again}`")
    issues.extend(_sibling_issues(ws, operator, _dict(op.get("round_files")), kind, job, again))
    ref = _dict(record.get("reference"))
    if ref.get("sha256") not in references:
        issues.append(f"the {kind} of {name} ({job}) compared with {ref.get('path') or 'no reference'}, which is not "
                      f"the accepted baseline{' or the round parent' if len(references) > 1 else ''}: run `{again}`")
    harness = _dict(record.get("harness"))
    if harness.get("path") and sealed_sha(ws, str(harness.get("path"))) != harness.get("sha256"):
        issues.append(f"the {kind} of {name} ({job}) ran {harness.get('path')}, which is not the accepted "
                      f"{'test' if kind == 'run-test' else 'bench'} file: run `{again}`")
    if kind == "run-bench" and perf_file is not None and record.get("perf_sha256") != sha256_file(perf_file):
        issues.append(f"{_rel(ws, perf_file)} is not the file its run-bench ({job}) wrote: run `{again}`")
    return issues


def _sibling_issues(ws: Path, operator: Path, ran: dict[str, Any], kind: str, job: str, again: str) -> list[str]:
    """The files of the operator's folder that differ from what they were when its run started
    (workspace/siblings.round_digests): the operator can import a helper, or read a file and run
    it, so a file swapped after the run makes a different round."""
    now = round_digests(operator)
    folder = _rel(ws, Path(operator).parent)
    changed = sorted(n for n in set(now) | set(ran) if now.get(n) != ran.get(n))
    if not changed:
        return []
    said = [f"{folder}/{n} {'is new' if n not in ran else 'is gone' if n not in now else 'changed'}" for n in changed]
    return [f"{'; '.join(said[:6])} since the {kind} of {Path(operator).parent.name} ({job}): the operator process "
            f"can import or read the files beside the operator, so they must be the ones it ran with; "
            f"run `{again}`"]


def sealed_record_path(ws: Path) -> str | None:
    record, _ = read_record(ws, "baseline")
    value = record.get("operator") if record else None
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------------ submitted rounds


def seal_submitted(ws: Path, round_dir: Path) -> None:
    round_dir = Path(round_dir)
    files = {p.relative_to(ws).as_posix(): sha256_file(p) for p in sorted(round_dir.iterdir())
             if p.is_file() and not p.is_symlink() and p.name.endswith(("_perf.txt", ".paired.json", ".py"))}
    write_record(ws, f"{round_dir.name}.submitted", {"files": files})


def submitted_changes(ws: Path, round_name: str) -> list[str]:
    """What changed in ``round_name``'s files of record since submit-round sealed them (empty:
    nothing, or the round was never sealed)."""
    record, why = read_record(ws, f"{round_name}.submitted")
    if why is not None:
        return [why]
    if record is None:
        return []
    files = _dict(record.get("files"))
    changes = []
    for path, digest in sorted(files.items()):
        now = sha256_file(Path(ws) / str(path))
        if now != digest:
            changes.append(f"{path} {'is gone' if now is None else 'changed'} since {round_name} was submitted")
    return changes


def submitted_refusal(round_name: str, changes: list[str], role: str) -> str:
    """The sentence for a submitted round, read as ``role`` (its parent, the best round, the
    reference), whose files of record changed since it was submitted."""
    shown = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "")
    return (f"{round_name} ({role}) is not what was submitted: {shown}. opt-note.md and every speedup "
            f"measured against it describe the submitted files: put them back as they were submitted (a new "
            f"measurement goes into a new round, or into another file with `helix run-bench --output`)")


def submitted_problem(ws: Path, round_name: str | None, role: str) -> str | None:
    """``submitted_refusal``'s sentence when ``round_name`` is a submitted round whose sealed files
    changed; None when they did not, or it is no round (the baseline, nothing)."""
    if not round_name or not round_name.startswith(layout.ROUND_PREFIX):
        return None
    changes = submitted_changes(ws, round_name)
    return submitted_refusal(round_name, changes, role) if changes else None


def require_submitted_intact(ws: Path, round_name: str | None, role: str) -> None:
    why = submitted_problem(ws, round_name, role)
    if why is not None:
        raise HelixError(why)


def changed_submitted_rounds(ws: Path) -> dict[str, list[str]]:
    """Every sealed (submitted) round whose files of record changed since, with what changed;
    for `helix status`, which reads the rounds as they are and says so."""
    folder = gate_dir(ws)
    suffix = ".submitted.json"
    try:
        names = sorted(p.name[: -len(suffix)] for p in folder.iterdir() if p.name.endswith(suffix))
    except OSError:
        return {}
    found: dict[str, list[str]] = {}
    for name in names:
        if name.startswith(layout.ROUND_PREFIX):
            changes = submitted_changes(ws, name)
            if changes:
                found[name] = changes
    return found


# ------------------------------------------------------------------------------ judging


def reference_shas(ws: Path, parent: str | None) -> dict[str, str]:
    """The operators a round's evidence may be measured against: the accepted baseline, and the
    round's parent when that is a submitted round whose operator is unchanged since."""
    out: dict[str, str] = {}
    base = sealed_operator_sha(ws)
    if base:
        out[base] = layout.BASELINE_DIR
    if parent and parent.startswith(layout.ROUND_PREFIX):
        record, _ = read_record(ws, f"{parent}.submitted")
        files = _dict(_dict(record).get("files"))
        for path, digest in files.items():
            if str(path).endswith(".py") and Path(str(path)).name.startswith("opt_") and isinstance(digest, str):
                if sha256_file(Path(ws) / str(path)) == digest:
                    out[digest] = parent
    return out


def round_gate_issues(ws: Path, round_dir: Path, operator: Path, perf: Path | None, parent: str | None) -> list[str]:
    """Why submit-round cannot take the round's statuses as measured (empty: it can)."""
    changes = baseline_changes(ws)
    if changes is None:
        return [f"the baseline has no seal (it was accepted by an older helix, or .helix/{GATE_DIR}/ was removed), so "
                f"nothing can be judged against it: re-establish it with `{FORCE_HINT}`"]
    if changes:
        return [baseline_refusal(changes)]
    read_as = submitted_read_as(ws, Path(round_dir).name, parent)
    if read_as:
        return read_as
    refs = reference_shas(ws, parent)
    return (evidence_issues(ws, round_dir, "run-test", operator, None, {k: v for k, v in refs.items()
                                                                        if v == layout.BASELINE_DIR})
            + evidence_issues(ws, round_dir, "run-bench", operator, perf, refs))


def submitted_read_as(ws: Path, round_name: str, parent: str | None) -> list[str]:
    """Why the submitted rounds ``round_name`` is judged through, its parent and the promoted best
    round (the promotion rule compares it with that one), cannot be believed: their files of record
    changed since they were submitted (empty: they did not, or they are the baseline)."""
    changed = changed_submitted_rounds(ws)
    if not changed:  # the usual case: no promotion rule to run
        return []
    number = layout.parse_round_ref(parent) if parent and parent != layout.BASELINE_DIR else None
    parent_name = layout.round_dir_name(number) if number is not None else None
    issues = []
    if parent_name in changed:
        issues.append(submitted_refusal(parent_name, changed[parent_name], f"the parent of {round_name}"))
    best = _promoted_best_name(ws, layout.round_number(round_name))
    if best is not None and best != parent_name and best in changed:
        issues.append(submitted_refusal(best, changed[best], f"the promoted best round, which {round_name} is "
                                        "judged against"))
    return issues


def _promoted_best_name(ws: Path, exclude: int | None) -> str | None:
    from helix_engine.state import measure

    best = measure.promoted_best(Path(ws), exclude={exclude} if exclude is not None else ())
    return layout.round_dir_name(best.round) if best is not None else None
