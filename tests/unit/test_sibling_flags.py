"""Names and flags from the sibling skills (issue 14, build 3): the run-test-* aliases, -o/--output,
--verbose and --target-op where upstream has them, --remote* refused with a sentence (exit 2), and an
unknown command answered with "did you mean" and the command list."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.cli import build_parser, main
from helix_engine.commands import compat
from helix_engine.commands.eval import _report, cmd_run_test
from helix_engine.errors import HelixError
from helix_engine.eval.test import TestOutcome

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "tests" / "fixtures" / "kernels"
SIBLINGS = ("run-test-baseline", "run-test-convert", "run-test-optimize")
REMOTE_COMMANDS = ([name] for name in (*SIBLINGS, "run-test", "run-bench", "probe-bench", "profile-bench"))
REMOTE_COMMANDS = [*REMOTE_COMMANDS, ["ir", "capture"]]


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("name", SIBLINGS)
def test_each_sibling_name_is_run_test(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse(name, "--operator-file", "op.py", "--ref-result", "r.pt", "-o", "out.txt", "--verbose")
    assert args.func is cmd_run_test and args.sibling == name
    assert args.ref_result == Path("r.pt") and args.report_file == Path("out.txt") and args.verbose
    assert _parse("run-test", "--operator-file", "op.py").sibling is None
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"{name} is the sibling skill's name" in capsys.readouterr().out.replace("\n", " ")


def _softmax_ws(tmp_path: Path, test: str) -> Path:
    shutil.copy(KERNELS / "ops" / "softmax.py", tmp_path / "softmax.py")
    shutil.copy(KERNELS / "harness" / test, tmp_path / test)
    return tmp_path / "softmax.py"


@pytest.mark.parametrize("name", ["run-test-convert", "run-test-optimize"])
def test_convert_and_optimize_need_a_reference_for_a_differential_test(name: str, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    op = _softmax_ws(tmp_path, "differential_test_softmax.py")
    assert main([name, "--operator-file", str(op)]) == 1
    err = capsys.readouterr().err
    assert f"{name} compares the operator against a reference: add --ref-operator-file" in err
    assert not (tmp_path / ".helix" / "jobs").exists()  # refused before any job started
    with pytest.raises(SystemExit) as two:  # at most one reference (argparse's group)
        main([name, "--operator-file", str(op), "--ref-result", "a.pt", "--ref-operator-file", "b.py"])
    assert two.value.code == 2


def test_baseline_needs_no_reference_and_standalone_tests_take_none(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "s").mkdir()
    diff_op = _softmax_ws(tmp_path / "d", "differential_test_softmax.py")
    alone_op = _softmax_ws(tmp_path / "s", "test_softmax.py")
    base = {"test_file": None, "test_mode": None, "ref_operator_file": None, "ref_result": None}
    compat.check_sibling_reference(argparse.Namespace(sibling="run-test-baseline", operator_file=diff_op, **base))
    compat.check_sibling_reference(argparse.Namespace(sibling="run-test-optimize", operator_file=alone_op, **base))
    compat.check_sibling_reference(argparse.Namespace(sibling=None, operator_file=diff_op, **base))
    with pytest.raises(HelixError, match="run-test-optimize compares"):
        compat.check_sibling_reference(argparse.Namespace(sibling="run-test-optimize", operator_file=alone_op,
                                                          **{**base, "test_mode": "differential",
                                                             "test_file": alone_op.parent / "test_softmax.py"}))


@pytest.mark.parametrize("argv", REMOTE_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("flag", [["--remote", "me@host:22"], ["--remote-workdir", "/w"], ["--keep-remote-workdir"],
                                  ["--remote"]])
def test_remote_flags_are_refused_with_a_sentence(argv: list[str], flag: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main([*argv, "--operator-file", "op.py", *flag])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {flag[0]}: remote runs over SSH are not supported; run helix on that machine, or send the " \
           "job to a Ray cluster with --cluster ADDRESS (or HELIX_CLUSTER)" in err
    assert f"usage: helix {' '.join(argv)}" in err


def test_eval_flags_parse_with_upstreams_meaning() -> None:
    bench = _parse("run-bench", "--operator-file", "op.py", "-o", "p.txt", "--verbose")
    assert bench.output == Path("p.txt") and bench.verbose  # -o is the perf file, as upstream's --output
    prof = _parse("profile-bench", "--operator-file", "op.py", "--case-id", "c", "--target-op", "k", "--verbose")
    assert prof.target_op == "k" and prof.verbose
    cap = _parse("ir", "capture", "--ir-dir", "d", "--operator-file", "op.py", "--verbose")
    assert cap.verbose
    assert not _parse("ir", "capture", "--ir-dir", "d", "--operator-file", "op.py").verbose
    assert not hasattr(_parse("run-bench", "--operator-file", "op.py"), "remote")


def _outcome(text: str) -> TestOutcome:
    return TestOutcome(exit_code=1, return_code=1, test_mode="standalone", operator_file="op.py",
                       test_file="test_op.py", archived_result=None, stdout="", comparison=None, job_id="j1",
                       job_status="failed", message="boom", text=text)


def test_run_test_output_file_holds_what_was_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sub" / "result.txt"
    out.parent.mkdir()
    text = "Return code: 1\nFAIL: case \x1b[31mred\x1b[0m"
    assert _report(argparse.Namespace(json=False, report_file=out), _outcome(text)) == 1
    printed = capsys.readouterr().out
    assert out.read_text() == printed and "\\x1b[31mred" in printed  # escaped in both
    assert _report(argparse.Namespace(json=True, report_file=out), _outcome(text)) == 1
    assert json.loads(out.read_text()) == json.loads(capsys.readouterr().out)
    with pytest.raises(HelixError, match="pick a writable path for -o/--output"):
        _report(argparse.Namespace(json=False, report_file=out / "x.txt"), _outcome(text))  # under a file


def test_verbose_job_output_reads_output_log_through_the_safe_reader(tmp_path: Path) -> None:
    from helix_engine.jobs.registry import OUTPUT_NAME, job_dir

    op = _softmax_ws(tmp_path, "test_softmax.py")
    (tmp_path / "baseline").mkdir()
    folder = job_dir(tmp_path, "20260101-000000-profile-ab12")
    folder.mkdir(parents=True)
    (folder / OUTPUT_NAME).write_text("compiling\n\x1b]0;title\x07done\n")
    shown = compat.job_output(op, ["20260101-000000-profile-ab12", "20260101-000000-ir-none"])
    assert "--- job 20260101-000000-profile-ab12 output" in shown
    assert "compiling\n\\x1b]0;title\\x07done" in shown and "\x1b" not in shown
    assert shown.endswith("(no output.log)")
    big = "x" * 70_000 + "\nTAIL"
    (folder / OUTPUT_NAME).write_text(big)
    shown = compat.job_output(op, ["20260101-000000-profile-ab12"])
    assert "… (earlier output is in the file)" in shown and shown.endswith("TAIL") and len(shown) < 66_000


def test_unknown_command_says_did_you_mean_and_lists_the_commands(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "helix_tui.cli", "run-test-optimise"], cwd=tmp_path, check=False,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage: helix tui" not in proc.stderr
    assert "'run-test-optimise' is not a helix command; did you mean `helix run-test-optimize`" in proc.stderr
    listed = proc.stderr.split("lists every command: ", 1)[1].strip().split(", ")
    assert {"run-test", "run-test-baseline", "patterns", "profile-bench", "status"} <= set(listed)
    assert listed == sorted(listed)
