"""Profiler CSVs are read through the safe reader, a bounded chunk at a time, by polars.

A FIFO, a link out of the workspace or a folder linked elsewhere where a profiler file should be
is a Problem with a sentence, never a hang and never a read of the outside file; the bytes polars
parses come from the descriptor that was checked (a file swapped after the open is not read);
chunk boundaries never change a number; polars is imported only when a profile is parsed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from helix_engine.errors import HelixError
from helix_engine.profile import ascend, csvstream
from helix_engine.profile.report import build_report

T = TypeVar("T")
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ascend-profiler"
STANDALONE = FIX / "standalone_real_output"
KD = STANDALONE / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"


def within(fn: Callable[[], T], fifo: Path, seconds: float = 5.0) -> T:
    """``fn()`` in a thread; fails the test (and unblocks the reader) when it blocks."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for _ in range(50):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(0.1)
        pytest.fail(f"did not return within {seconds:.0f} s: the read of {fifo.name} blocked")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _workspace_with_profile(tmp_path: Path) -> Path:
    """W/opt-round-1/profile/ASCEND_PROFILER_OUTPUT/… (the torch_npu layout of the fixture)."""
    profile = tmp_path / "ws" / "opt-round-1" / "profile"
    shutil.copytree(STANDALONE, profile)
    return profile


def test_fifo_kernel_details_is_a_problem_not_a_hang(tmp_path: Path) -> None:
    profile = _workspace_with_profile(tmp_path)
    kd = profile / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kd.unlink()
    os.mkfifo(kd)
    report = within(lambda: build_report(profile), kd)
    assert report.op_summary is not None and report.op_summary["count"] == 0  # the FIFO was not read
    assert any("FIFO" in p["message"] and p["severity"] == "error" for p in report.problems), report.problems
    with pytest.raises(ascend.ProfileDataError, match="FIFO"):
        within(lambda: ascend.kernel_details_by_step(kd, 10), kd)


def test_fifo_op_statistic_and_trace_are_problems_not_hangs(tmp_path: Path) -> None:
    profile = _workspace_with_profile(tmp_path)
    out = profile / "ASCEND_PROFILER_OUTPUT"
    (out / "trace_view.json").unlink()
    os.mkfifo(out / "trace_view.json")
    report = within(lambda: build_report(profile), out / "trace_view.json")
    assert report.msprof_timeline_signals == {"stream_like_tracks": None}
    assert any("FIFO" in p["message"] for p in report.problems)
    (out / "op_statistic.csv").unlink()
    os.mkfifo(out / "op_statistic.csv")
    with pytest.raises(HelixError, match="FIFO"):
        within(lambda: build_report(profile), out / "op_statistic.csv")


def test_kernel_details_linked_outside_is_refused(tmp_path: Path) -> None:
    profile = _workspace_with_profile(tmp_path)
    outside = tmp_path / "outside.csv"
    header, *rows = KD.read_text().splitlines()
    outside.write_text("\n".join([header, *(r.replace(",88.", ",99988.") for r in rows)]) + "\n")
    kd = profile / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kd.unlink()
    kd.symlink_to(outside)
    report = build_report(profile)
    assert report.op_summary is not None and report.op_summary["count"] == 0
    messages = " ".join(p["message"] for p in report.problems)
    assert "linked outside the workspace" in messages
    assert "99988" not in report.to_markdown()
    with pytest.raises(ascend.ProfileDataError, match="outside the workspace"):
        ascend.op_averages_from_kernel_details(kd, 10)


def test_profiler_folder_linked_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(STANDALONE / "ASCEND_PROFILER_OUTPUT", elsewhere)
    profile = tmp_path / "ws" / "opt-round-1" / "profile"
    profile.mkdir(parents=True)
    (profile / "ASCEND_PROFILER_OUTPUT").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(HelixError, match="outside the workspace"):
        build_report(profile)


