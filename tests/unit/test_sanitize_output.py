"""Issue 11, finding 3: no workspace text reaches the terminal raw.

A hostile workspace (tests/hostile.py) carries ``ESC ]0;TITLE BEL ESC [2J ESC ]52;c;… BEL``,
a C1 CSI, a right-to-left override and Rich markup in case labels, folder names (one of them
invalid UTF-8), job fields, events, output.log, profiler op names and IR stages. Every helix
command that prints it as text must show it escaped (``\\x1b``), never raw; JSON stays valid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix_engine import cli  # noqa: E402
from helix_engine.errors import HelixError  # noqa: E402
from helix_engine.sanitize import SGR, GuardedStream, clean, clean_name, clean_output, guarded_stdio, is_clean  # noqa: E402

from hostile import ESCAPES, FORBIDDEN, JOB_ID, MARKUP, PAYLOAD, build_hostile_workspace, hostile, leaks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: How the payload's window-title sequence reads once escaped.
VISIBLE = "\\x1b]0;TITLE\\x07\\x1b[2J\\x1b]52;c;aGVsbG8=\\x07\\x9b2J\\u202e"


# ------------------------------------------------------------------------------ clean itself


def test_clean_makes_the_red_team_payload_visible() -> None:
    assert clean(ESCAPES) == "\\x1b]0;TITLE\\x07\\x1b[2J\\x1b]52;c;aGVsbG8=\\x07"
    assert clean(PAYLOAD) == VISIBLE + MARKUP
    assert leaks(clean(PAYLOAD)) == []


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x00", "\\x00"), ("\x08", "\\x08"), ("\x7f", "\\x7f"), ("\x85", "\\x85"), ("\x9b", "\\x9b"),
    ("\u202a", "\\u202a"), ("\u202e", "\\u202e"), ("\u2066", "\\u2066"), ("\u2069", "\\u2069"),
    ("\u200f", "\\u200f"), ("\u061c", "\\u061c"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"),
])
def test_each_unsafe_character_is_escaped(raw: str, shown: str) -> None:
    assert clean(f"a{raw}b") == f"a{shown}b"
    assert clean(f"a{raw}b", multiline=True) == f"a{shown}b"
    assert not is_clean(raw)


def test_multiline_keeps_newline_and_tab_but_never_a_carriage_return() -> None:
    assert clean("a\tb\nc\rd", multiline=True) == "a\tb\nc\\x0dd"
    assert clean("a\tb\nc\rd") == "a\\x09b\\x0ac\\x0dd"
    assert is_clean("a\tb\n", multiline=True) and not is_clean("a\tb\n")


def test_ordinary_text_is_unchanged() -> None:
    text = "latency-fp16_1024: baseline=10.0, compare=8.0, delta=-20.00% µs ★ ✔ 名称 [bold]x[/bold]"
    assert clean(text) == text and clean(text, multiline=True) == text and is_clean(text)


def test_undecodable_file_names_print_escaped_and_encodable() -> None:
    name = os.fsdecode(b"opt-round-\xff\xfe")
    assert clean_name(name) == "opt-round-\\udcff\\udcfe"
    clean_name(name).encode("utf-8")  # a lone surrogate would raise here
    assert clean(None) == "" and clean(Path("a\x1bb")) == "a\\x1bb" and clean(3) == "3"


def test_final_guard_keeps_helix_colours_and_escapes_the_rest() -> None:
    own = f"{SGR['green']}[OK] add{SGR['reset']}\n{SGR['red']}  Problem{SGR['reset']}\n"
    assert clean_output(own) == own
    assert clean_output(f"{SGR['green']}{PAYLOAD}{SGR['reset']}\n") == f"{SGR['green']}{VISIBLE}{MARKUP}{SGR['reset']}\n"

    class Sink:
        def __init__(self) -> None:
            self.text = ""

        def write(self, s: str) -> int:
            self.text += s
            return len(s)

        def isatty(self) -> bool:
            return True

    sink = Sink()
    stream = GuardedStream(sink)
    assert stream.write(PAYLOAD) == len(PAYLOAD) and stream.isatty()
    assert sink.text == VISIBLE + MARKUP


# ------------------------------------------------------------------ per-field escaping (formatters)


@pytest.fixture(scope="module")
def hx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    build_hostile_workspace(root)
    return root


def _assert_escaped(text: str) -> None:
    """No raw escape but helix's own colours, and the payload shown escaped."""
    for code in SGR.values():
        text = text.replace(code, "")
    assert leaks(text) == [], text
    assert "\\x1b]0;TITLE" in text  # shown, escaped, not dropped


