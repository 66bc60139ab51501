"""run-bench on a disk that fills up as the perf file is written: the measurements are not lost
in silence; the error says the disk is full and where each case's record still is."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.jobs.registry import iter_events, list_jobs
from helix_engine.perf import artifact
from helix_engine.perf.artifact import read_perf
from helix_engine.workspace import files
from tests.e2e._eval_ws import add_operator, assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def _full_disk_for(monkeypatch: pytest.MonkeyPatch, *targets: Path) -> list[Path]:
    """Writes of ``targets`` fail as on a full disk (the real atomic write, its data fsync
    raising ENOSPC); every other write (the jobs' records) goes through."""
    real = files.atomic_write_text
    refused: list[Path] = []

    def write(path: Path, text: str) -> None:
        if Path(path) not in targets:
            return real(path, text)
        refused.append(Path(path))

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        with monkeypatch.context() as m:
            m.setattr(os, "fsync", full)
            return real(path, text)

    monkeypatch.setattr(files, "atomic_write_text", write)
    monkeypatch.setattr(artifact, "atomic_write_text", write)
    return refused


def _bench(capsys: pytest.CaptureFixture[str], ws: Path, *argv: str) -> tuple[int, str]:
    os.chdir(ws)
    rc = main(["run-bench", "--operator-file", "softmax.py", *argv])
    out, err = capsys.readouterr()
    return rc, out + err


def _rebuild(events: Path, perf: Path) -> None:
    """What the message tells the user to run (jq -c 'select(.event == "case_finished") | .record')."""
    lines = [json.dumps(e["record"]) for e in iter_events(events.parent) if e["event"] == "case_finished"]
    perf.write_text("".join(line + "\n" for line in lines))


def test_run_bench_on_a_full_disk_says_where_the_measurements_are(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = make_ws(tmp_path, "softmax")
    perf = ws / "softmax_perf.txt"
    refused = _full_disk_for(monkeypatch, perf)
    rc, text = _bench(capsys, ws)
    assert refused == [perf]
    assert rc == 1, text
    assert "failed unexpectedly" not in text and "Traceback" not in text, text
    (job,) = assert_jobs_settled(ws)
    assert job.status == "passed"
    events = ws / ".helix" / "jobs" / job.id / "events.jsonl"
    assert "error: disk full: free space on " in text and str(perf) in text, text
    assert f"no perf file was written ({perf})" in text, text
    assert f"The 2 measured case(s) are not lost: each one's record is a case_finished event in {events}" in text, text
    assert "helix jobs prune" in text and "rebuild the perf file" in text, text
    assert not perf.exists() and not [p for p in ws.iterdir() if p.name.endswith(".tmp")]
    # the recipe the message gives makes the perf file the bench would have written
    monkeypatch.undo()
    _rebuild(events, perf)
    records, problems = read_perf(perf, ws)
    assert problems == [] and [r.case_label for r in records] == ["fp32_4x64", "fp32_8x32"]
    assert all(r.kernel_avg_time_us for r in records)


def test_paired_run_bench_on_a_full_disk_names_the_job_not_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A paired bench writes the reference's perf file (when it has none), then its sidecar, then
    its perf file. The reference's records are not in events.jsonl (only the candidate's are):
    they are never claimed to be kept; the candidate's are, when its sidecar write fails."""
    monkeypatch.chdir(tmp_path)
    ws = make_ws(tmp_path, "softmax")
    slow = add_operator(ws, "softmax_slow", "baseline/softmax.py")
    ref_perf, perf = ws / "baseline" / "softmax_perf.txt", ws / "softmax_perf.txt"
    with monkeypatch.context() as m:
        refused = _full_disk_for(m, ref_perf)
        rc, text = _bench(capsys, ws, "--baseline-operator-file", str(slow))
    assert refused == [ref_perf] and rc == 1, text
    assert "failed unexpectedly" not in text and "Traceback" not in text, text
    assert text.startswith("error: disk full: free space on "), text
    assert f"no perf file was written ({ref_perf})" in text and "measured case(s) were not saved" in text, text
    assert "events.jsonl" not in text, text
    assert not ref_perf.exists() and not perf.exists()

    sidecar = ws / "softmax_perf.paired.json"
    with monkeypatch.context() as m:
        refused = _full_disk_for(m, sidecar)
        rc, text = _bench(capsys, ws, "--baseline-operator-file", str(slow))
    assert refused == [sidecar] and rc == 1, text
    job = next(j for j in list_jobs(ws) if j.kind == "run-bench")  # newest first
    events = ws / ".helix" / "jobs" / job.id / "events.jsonl"
    assert text.startswith("error: disk full: free space on "), text
    assert f"The 2 measured case(s) are not lost: each one's record is a case_finished event in {events}" in text, text
    assert ref_perf.is_file() and not perf.exists() and not sidecar.exists()
