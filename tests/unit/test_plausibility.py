"""Plausibility (issue 27, item 7): submit-round holds a round whose geomean is above a bound
(default 10x, `helix goals --max-plausible-speedup`), or whose achieved bandwidth on a case is above
the copy peak with a working set larger than the device's L2, until `--accept-implausible REASON`,
which the ledger records. Real workspaces, the real CLI and checker; the gate's records are the
conftest fixture's (the gate itself is tested elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helix_engine.cli import main
from helix_engine.state.lifecycle import submit_round
from helix_engine.workspace.markdown import parse_opt_note, parse_result_numbers

from state_fixtures import new_workspace, put_round, scaled, workflow_json

HELD = "held for review: "
H200 = "NVIDIA H200"  # perf/peaks.py's table: 4800 GB/s datasheet copy peak, 50 MB L2


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_BACKEND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    ws = new_workspace(tmp_path)
    assert main(["submit-baseline", "--baseline-dir", str(ws / "baseline")]) == 0
    capsys.readouterr()
    return ws


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def _declare(ws: Path, n: int, device: str, nbytes: float | dict[str, float]) -> None:
    """Each record of opt-round-n's perf file measured on ``device``, declaring ``nbytes`` moved
    per call (per case label, when a dict; the keys run-bench writes: ``device``, ``roofline``)."""
    perf = ws / f"opt-round-{n}" / "opt_add_perf.txt"
    records = [json.loads(line) for line in perf.read_text().splitlines() if line.strip()]
    for record in records:
        moved = nbytes[record["case_label"]] if isinstance(nbytes, dict) else nbytes
        record.update(device=device, roofline={"bytes": moved, "dtype": "fp32"})
    perf.write_text("".join(json.dumps(r) + "\n" for r in records))


def _round(ws: Path, capsys: pytest.CaptureFixture[str], n: int, speedup: float, *submit: str,
           device: str | None = None, nbytes: float | dict[str, float] | None = None) -> tuple[int, dict[str, Any]]:
    """start-round, the round's artifacts at ``speedup`` vs the baseline, submit-round."""
    code, started = _cli(capsys, "start-round", "--round-dir", str(ws / f"opt-round-{n}"), "--round-strategy",
                         "exploration", "--analysis-policy", "pattern_entry", "--reason", f"round {n}",
                         "--parent-round", "baseline")
    assert code == 0, started
    put_round(ws, n, scaled(1 / speedup))
    if device is not None and nbytes is not None:
        _declare(ws, n, device, nbytes)
    return _cli(capsys, "submit-round", "--round-dir", str(ws / f"opt-round-{n}"), *submit)


def _ledger_entry(ws: Path, n: int) -> Any:
    path = ws / "opt-note.md"
    if not path.exists():
        return None
    return next((r for r in parse_opt_note(path.read_text()).rounds if r.number == n), None)


def _held(ws: Path, p: dict[str, Any], code: int, n: int = 1) -> list[str]:
    """The round was held: refused, nothing recorded (still active, no ledger entry); its findings."""
    assert code == 1 and p["status"] == "fail", p
    assert p["issues"][-1] == 'submit it with `--accept-implausible "why these numbers are real"` if it is'
    assert workflow_json(ws)["rounds"][str(n)]["status"] == "active"
    assert _ledger_entry(ws, n) is None
    return [issue.removeprefix(HELD) for issue in p["issues"][:-1] if issue.startswith(HELD)]


# ---------------------------------------------------------------------------------- geomean


def test_a_geomean_above_the_default_bound_is_held(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 20.0)
    found = _held(ws, p, code)
    # the workspace's cases declare no bytes: the finding says the bandwidth test did not apply
    assert found == ["geomean 20.00x is above the plausibility bound 10x (helix goals --max-plausible-speedup); "
                     "the bandwidth test did not apply: no case of its perf file declares the bytes it moves"]
    assert p["guideline"].startswith("round check requires fixes: held for review: geomean 20.00x")


def test_a_geomean_under_the_bound_is_promoted(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 8.0)
    assert code == 0 and p["status"] == "pass" and not any("held" in i for i in p["issues"]), p
    assert p["ledger"]["best_status"] == "current best" and p["ledger"]["final_best_round"] == "round-1"
    assert workflow_json(ws)["rounds"]["1"]["status"] == "passed"


def _backend(ws: Path, n: int, backend: str) -> None:
    perf = ws / f"opt-round-{n}" / "opt_add_perf.txt"
    records = [dict(json.loads(line), backend=backend) for line in perf.read_text().splitlines() if line.strip()]
    perf.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize("speedup, held", [(52.0, False), (150.0, True)])