def test_status_formatters_escape_names_and_problems(hx: Path) -> None:
    from helix_engine.status import collect, render

    statuses, _ = collect([hx])
    for view, fmt in (("best", "text"), ("best", "markdown"), ("trend", "text"), ("trend", "markdown"),
                      ("trend", "html")):
        _assert_escaped(render(statuses, view=view, fmt=fmt, color=True))
    text = render(statuses, fmt="text")
    assert "opt-round-\\udcff\\udcfe" in text  # the invalid UTF-8 folder, escaped


def test_compare_perf_block_escapes_case_labels(hx: Path) -> None:
    from helix_engine.perf import compare
    from helix_engine.perf.artifact import read_perf

    base, _ = read_perf(hx / "hostile" / "baseline" / "add_perf.txt")
    cand, _ = read_perf(hx / "hostile" / "opt-round-1" / "opt_add_perf.txt")
    text = compare.format_comparisons([compare.compare_records(base, cand, "auto", False, True)])
    _assert_escaped(text)
    assert f"latency-fp16{VISIBLE}{MARKUP}: baseline=10.0, compare=8.0, delta=-20.00%" in text.splitlines()
    a, _ = read_perf(hx / "perf-a.txt")
    b, _ = read_perf(hx / "perf-b.txt")
    for skip in (False, True):  # the FAIL line, and the list of skipped cases
        _assert_escaped(compare.format_comparisons([compare.compare_records(a, b, "auto", skip, True)]))


def test_jobs_event_lines_escape_every_field(hx: Path) -> None:
    from helix_engine.commands.jobs import format_event

    events = [json.loads(line) for line in
              (hx / "hostile" / ".helix" / "jobs" / JOB_ID / "events.jsonl").read_text().splitlines()]
    lines = [format_event(e) for e in events]
    assert all(leaks(line) == [] for line in lines), lines
    assert len(lines) == len(events) and all(len(line) <= 80 for line in lines)


def test_profile_and_ir_text_escape_names_and_lines(hx: Path) -> None:
    from helix_engine.ir.stages import diff_round
    from helix_engine.profile.report import build_report

    _assert_escaped(build_report(hx / "hostile" / "opt-round-1" / "profile").to_markdown())
    _assert_escaped(diff_round(hx / "hostile", 1).text)
    _assert_escaped(diff_round(hx / "hostile", 1, "add_kernel.ttir").text)


# ----------------------------------------------------------------- every command, as a subprocess


def _commands(root: Path) -> list[list[str]]:
    ws = root / "hostile"
    ir = ws / "opt-round-1" / "ir"
    job = ["-w", str(ws)]
    return [
        ["status", str(ws)], ["status", str(root)], ["status", str(root), "--format", "markdown"],
        ["status", str(root), "--view", "trend"], ["status", str(root), "--view", "trend", "--format", "markdown"],
        ["status", str(root), "--view", "trend", "--format", "html"],
        ["compare-perf", "--baseline", str(ws / "baseline" / "add_perf.txt"),
         "--compare", str(ws / "opt-round-1" / "opt_add_perf.txt"), "-m", "all"],
        ["compare-perf", "--baseline", str(root / "perf-a.txt"), "--compare", str(root / "perf-b.txt")],
        ["compare-perf", "--baseline", str(root / "perf-a.txt"), "--compare", str(root / "perf-b.txt"),
         "--skip-latency-errors"],
        ["jobs", *job], ["jobs", "show", JOB_ID, *job], ["jobs", "tail", JOB_ID, *job],
        ["jobs", "tail", JOB_ID, "--output", *job], ["jobs", "tail", JOB_ID, "--follow", *job],
        ["profile-report", "--profile-dir", str(ws / "opt-round-1" / "profile")],
        ["ir", "list-stages", "--ir-dir", str(ir)],
        ["ir", "stage-summary", "--ir-dir", str(ir), "--stage", "add_kernel.ttir"],
        ["ir", "diff-stages", "--ir-dir", str(ir), "--from", "add_kernel.ttir", "--to", "add_kernel.ttgir"],
        ["ir", "find-changes", "--ir-dir", str(ir)], ["ir", "performance-signals", "--ir-dir", str(ir)],
        ["ir", "diff", "--round", "1", "--workspace", str(ws)],
        ["ir", "diff", "--round", "1", "--workspace", str(ws), "--stage", "add_kernel.ttir"],
        ["ir", "diff", "--round", "2", "--workspace", str(ws)],  # an error naming the hostile parent
    ]


