"""An operator that does not import: one FAIL sentence naming file and line, exit 1, and the
user's part of the traceback (none of helix's frames) in the job's output.log."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.eval.loader import import_file
from helix_engine.eval.usercode import UserCodeError
from helix_engine.jobs.registry import job_dir, list_jobs
from tests.e2e._eval_ws import add_operator, assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def _broken_round(tmp_path: Path, line_text: str) -> tuple[Path, Path]:
    ws = make_ws(tmp_path, "softmax", standalone=False)
    op = add_operator(ws, "softmax", "opt-round-1/opt_softmax.py")
    lines = op.read_text().splitlines()
    lines.insert(3, line_text)  # becomes line 4
    op.write_text("\n".join(lines) + "\n")
    return ws, op


def _only_user_frames(log: str) -> None:
    assert "helix_engine" not in log and "<frozen" not in log, log


def _check_cli(capsys: pytest.CaptureFixture[str], ws: Path, argv: list[str], expected: str) -> None:
    os.chdir(ws)
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 1
    assert f"FAIL: {expected} — fix the operator and run again" in out.splitlines(), out + err
    assert "Traceback" not in out + err and "helix_engine" not in out + err
    (job,) = [j for j in list_jobs(ws) if j.status == "failed"]
    log = (job_dir(ws, job.id) / "output.log").read_text()
    assert "opt_softmax.py" in log
    _only_user_frames(log)
    assert_jobs_settled(ws)


def test_run_test_syntax_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws, _ = _broken_round(tmp_path, "x = (((")
    (ws / "baseline").mkdir()
    add_operator(ws, "softmax", "baseline/softmax.py")
    _check_cli(capsys, ws, ["run-test", "--operator-file", "opt-round-1/opt_softmax.py",
                            "--ref-op", "baseline/softmax.py", "--test-mode", "differential"],
               "opt-round-1/opt_softmax.py:4: SyntaxError: '(' was never closed")


def test_run_bench_import_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws, _ = _broken_round(tmp_path, "import helix_no_such_module")
    _check_cli(capsys, ws, ["run-bench", "--operator-file", "opt-round-1/opt_softmax.py"],
               "opt-round-1/opt_softmax.py:4: ModuleNotFoundError: No module named 'helix_no_such_module'")
    log = next(iter((ws / ".helix" / "jobs").glob("*/output.log"))).read_text()
    assert "Traceback" in log and "import helix_no_such_module" in log


def test_run_bench_syntax_error_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws, op = _broken_round(tmp_path, "def broken(:")
    os.chdir(ws)
    assert main(["run-bench", "--operator-file", str(op), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False
    assert data["user_code_error"]["line"] == 4 and data["user_code_error"]["error"].startswith("SyntaxError")


def test_probe_bench_and_profile_bench_import_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws, _ = _broken_round(tmp_path, "raise RuntimeError('boom at import')")
    add_operator(ws, "softmax", "baseline/softmax.py")
    expected = "opt-round-1/opt_softmax.py:4: RuntimeError: boom at import"
    os.chdir(ws)
    assert main(["probe-bench", "--operator-file", "opt-round-1/opt_softmax.py",
                 "--baseline-operator-file", "baseline/softmax.py"]) == 1
    assert f"FAIL: {expected} — fix the operator and run again" in capsys.readouterr().out
    assert main(["profile-bench", "--operator-file", "opt-round-1/opt_softmax.py", "--case-id", "fp32_4x64"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL: {expected} — fix the operator and run again" in out, out
    for job in list_jobs(ws):
        if job.status == "failed":
            _only_user_frames((job_dir(ws, job.id) / "output.log").read_text())


def test_error_raised_in_a_module_the_operator_imports_names_that_module(tmp_path: Path) -> None:
    (tmp_path / "helper_mod_uc.py").write_text("x = 1\ny = (\n")
    op = tmp_path / "op_uc.py"
    op.write_text("import helper_mod_uc\n")
    with pytest.raises(UserCodeError) as exc:
        import_file(op)
    assert str(exc.value).startswith("helper_mod_uc.py:2: SyntaxError:")
    assert exc.value.line == 2


def test_prepare_baseline_names_the_operator_the_user_edits(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_ws(tmp_path, "softmax", standalone=False)
    op = ws / "softmax.py"
    lines = op.read_text().splitlines()
    lines.insert(3, "x = (((")
    op.write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(ws)
    assert main(["prepare-baseline", "."]) == 1
    out = capsys.readouterr().out
    assert "FAIL: softmax.py:4: SyntaxError: '(' was never closed — fix the operator and run again" in out, out