def test_the_cpu_interpreter_has_a_bound_of_100x(ws: Path, capsys: pytest.CaptureFixture[str], speedup: float,
                                                 held: bool) -> None:
    """Under TRITON_INTERPRET a fused kernel removes Python overhead: the matmul example's honest
    round 1 measured 52x on 2 cores; 150x is still held."""
    _cli(capsys, "start-round", "--round-dir", str(ws / "opt-round-1"), "--round-strategy", "exploration",
         "--analysis-policy", "pattern_entry", "--reason", "round 1", "--parent-round", "baseline")
    put_round(ws, 1, scaled(1 / speedup))
    _backend(ws, 1, "cpu")
    code, p = _cli(capsys, "submit-round", "--round-dir", str(ws / "opt-round-1"))
    if held:
        assert _held(ws, p, code)[0].startswith(f"geomean {speedup:.2f}x is above the plausibility bound 100x")
    else:
        assert code == 0 and p["status"] == "pass", p


def test_the_bound_is_set_by_helix_goals(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["goals", str(ws), "--max-plausible-speedup", "25"]) == 0
    assert "above 25x for review (.helix/goals.json" in capsys.readouterr().out
    code, p = _round(ws, capsys, 1, 20.0)  # held at the default 10x; not under 25x
    assert code == 0 and p["ledger"]["best_status"] == "current best", p
    assert main(["goals", str(ws), "--max-plausible-speedup", "1.5", "--max-rounds", "9"]) == 0
    capsys.readouterr()
    code, shown = _cli(capsys, "goals", str(ws), "--json")
    assert (shown["max_plausible_speedup"], shown["max_rounds"]) == (1.5, 9)
    code, p = _round(ws, capsys, 2, 1.8)
    assert _held(ws, p, code, 2)[0].startswith("geomean 1.80x is above the plausibility bound 1.5x "
                                               "(helix goals --max-plausible-speedup); ")
    assert main(["goals", str(ws), "--clear"]) == 0  # back to the default
    capsys.readouterr()
    assert _cli(capsys, "goals", str(ws), "--json")[1]["max_plausible_speedup"] == 10.0


@pytest.mark.parametrize("value", ["1", "0.5", "inf", "fast"])
def test_a_bound_of_one_or_less_is_a_usage_error(ws: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["goals", str(ws), "--max-plausible-speedup", value])
    assert exc.value.code == 2 and "plausibility bound" in capsys.readouterr().err
    assert not (ws / ".helix" / "goals.json").exists()


# -------------------------------------------------------------------------------- bandwidth


