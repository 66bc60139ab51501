"""Submit is safe (issue 13, finding 2): `s` checks before it submits, a round that would be closed
as failed is submitted only after a second, explicit ctrl+s, statuses come from the latest jobs
that ran to a verdict, and evidence sources are ticked only where the evidence exists."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Button, Select, SelectionList, Static

from helix_tui.app import HelixApp
from helix_tui.screens.submit import SubmitRoundScreen

from cockpit_helpers import cockpit, settle, type_text, wait_for


def shown(widget) -> str:
    return str(widget.render())


def said(app: HelixApp) -> str:
    return " ".join(str(n.message) for n in app._notifications)


def _write_job(ws: Path, job_id: str, kind: str, round_name: str, status: str) -> None:
    from helix_engine.jobs.registry import JobInfo, job_dir, write_job

    folder = job_dir(ws, job_id)
    folder.mkdir(parents=True, exist_ok=True)
    write_job(folder, JobInfo(id=job_id, kind=kind, round=round_name, status=status, created_at=1.0,
                              started_at=1.0, ended_at=2.0, exit_code=0 if status == "passed" else 1))


async def _open_submit(pilot, app: HelixApp) -> SubmitRoundScreen:
    await settle(pilot, app)
    app.selected = "opt-round-3"
    await pilot.pause()
    await pilot.press("s")
    assert await wait_for(pilot, lambda: isinstance(app.screen, SubmitRoundScreen))
    return app.screen


async def test_a_round_that_would_fail_is_not_closed_without_a_second_ctrl_s(active_ws: Path) -> None:
    """The reproduction: s then ctrl+s on a round that fails its check closed it at once."""
    note_before = (active_ws / "opt-note.md").read_bytes()
    app = HelixApp(active_ws, job_poll_s=0)
    async with app.run_test(size=(120, 48)) as pilot:
        form = await _open_submit(pilot, app)
        assert form.query_one("#correctness", Select).value == "not_run"  # no test job ran
        check = form.query_one("#check", Static)
        assert await wait_for(pilot, lambda: "would close opt-round-3 as failed" in shown(check)), shown(check)
        assert "correctness_status=not_run" in shown(check)
        await pilot.press("ctrl+s")
        answer = form.query_one("#answer", Static)
        assert await wait_for(pilot, lambda: "Not submitted" in shown(answer))
        assert "✘ correctness_status=not_run" in shown(answer)
        assert "Submit anyway" in str(form.query_one("#run", Button).label)
        assert app.screen is form
        # nothing written: the round is still active, no round-state.json, the ledger unchanged
        state = json.loads((active_ws / ".helix" / "state.json").read_text())
        assert state["phase"] == "round_active" and state["rounds"]["3"]["status"] == "active"
        assert not (active_ws / "opt-round-3" / "round-state.json").exists()
        assert (active_ws / "opt-note.md").read_bytes() == note_before
        # changing a value withdraws the confirmation: the next ctrl+s checks again
        form.query_one("#hypothesis").focus()
        await type_text(pilot, " and unroll")
        assert await wait_for(pilot, lambda: "Submit anyway" not in str(form.query_one("#run", Button).label))
        answer.update("")
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: "Not submitted" in shown(answer) and "Submit anyway" in
                              str(form.query_one("#run", Button).label))
        assert json.loads((active_ws / ".helix" / "state.json").read_text())["rounds"]["3"]["status"] == "active"
        assert not (active_ws / "opt-round-3" / "round-state.json").exists()
        await pilot.press("ctrl+s")  # the second, explicit ctrl+s on the same values
        assert await wait_for(pilot, lambda: app.screen is not form)
        assert "opt-round-3 recorded as failed (rejected): correctness_status=not_run" in said(app)
    state = json.loads((active_ws / ".helix" / "state.json").read_text())
    assert state["rounds"]["3"]["status"] == "failed" and state["phase"] == "awaiting_round_start"
    data = json.loads((active_ws / "opt-round-3" / "round-state.json").read_text())
    assert data["correctness_status"] == "not_run" and data["hypothesis"].endswith("and unroll")


async def test_statuses_come_from_the_latest_jobs_that_ran_to_a_verdict(active_ws: Path) -> None:
    """The pre-filled "Benchmark status: failed" came from a lost job although an earlier bench passed."""
    _write_job(active_ws, "20260720-080000-run-test-aaaa", "run-test", "opt-round-3", "passed")
    _write_job(active_ws, "20260720-080100-run-bench-bbbb", "run-bench", "opt-round-3", "passed")
    _write_job(active_ws, "20260720-080200-run-bench-cccc", "run-bench", "opt-round-3", "lost")
    _write_job(active_ws, "20260720-080300-run-test-dddd", "run-test", "opt-round-3", "cancelled")
    async with cockpit(active_ws, (120, 48)) as (app, pilot):
        assert await wait_for(pilot, lambda: len(app.tracker.order) == 4)
        form = await _open_submit(pilot, app)
        assert form.query_one("#correctness", Select).value == "passed"
        assert form.query_one("#benchmark", Select).value == "passed"


async def test_evidence_is_ticked_only_where_the_round_folder_holds_it(active_ws: Path) -> None:
    """The form pre-ticked benchmark, profile, ir and compiler-source for a round with none of it."""
    app = HelixApp(active_ws, job_poll_s=0)
    async with app.run_test(size=(120, 48)) as pilot:
        form = await _open_submit(pilot, app)
        assert form.query_one("#evidence", SelectionList).selected == ["benchmark"]  # its perf file
        await pilot.press("escape")
        profile = active_ws / "opt-round-3" / "profile" / "PROF_fp16_1024_1"
        profile.mkdir(parents=True)
        (profile / "trace.json").write_text('{"traceEvents": []}')
        (active_ws / "opt-round-3" / "ir").mkdir()  # an empty folder is no IR evidence
        form = await _open_submit(pilot, app)
        assert form.query_one("#evidence", SelectionList).selected == ["benchmark", "profile"]
        assert "evidence found: benchmark, profile" in shown(form.query_one(".hint"))
