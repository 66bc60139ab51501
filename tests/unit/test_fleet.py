"""`helix fleet [FOLDER]` (issue 15): one row per workspace from the snapshot's promotion rule
(the numbers `helix status` prints), the jobs registry's running jobs (here or on a cluster
node), and the last change."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.jobs import procs
from helix_engine.jobs.registry import JobInfo, job_dir, write_job
from tests.builders import RoundSpec, build_workspace

BASE = {"a": 10.0, "b": 20.0}


@pytest.fixture
def fleet_folder(tmp_path: Path) -> Path:
    build_workspace(tmp_path, name="softmax", baseline=BASE, rounds=[{"a": 8.0, "b": 18.0}, {"a": 9.0, "b": 10.0}])
    build_workspace(tmp_path, name="layernorm", baseline=BASE, rounds=[RoundSpec({"a": 12.0, "b": 22.0})])
    (tmp_path / "not-a-workspace").mkdir()
    return tmp_path


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _running_cluster_job(ws: Path) -> str:
    folder = job_dir(ws, "20260101-000000-run-bench-abcd")
    folder.mkdir(parents=True)
    write_job(folder, JobInfo(id=folder.name, kind="run-bench", created_at=time.time(), status="running",
                              supervisor_pid=os.getpid(), supervisor_start_ticks=procs.start_ticks(os.getpid()),
                              device="1", cluster="head:6379", node="npu-07", node_ip="10.0.0.7"))
    return folder.name


def test_fleet_rows_carry_the_numbers_status_prints(fleet_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = _running_cluster_job(fleet_folder / "softmax")
    fleet = _json(["fleet", str(fleet_folder), "--json"], capsys)
    ws = fleet_folder / "softmax"
    newest = max(p.lstat().st_mtime for p in ws.rglob("*")  # files and folders; derived cache data is no change
                 if p != ws / ".helix" and ws / ".helix" / "cache" not in (p, *p.parents))
    status = _json(["status", str(fleet_folder), "--json"], capsys)
    rows = {r["name"]: r for r in fleet["workspaces"]}
    assert set(rows) == {"softmax", "layernorm"}  # only workspaces
    for op in status["operators"]:
        row = rows[Path(op["path"]).name]
        assert row["best_round"] == op["promoted_best_round"]
        assert row["best_geomean"] == op["promoted_geomean"]  # point, interval and verdict: the same object
    assert rows["softmax"]["best_round"] == "round-2" and rows["softmax"]["best_geomean"]["point"] > 1
    assert rows["layernorm"]["best_round"] == "baseline" and rows["layernorm"]["best_geomean"] is None
    # which measurement the number is (issue 28 item 4): these builder rounds have perf files only
    assert rows["softmax"]["best_geomean_measured"] == "perf files"
    assert rows["layernorm"]["best_geomean_measured"] is None
    assert rows["softmax"]["running_jobs"] == [{"id": job_id, "kind": "run-bench", "round": None,
                                                "status": "running", "node": "10.0.0.7", "device": "1"}]
    assert rows["layernorm"]["running_jobs"] == []
    assert rows["softmax"]["rounds"] == 2
    assert rows["softmax"]["last_change"] == pytest.approx(newest, abs=1e-3)  # the job folder just written


def test_fleet_text_is_one_line_per_workspace(fleet_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _running_cluster_job(fleet_folder / "softmax")
    assert main(["fleet", str(fleet_folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["workspace", "phase", "best", "geomean", "vs", "baseline", "running", "jobs",
                                "changed"]
    by_name = {line.split()[0]: line for line in lines[1:]}
    assert set(by_name) == {"softmax", "layernorm"}
    assert "round-2" in by_name["softmax"] and "run-bench on 10.0.0.7" in by_name["softmax"]
    assert "baseline" in by_name["layernorm"] and "s ago" in by_name["layernorm"]


def test_fleet_of_a_file_is_a_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("x")
    assert main(["fleet", str(tmp_path / "f")]) == 1
    assert "is not a folder; give a folder of operator workspaces" in capsys.readouterr().err


def test_reading_a_workspace_is_no_change(tmp_path: Path) -> None:
    """The cache a status writes under .helix/cache/ (and the .helix/ folder's own time) must not
    make the picker and `helix fleet` say a workspace changed just now (the picker snapshot
    read "0 s ago" for workspaces last touched an hour before)."""
    import os

    from helix_engine.fleet import last_change

    ws = tmp_path / "ws"
    (ws / "opt-round-1").mkdir(parents=True)
    (ws / "opt-round-1" / "summary.md").write_text("x")
    (ws / ".helix").mkdir()
    (ws / ".helix" / "state.json").write_text("{}")
    old = 1_700_000_000.0
    for path in [ws, *ws.rglob("*")]:
        os.utime(path, (old, old), follow_symlinks=False)
    (ws / ".helix" / "cache").mkdir()
    (ws / ".helix" / "cache" / "rounds.sealed").write_text("{}")
    assert last_change(ws) == pytest.approx(old)
    (ws / ".helix" / "state.json").write_text("{}")  # a real change inside .helix/ still counts
    assert last_change(ws) > old + 1000


def test_a_best_round_measured_paired_says_so_in_json_and_text(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.fleet import best_text, fleet
    from tests.builders import write_paired_sidecar

    ws = build_workspace(tmp_path, name="softmax", baseline=BASE, rounds=[{"a": 8.0, "b": 18.0}])
    write_paired_sidecar(ws, 1)  # the reference as fast as the baseline's perf file, in the round's job
    (row,) = fleet(tmp_path)
    assert row.best_round == "round-1" and row.best_geomean_measured == "paired run"
    assert best_text(row) == f"{row.best_geomean.point:.2f}x paired"  # (the builder's files: no samples, no interval)
    assert main(["fleet", str(tmp_path)]) == 0
    assert best_text(row) in capsys.readouterr().out