def _run(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "helix_engine", *args], cwd=ROOT, capture_output=True, timeout=120)


def test_no_command_prints_a_raw_escape_from_the_workspace(hx: Path) -> None:
    failures = []
    for args in _commands(hx):
        proc = _run(args)
        raw = proc.stdout + proc.stderr
        text = raw.decode("utf-8")  # strict: no undecodable byte from a file name either
        found = leaks(text)
        # the payload is shown, escaped (`jobs` list cuts its short columns before the payload)
        shown = "\\x1b]0;TITLE" in text or args[:2] == ["jobs", "-w"]
        if found or not shown or proc.returncode not in (0, 1) or "failed unexpectedly" in text:
            failures.append((args[:3], proc.returncode, found, text[-400:]))
    assert failures == []


def test_json_output_stays_valid_and_keeps_the_values(hx: Path) -> None:
    """JSON is written past the final guard: json.dumps escapes C0, and the values round-trip."""
    ws = hx / "hostile"
    shown = json.loads(_run(["jobs", "show", JOB_ID, "-w", str(ws), "--json"]).stdout)
    assert shown["job"]["kind"] == hostile("run-bench")
    tail = _run(["jobs", "tail", JOB_ID, "-w", str(ws), "--json"]).stdout.decode()
    assert json.loads(tail.splitlines()[-1])["x"] == hostile("odd")
    status = _run(["status", str(hx), "--json"])
    assert status.returncode == 0 and "\x1b" not in status.stdout.decode()
    names = {op["name"] for op in json.loads(status.stdout)["operators"]}
    assert hostile("ws").replace("/", "") in names


def test_the_cli_guard_catches_a_field_a_formatter_forgot(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import helix_engine.commands.status as status_cmd

    def forgetful(args: object) -> int:
        print(f"raw {PAYLOAD}")
        print(f"err {PAYLOAD}", file=sys.stderr)
        return 0

    # a parser an earlier test built (cli.command_names stashes one for the next main) holds the
    # real run_status: build it afresh, after the patch
    monkeypatch.setattr(cli, "_built", [])
    monkeypatch.setattr(status_cmd, "run_status", forgetful)
    assert cli.main(["status"]) == 0
    out, err = capsys.readouterr()
    assert out == f"raw {VISIBLE}{MARKUP}\n" and err == f"err {VISIBLE}{MARKUP}\n"

    def failing(args: object) -> int:
        raise HelixError(f"{PAYLOAD} is not a workspace")

    monkeypatch.setattr(status_cmd, "run_status", failing)
    assert cli.main(["status"]) == 1
    assert capsys.readouterr().err == f"error: {VISIBLE}{MARKUP} is not a workspace\n"
    with guarded_stdio():
        print(ESCAPES)
    assert capsys.readouterr().out == clean(ESCAPES) + "\n"
    assert not any(ch in clean(PAYLOAD) for ch in FORBIDDEN)


def test_eval_commands_escape_their_outcome_text(capsys: pytest.CaptureFixture[str]) -> None:
    """run-test / run-bench / probe-bench / prepare-baseline print texts that quote case labels,
    harness output and errors: one chokepoint per command escapes them (multi-line kept)."""
    import argparse

    from helix_engine.commands import eval as eval_cmd

    class Outcome:
        text = f"latency-{PAYLOAD}: baseline=1.0\nharness said {PAYLOAD}"
        exit_code = 1

    assert eval_cmd._report(argparse.Namespace(json=False), Outcome()) == 1
    out = capsys.readouterr().out
    assert out == f"latency-{VISIBLE}{MARKUP}: baseline=1.0\nharness said {VISIBLE}{MARKUP}\n"
    assert eval_cmd.user_code_failure(argparse.Namespace(json=False), ValueError(f"bench_{PAYLOAD}.py:3")) == 1
    assert leaks(capsys.readouterr().out) == []
