"""A job whose events.jsonl is far longer than one read page (a bench of 10,000 cases writes
~13 MiB): its result event is still found, and every finished case can still be read back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helix_engine.jobs import registry
from helix_engine.jobs.registry import iter_events, last_event, read_events
from helix_engine.jobs.runner import run_job

CASES = 12_000  # ~5 MiB of case events with the padding below: past the 4 MiB page


def _child(cases: int) -> str:
    """A child that reports like the eval worker: the real EventWriter, then a result event."""
    return (
        "from helix_engine.jobs.events import EventWriter\n"
        "w = EventWriter.from_env()\n"
        f"for i in range({cases}):\n"
        f"    w.case_started(f'case_{{i:05d}}', i, {cases})\n"
        "    w.case_finished(f'case_{i:05d}', {'median_us': 1.5 + i, 'note': 'x' * 200})\n"
        f"w.result({{'cases': {cases}, 'case_errors': 0}})\n"
    )


def test_a_bench_of_thousands_of_cases_is_passed_not_exited_before_it_reported(tmp_path: Path) -> None:
    info = run_job(tmp_path, "run-bench", [sys.executable, "-c", _child(CASES)], cwd=Path.cwd(),
                   timeout_s=300, backend="cpu", expect_result=True)
    folder = tmp_path / ".helix" / "jobs" / info.id
    assert (folder / "events.jsonl").stat().st_size > registry.MAX_EVENTS_CHUNK
    assert info.status == "passed", info.message
    assert info.message is None
    result = last_event(folder, "result")
    assert result is not None and result["payload"] == {"cases": CASES, "case_errors": 0}
    finished = [e["case_id"] for e in iter_events(folder) if e["event"] == "case_finished"]
    assert len(finished) == CASES and finished[-1] == f"case_{CASES - 1:05d}"


def test_a_long_events_file_that_ends_with_a_result_event(tmp_path: Path) -> None:
    """The synthetic file of the bug: > 4 MiB of case_finished lines, the result last."""
    line = json.dumps({"event": "case_finished", "ts": 1.0, "case_id": "c", "record": {"pad": "y" * 400}}) + "\n"
    body = line * (registry.MAX_EVENTS_CHUNK // len(line) + 500)
    result = json.dumps({"event": "result", "ts": 2.0, "payload": {"cases": 1}}) + "\n"
    (tmp_path / "events.jsonl").write_text(body + result)
    assert last_event(tmp_path, "result") == {"event": "result", "ts": 2.0, "payload": {"cases": 1}}
    assert read_events(tmp_path, 0)[0][-1]["event"] == "case_finished"  # one page: no result in it
    assert sum(1 for e in iter_events(tmp_path) if e["event"] == "case_finished") == body.count("\n")


def _reference_last(text: str, name: str, page: int) -> dict[str, object] | None:
    """What ``last_event`` must answer: the last complete line that parses as a ``name``
    event, among lines no longer than a page."""
    complete = text.encode()[: text.encode().rfind(b"\n") + 1]
    found = None
    for raw in complete.splitlines():
        if len(raw) > page:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("event") == name:
            found = obj
    return found


@pytest.mark.parametrize("page", [7, 16, 33, 64, 1000])
def test_last_event_reads_backwards_across_page_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          page: int) -> None:
    monkeypatch.setattr(registry, "MAX_EVENTS_CHUNK", page)
    short = json.dumps({"event": "result", "payload": {"n": 1}})
    giant = json.dumps({"event": "result", "payload": {"n": 2, "pad": "z" * 300}})  # longer than most pages
    other = json.dumps({"event": "log", "msg": "hello"})
    files = {
        "result then logs": f"{short}\n{other}\n{other}\n",
        "result last": f"{other}\n{other}\n{short}\n",
        "partial result at the end": f"{short}\n{other}\n" + '{"event": "result", "payload": {"n": 3}}',
        "giant result after a short one": f"{short}\n{other}\n{giant}\n{other}\n",
        "garbage and blank lines": f"{short}\n\nnot json\n{{\"no\": \"event\"}}\n",
        "no result": f"{other}\n{other}\n",
        "empty": "",
    }
    for label, text in files.items():
        (tmp_path / "events.jsonl").write_text(text)
        assert last_event(tmp_path, "result") == _reference_last(text, "result", page), (label, page)


def test_last_event_of_a_job_without_events_file_is_none(tmp_path: Path) -> None:
    assert last_event(tmp_path, "result") is None
    assert list(iter_events(tmp_path)) == []
