"""Safety of the transitions across processes: two submitters (exactly one wins) and a
kill -9 at random moments of submit-round (every file whole, each round in the ledger once)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round
from helix_engine.workspace.markdown import parse_opt_note

from builders import measured_through_gate
from state_fixtures import new_workspace, put_round, scaled, workflow_json

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_BACKEND"):
        env.pop(name, None)
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "helix_engine", *args]


def _prepared(tmp_path: Path, n: int = 1) -> Path:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    for k in range(1, n + 1):
        assert start_round(ws / f"opt-round-{k}", "exploration", "pattern_entry", "r")[1] == 0
        put_round(ws, k, scaled(0.9 - 0.01 * k))
        measured_through_gate(ws, ws / f"opt-round-{k}")  # the records a gate run leaves (processes below)
        if k < n:
            assert submit_round(ws / f"opt-round-{k}")[1] == 0
    return ws


def _submit_after_barrier(barrier, round_dir: str, out) -> None:  # noqa: ANN001
    barrier.wait()
    out.put(submit_round(Path(round_dir)))


def test_two_processes_submitting_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_OPTIMIZE_MIN_SPEEDUP", raising=False)
    ctx = multiprocessing.get_context("fork")
    for attempt in range(3):
        ws = _prepared(tmp_path / f"try{attempt}")
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_submit_after_barrier, args=(barrier, str(ws / "opt-round-1"), out))
                 for _ in range(2)]
        for proc in procs:
            proc.start()
        results = [out.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
        codes = sorted(code for _, code in results)
        assert codes == [0, 1], results
        [refusal] = [payload for payload, code in results if code == 1]
        assert refusal["kind"] == "round" and refusal["status"] == "fail"
        assert refusal["issues"] == ["opt-round-1 was already submitted and passed; the workflow state no "
                                     "longer has it active"]
        assert refusal["guideline"].startswith("This round was already submitted and passed")
        note = parse_opt_note((ws / "opt-note.md").read_text())
        assert [r.number for r in note.rounds] == [1] and note.overall_summary_count == 1
        state = workflow_json(ws)
        assert state["rounds"]["1"]["status"] == "passed" and state["phase"] == "awaiting_round_start"
        ends = (ws / ".helix" / "round-timings" / "opt-round-1.jsonl").read_text().count('"round_end"')
        assert ends == 1


def test_two_cli_submitters(tmp_path: Path) -> None:
    ws = _prepared(tmp_path)
    argv = _cli("submit-round", "--round-dir", str(ws / "opt-round-1"))
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), text=True)
             for _ in range(2)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    codes = sorted(proc.returncode for proc in procs)
    assert codes == [0, 1], outputs
    payloads = [json.loads(stdout) for stdout, _ in outputs]
    assert sorted(p["status"] for p in payloads) == ["fail", "pass"]


def _assert_whole(ws: Path) -> None:
    """Every JSON/JSONL file parses; opt-note.md parses with each round at most once."""
    for path in ws.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                json.loads(line)
    note_path = ws / "opt-note.md"
    if note_path.exists():
        note = parse_opt_note(note_path.read_text(encoding="utf-8"))
        numbers = [r.number for r in note.rounds]
        assert len(numbers) == len(set(numbers)), numbers
        assert note.overall_summary_count <= 1


@pytest.mark.slow
def test_kill_9_at_random_moments_of_submit_round(tmp_path: Path) -> None:
    ws = _prepared(tmp_path, n=1)
    env = _env()
    started = time.monotonic()
    subprocess.run(_cli("submit-round", "--round-dir", str(ws / "opt-round-1")), env=env, check=True,
                   capture_output=True, timeout=120)
    duration = time.monotonic() - started  # one whole submit, to aim the kills inside it
    rng = random.Random(1234)
    killed = 0
    for n in range(2, 22):
        assert start_round(ws / f"opt-round-{n}", "exploration", "pattern_entry", "r")[1] == 0
        put_round(ws, n, scaled(0.9 - 0.01 * n))
        measured_through_gate(ws, ws / f"opt-round-{n}")
        proc = subprocess.Popen(_cli("submit-round", "--round-dir", str(ws / f"opt-round-{n}")), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Half the kills anywhere in the process's life, half aimed at its last part (the transition).
        low = 0.0 if n % 2 else 0.6 * duration
        time.sleep(rng.uniform(low, duration * 1.05))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed += 1
        proc.wait(timeout=60)
        _assert_whole(ws)
        # Finish the round the way an agent would: submit again (refused if it had already passed).
        payload, code = submit_round(ws / f"opt-round-{n}")
        assert code == 0 or "already submitted" in payload["issues"][0], payload
        _assert_whole(ws)
        assert workflow_json(ws)["rounds"][str(n)]["status"] == "passed"
        # nothing half-done is left: the submit marker is gone and the round ended exactly once
        assert not (ws / ".helix" / "transition.json").exists()
        ends = (ws / ".helix" / "round-timings" / f"opt-round-{n}.jsonl").read_text().count('"round_end"')
        assert ends == 1, n
    assert killed > 0  # the loop really interrupted some submissions
    note = parse_opt_note((ws / "opt-note.md").read_text(encoding="utf-8"))
    assert [r.number for r in note.rounds] == list(range(1, 22))
    assert note.final_best_round == "round-21"