def test_the_checked_descriptor_is_what_polars_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is swapped for another after the open, between two chunks: the rest of the
    numbers still come from the file that was opened and checked."""
    path = tmp_path / "kernel_details.csv"
    rows = [f"{1 + i % 4},k,{i}.5" for i in range(2000)]
    path.write_text("Step Id,Name,Duration(us)\n" + "\n".join(rows) + "\n")
    monkeypatch.setattr(csvstream, "CHUNK_BYTES", 1024)
    swapped: list[bool] = []
    real_ahead = csvstream._ahead

    def swap_after_first(items: Any, name: str) -> Any:
        for i, item in enumerate(real_ahead(items, name)):
            if i == 2 and not swapped:
                replacement = tmp_path / "other.csv"
                replacement.write_text("Step Id,Name,Duration(us)\n" + "1,k,1000000\n" * 5000)
                os.replace(replacement, path)
                swapped.append(True)
            yield item

    monkeypatch.setattr(csvstream, "_ahead", swap_after_first)
    averages = ascend.op_averages_from_kernel_details(path, 1)
    assert swapped and averages == {"k": pytest.approx(sum(i + 0.5 for i in range(2000)) / 4)}
    assert ascend.op_averages_from_kernel_details(path, 1) == {"k": 5000 * 1000000}  # the swap did happen


@pytest.mark.parametrize("chunk", [1, 7, 64, 333, 4096])
def test_chunk_boundaries_never_change_a_number(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real fixture (quoted cells holding commas, TAB-suffixed cells) cut every few bytes."""
    whole = ascend.summarize_invocations(KD, ascend.MODE_TORCH, "matmul_kernel")
    by_step = ascend.kernel_details_by_step(KD, 10)
    monkeypatch.setattr(csvstream, "CHUNK_BYTES", chunk)
    cut = ascend.summarize_invocations(KD, ascend.MODE_TORCH, "matmul_kernel")
    assert (cut.durations.count, cut.durations.total) == (whole.durations.count, pytest.approx(whole.durations.total))
    assert {k: v.total for k, v in cut.ratios.items()} == pytest.approx({k: v.total for k, v in whole.ratios.items()})
    assert cut.step_ids == whole.step_ids and cut.block_dims == whole.block_dims and cut.report.problems == []
    rounded = {step: {k: round(v, 9) for k, v in ops.items()} for step, ops in by_step.steps.items()}
    again = ascend.kernel_details_by_step(KD, 10).steps
    assert {step: {k: round(v, 9) for k, v in ops.items()} for step, ops in again.items()} == rounded
    assert list(again) == list(by_step.steps)  # first-seen order kept


def test_a_quoted_cell_spanning_lines_and_one_that_never_ends(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csvstream, "CHUNK_BYTES", 16)
    path = tmp_path / "kernel_details.csv"
    path.write_text('Step Id,Name,Note,Duration(us)\n1,k,"a\nlong, ""quoted""\nnote",2.5\n2,k,plain,3.5\n')
    assert ascend.op_averages_from_kernel_details(path, 9) == {"k": pytest.approx(3.0)}
    path.write_text('Step Id,Name,Note,Duration(us)\n1,k,plain,2.5\n2,k,"never closed,3.5\n' + "3,k,x,1\n" * 20)
    s = ascend.summarize_invocations(path, ascend.MODE_TORCH, "k")
    assert s.durations.count == 1 and s.report.problems[0].severity == "error"
    assert "quoted cell never ends" in s.report.problems[0].message


