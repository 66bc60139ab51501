"""A hostile operator workspace: every kind of text helix prints carries a terminal payload.

The payload is the red team's (issue 11, finding 3): ``ESC ]0;TITLE BEL`` renames the window,
``ESC [2J`` clears the screen, ``ESC ]52;c;… BEL`` writes the clipboard; then a C1 CSI, a
right-to-left override and Rich/Textual markup that must show literally. It sits in case labels,
perf fields, round-state.json, attempts.md, summary.md, opt-note.md, a round folder's name (and
a folder whose name is invalid UTF-8), job.json fields, events, output.log, a torch.profiler
trace and IR stage names and lines. Shared by tests/unit/test_sanitize_output.py and
tests/tui/test_hostile_text.py.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from builders import Case, RoundSpec, build_workspace, perf_record, workflow_state, write_workflow_state

ESCAPES = "\x1b]0;TITLE\x07\x1b[2J\x1b]52;c;aGVsbG8=\x07"
MARKUP = "[bold]x[/bold][@click=app.quit]q[/]"
#: What every hostile field holds (after a plain word, so the text still reads as a name).
PAYLOAD = ESCAPES + "\x9b2J\u202e" + MARKUP
#: Characters that must never reach a terminal from the workspace.
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e")
#: A job id of helix's own pattern (the folder of the hostile job).
JOB_ID = "20261130-093455-run-bench-59de"


def hostile(word: str) -> str:
    return f"{word}{PAYLOAD}"


def hostile_name(word: str) -> str:
    """:func:`hostile` fit for a file name (no ``/``)."""
    return hostile(word).replace("/", "")


def leaks(text: str) -> list[str]:
    """The forbidden characters found in ``text`` (empty when it is safe for a terminal)."""
    return [repr(ch) for ch in FORBIDDEN if ch in text]


def _perf(path: Path, cases: dict[str, float], *, error_case: str | None = None) -> None:
    lines = []
    for label, value in cases.items():
        samples = [value * (1 + 0.01 * (i % 3)) for i in range(9)]
        record = perf_record(label, Case(value, value + 2.0, samples_us=samples))
        record.update(device=hostile("dev"), backend="cpu", method=hostile("method"))
        lines.append(json.dumps(record))
    if error_case is not None:
        lines.append(json.dumps(perf_record(error_case, Case(None, None, error_message=hostile("boom")))))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _trace(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)

    def x(name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 1, "tid": 7, "ts": ts, "dur": dur}

    events = [x(hostile("kern"), 10 * i, 8.0) for i in range(4)] + [x(hostile("Memcpy copy"), 100, 3.0)]
    (folder / "trace.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    (folder / "profile-manifest.json").write_text(json.dumps({"backend": "cuda", "trace_file": "trace.json"}),
                                                  encoding="utf-8")


def _ir(folder: Path, extra: str) -> None:
    kernel = folder / hostile_name("kern")
    kernel.mkdir(parents=True, exist_ok=True)
    body = f"module {{\n  // {PAYLOAD}\n  tt.func @k() {{\n    %0 = tt.load %p : f32 // {extra}\n  }}\n}}\n"
    (kernel / "add_kernel.ttir").write_text(body, encoding="utf-8")
    (kernel / "add_kernel.ttgir").write_text(body.replace("tt.load", "tt.load vector"), encoding="utf-8")


def _job(ws: Path) -> Path:
    folder = ws / ".helix" / "jobs" / JOB_ID
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    info = {"id": JOB_ID, "kind": hostile("run-bench"), "argv": [hostile("argv")], "round": hostile("opt-round-1"),
            "device": hostile("0"), "backend": hostile("cpu"), "pid": None, "created_at": now - 5,
            "started_at": now - 4, "ended_at": now - 1, "status": "failed", "exit_code": 1,
            "message": hostile("message"), "command": hostile("helix run-bench")}
    (folder / "job.json").write_text(json.dumps(info), encoding="utf-8")
    events = [
        {"event": "case_started", "ts": now - 3, "case_id": hostile("case"), "index": 0, "total": 2},
        {"event": "case_finished", "ts": now - 3, "case_id": hostile("case"),
         "record": {"case_label": hostile("case"), "error_message": hostile("error")}},
        {"event": "case_finished", "ts": now - 2, "case_id": "plain", "record": {"case_label": "plain",
                                                                             "kernel_avg_time_us": 5.0}},
        {"event": "progress", "ts": now - 2, "done": 2, "total": 2},
        {"event": "log", "ts": now - 2, "msg": hostile("log")},
        {"event": "result", "ts": now - 1, "payload": {"error": hostile("result"), hostile("key"): hostile("v")}},
        {"event": hostile("odd"), "ts": now - 1, "x": hostile("odd")},
    ]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    (folder / "output.log").write_text(f"line one\n{PAYLOAD}\n\ttabbed {MARKUP}\r\noverwrite\rme\n", encoding="utf-8")
    return folder


def build_hostile_workspace(root: Path) -> Path:
    """``root/hostile``: baseline → round 1 (passed) → round 2 (parent points nowhere), plus
    odd folders, a job, a profile and IR, all carrying :data:`PAYLOAD`. Also writes
    ``root/perf-a.txt`` / ``root/perf-b.txt`` (hostile labels, one failed case) for compare-perf
    and a second workspace whose folder name carries the payload (``helix status root``)."""
    root = Path(root)
    base = {hostile("fp16"): 10.0, "fp32": 20.0}
    cand = {hostile("fp16"): 8.0, "fp32": 18.0}
    ws = build_workspace(
        root, name="hostile", baseline=base,
        rounds=[RoundSpec(cand, hypothesis=hostile("hypothesis"), theme=hostile("theme")),
                RoundSpec(cand, parent=hostile("opt-round-9"), hypothesis=hostile("second"), theme=hostile("t2"))],
    )
    for perf in (ws / "baseline" / "add_perf.txt", ws / "opt-round-1" / "opt_add_perf.txt"):
        cases = base if perf.parent.name == "baseline" else cand
        _perf(perf, cases)
    write_workflow_state(ws, workflow_state(rounds={1: "passed", 2: "passed"}))
    with (ws / "opt-note.md").open("a", encoding="utf-8") as note:
        note.write(f"\nNote line: {PAYLOAD}\n")
    with (ws / "opt-round-1" / "attempts.md").open("a", encoding="utf-8") as attempts:
        attempts.write(f"Attempt 2: {PAYLOAD}\n")
    (ws / hostile_name("opt-round-x")).mkdir()
    os.mkdir(os.fsencode(ws) + b"/opt-round-\xff\xfe")
    _trace(ws / "opt-round-1" / "profile")
    _ir(ws / "baseline" / "ir", "base")
    _ir(ws / "opt-round-1" / "ir", "round")
    _job(ws)
    _perf(root / "perf-a.txt", base, error_case=hostile("bad"))
    _perf(root / "perf-b.txt", cand, error_case=hostile("bad"))
    build_workspace(root, name=hostile_name("ws"), baseline={"a": 10.0}, rounds=[RoundSpec({"a": 8.0})])
    return ws