def test_bandwidth_above_the_peak_with_a_working_set_over_the_l2_is_held(
        ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 2x (a plausible geomean); case a: 200 MB in 5 µs = 40000 GB/s, over the 4800 GB/s datasheet copy peak
    code, p = _round(ws, capsys, 1, 2.0, device=H200, nbytes=200e6)
    found = _held(ws, p, code)
    assert found[0] == ("case a achieved 40000 GB/s, above the copy peak 4800 GB/s (NVIDIA H200 SXM datasheet), "
                        "with a working set of 200 MB, larger than the 50 MB L2 of NVIDIA H200: no kernel reads DRAM "
                        "faster than a copy")
    assert len(found) == 3 and not any(f.startswith("geomean") for f in found)  # every case: a, b, c


def test_the_measured_copy_peak_is_the_bound_when_there_is_one(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.perf import peaks

    # at 2x, case c takes 20 µs: 90 MB in it is 4500 GB/s, under the 4800 GB/s datasheet figure ...
    work = {"a": 1e6, "b": 1e6, "c": 90e6}
    code, p = _round(ws, capsys, 1, 2.0, device=H200, nbytes=work)
    assert code == 0 and p["ledger"]["best_status"] == "current best", p
    # ... and over the copy `helix calibrate --peak` measured on this device
    peaks.store(ws, peaks.MeasuredPeak(device=H200, backend="cuda", measured_at="2026-07-20T08:00:00Z",
                                       copy_gbps=4224.0))
    code, p = _round(ws, capsys, 2, 2.0, device=H200, nbytes=work)
    assert _held(ws, p, code, 2) == [
        "case c achieved 4500 GB/s, above the copy peak 4224 GB/s (copy bandwidth measured 2026-07-20), with a "
        "working set of 90 MB, larger than the 50 MB L2 of NVIDIA H200: no kernel reads DRAM faster than a copy"]


def test_bandwidth_above_the_peak_within_the_l2_is_not_held(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # case a: 40 MB in 5 µs = 8000 GB/s, over the copy peak, but it fits the 50 MB L2 (the cache is timed)
    code, p = _round(ws, capsys, 1, 2.0, device=H200, nbytes=40e6)
    assert code == 0 and p["ledger"]["best_status"] == "current best", p


def test_without_a_known_l2_the_bandwidth_test_does_not_apply(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.perf import peaks

    # a measured copy peak but no L2 size (the CPU backend, an Ascend part): above the peak is not held ...
    peaks.store(ws, peaks.MeasuredPeak(device="cpu", backend="cpu", measured_at="2026-07-20T08:00:00Z",
                                       copy_gbps=20.0))
    code, p = _round(ws, capsys, 1, 2.0, device="cpu", nbytes=200e6)
    assert code == 0 and p["ledger"]["best_status"] == "current best", p
    # ... and a round held by its geomean says why the bandwidth test did not apply
    code, p = _round(ws, capsys, 2, 30.0, device="cpu", nbytes=200e6)
    found = _held(ws, p, code, 2)
    assert found == ["geomean 30.00x is above the plausibility bound 10x (helix goals --max-plausible-speedup); "
                     "the bandwidth test did not apply: the L2 size of cpu is not known (perf/peaks.py has the L2 "
                     "only of the parts in its table); case(s) a, b, c read above its copy peak"]


def test_without_a_copy_peak_nor_an_l2_the_finding_names_both(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 30.0, device="AMD EPYC", nbytes=1e6)  # the CPU backend, no calibrate --peak
    assert _held(ws, p, code) == [
        "geomean 30.00x is above the plausibility bound 10x (helix goals --max-plausible-speedup); the bandwidth "
        "test did not apply: the copy peak and the L2 size of AMD EPYC are not known (`helix calibrate --peak` "
        "measures the copy peak; perf/peaks.py has the L2 only of the parts in its table)"]


# ------------------------------------------------------------------------------- acceptance


def test_accept_implausible_with_a_reason_promotes_and_the_ledger_keeps_it(
        ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 20.0)
    held = _held(ws, p, code)
    reason = "the baseline launched three kernels per row; this fuses them"
    code, p = _cli(capsys, "submit-round", "--round-dir", str(ws / "opt-round-1"), "--accept-implausible", reason)
    assert code == 0 and p["status"] == "pass", p
    accepted = f"{reason} (implausible, accepted by the submitter with --accept-implausible; held for: {held[0]})"
    assert accepted in p["issues"]
    assert workflow_json(ws)["rounds"]["1"]["status"] == "passed"
    entry = _ledger_entry(ws, 1)
    assert entry.best_status == "current best"
    assert f"; accepted for review: {reason} (implausible, accepted by the submitter with --accept-implausible; " \
           "held for: geomean 20.00x is above the plausibility bound 10x" in entry.result
    assert p["ledger"]["result"] == entry.result
    # one number: the geomean the hold named is the one the ledger records
    assert parse_result_numbers(entry.result)[0] == 20.0


def test_a_long_reason_is_kept_whole_on_the_ledger_line(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 50.0)
    _held(ws, p, code)
    reason = "the baseline runs a naive triple loop in Triton's CPU interpreter, " * 4 + "so 50x is real"
    code, p = _cli(capsys, "submit-round", "--round-dir", str(ws / "opt-round-1"), "--accept-implausible", reason)
    assert code == 0 and f"accepted for review: {reason.strip()} (implausible" in _ledger_entry(ws, 1).result


def test_accept_implausible_on_a_plausible_round_records_nothing_extra(ws: Path) -> None:
    from helix_engine.state.lifecycle import start_round

    assert start_round(ws / "opt-round-1", "exploration", "pattern_entry", "r")[1] == 0
    put_round(ws, 1, scaled(1 / 2.0))
    payload, code = submit_round(ws / "opt-round-1", accept_implausible="just in case")
    assert code == 0 and payload["issues"] == [], payload
    assert "accepted" not in _ledger_entry(ws, 1).result


@pytest.mark.parametrize("reason", ["", "   "])
def test_an_empty_reason_is_refused(ws: Path, capsys: pytest.CaptureFixture[str], reason: str) -> None:
    code, p = _round(ws, capsys, 1, 20.0, "--accept-implausible", reason)
    assert (code, p["issues"]) == (1, ["--accept-implausible needs a reason"])
    assert "--accept-implausible \"why\"" in p["guideline"]
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active" and _ledger_entry(ws, 1) is None


def test_accept_findings_lands_in_the_ledger_too(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sibling hold (anti-cheat lint findings) records its reason on the same ledger line."""
    code, started = _cli(capsys, "start-round", "--round-dir", str(ws / "opt-round-1"), "--round-strategy",
                         "exploration", "--analysis-policy", "pattern_entry", "--reason", "r")
    assert code == 0, started
    rdir = put_round(ws, 1, scaled(1 / 2.0))
    op = rdir / "opt_add.py"
    op.write_text(op.read_text() + "\nimport threading\n_t = threading.Thread(target=print)\n")
    code, p = _cli(capsys, "submit-round", "--round-dir", str(rdir))
    assert code == 1 and p["issues"][0].startswith(HELD), p
    code, p = _cli(capsys, "submit-round", "--round-dir", str(rdir), "--accept-findings", "a logging thread")
    assert code == 0, p
    assert "held for review, accepted by the submitter: a logging thread" in p["issues"]
    assert _ledger_entry(ws, 1).result.endswith(
        "accepted for review: held for review, accepted by the submitter: a logging thread")