def test_polars_is_imported_only_to_parse_a_profile() -> None:
    code = ("import sys, helix_engine.cli, helix_engine.status, helix_engine.profile.report, "
            "helix_engine.profile.ascend; print('polars' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    code = ("import sys; from helix_engine.profile.ascend import op_averages_from_kernel_details as f; "
            f"f({str(KD)!r}, 10); print('polars' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"  # the check above can fail


def test_numbers_of_a_column_read_cells_as_number_does(tmp_path: Path) -> None:
    """The per-chunk conversion (`numbers_of`) and the per-row expression (`number`) agree on
    every cell: bare numbers, TAB/space-padded ones, N/A, garbage, inf and nan; and a duration
    column holding them averages the same through kernel_details_by_step."""
    import polars as pl

    cells = ["1.5", " 2.5", "3.5\t", "\t4 ", "N/A", "", None, "inf", "-inf", "nan", "1_000", "1e3", "x", "-0"]
    series = pl.Series("c", cells, dtype=pl.String)
    expected = pl.DataFrame({"c": series}).select(csvstream.number("c")).to_series().to_list()
    assert csvstream.numbers_of(series).to_list() == expected
    assert expected[:4] == [1.5, 2.5, 3.5, 4.0] and expected[7:10] == [None, None, None]
    bare = pl.Series("c", ["1.5", "2", None], dtype=pl.String)  # the fast path: a plain cast
    assert csvstream.numbers_of(bare).to_list() == [1.5, 2.0, None]
    path = tmp_path / "kernel_details.csv"
    path.write_text("Step Id,Name,Duration(us)\n" + "".join(f"{i % 2 + 1},k,{c or ''}\n" for i, c in enumerate(cells))
                    + "1,only_na,N/A\n")
    finite = [v for v in expected if v is not None]
    assert ascend.op_averages_from_kernel_details(path, 9) == {"k": pytest.approx(sum(finite) / 2)}


def test_a_block_held_past_its_turn_is_never_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """_blocks reuses its buffers (polars parses them in place): a block still held when its
    buffer comes round again keeps its bytes (copied on write), and the blocks cover the file."""
    path = tmp_path / "kernel_details.csv"
    lines = [f"{i},k{i % 7},{i}.25\n" for i in range(400)]
    path.write_text("Step Id,Name,Duration(us)\n" + "".join(lines))
    monkeypatch.setattr(csvstream, "CHUNK_BYTES", 100)
    with path.open("rb") as handle:
        handle.readline()
        blocks = csvstream._blocks(handle, b"", csvstream.CsvReadReport(path), b"c0,c1,c2\n")
        held = [(block, bytes(bytearray(block))) for block in blocks]  # each block and a private copy
    assert len(held) > 3 * csvstream.BUFFERS
    assert all(block == copy for block, copy in held)
    assert b"".join(copy[len(b"c0,c1,c2\n"):] for _, copy in held).decode() == "".join(lines)


def test_stopping_early_stops_the_reading_and_parsing_threads(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    path = tmp_path / "kernel_details.csv"
    path.write_text("Step Id,Name,Duration(us)\n" + "".join(f"{i},k,{i}\n" for i in range(3000)))
    monkeypatch.setattr(csvstream, "CHUNK_BYTES", 256)
    report = csvstream.CsvReadReport(path)
    chunks = csvstream.aggregate_chunks(path, report, ["Name"], lambda rows: [rows], root=tmp_path)
    first = next(chunks)
    assert {t.name.split("_")[0] for t in threading.enumerate()} >= {"helix-csv-read", "helix-csv-parse"}
    chunks.close()
    assert first[0].height > 0 and report.problems == []
    assert not {t.name.split("_")[0] for t in threading.enumerate()} & {"helix-csv-read", "helix-csv-parse"}


def test_a_query_error_is_raised_not_reported_as_a_damaged_file(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries run in the parsing threads; their errors are the caller's bug, not the file's; the
    ROW a result carries counts from the file's first row, whatever the chunk."""
    import polars as pl

    path = tmp_path / "kernel_details.csv"
    path.write_text("Step Id,Name,Duration(us)\n" + "".join(f"{i},k,{i}.5\n" for i in range(50)))
    report = csvstream.CsvReadReport(path)
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        list(csvstream.aggregate_chunks(path, report, ["Name"], lambda rows: [rows.select("Nope")], root=tmp_path))
    assert report.problems == []
    monkeypatch.setattr(csvstream, "CHUNK_BYTES", 64)
    parts = list(csvstream.aggregate_chunks(path, report, ["Name"], lambda rows: [rows.select(csvstream.ROW)],
                                            root=tmp_path))
    assert len(parts) > 5 and [r for part, in parts for r in part.get_column(csvstream.ROW)] == list(range(50))
