"""Perf JSONL read/write: upstream files load, ours round-trip, hostile files become problems."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from helix_engine.perf.artifact import (
    dump_record,
    parse_perf_text,
    read_perf,
    record_source,
    render_perf,
    write_perf,
)
from helix_engine.workspace.models import UPSTREAM_PERF_KEYS, PerfRecord, SampleStats

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "perf"
SECTION3 = FIXTURES / "spec_section3_perf.txt"


def _line(**fields: object) -> str:
    base: dict[str, object] = {"case_label": "a", "kernel_avg_time_us": 1.0, "bench_mode": "perf-counter"}
    base.update(fields)
    return json.dumps(base, separators=(",", ":"))


# ----------------------------------------------------------------------------- good files


def test_reads_the_upstream_spec_example() -> None:
    records, problems = read_perf(SECTION3)
    assert problems == []
    assert [r.case_label for r in records] == ["fp16_1024", "fp32_8192", "bf16_big"]
    first = records[0]
    assert first.kernel_avg_time_us == 10.0 and first.total_op_avg_time_us == 12.5
    assert [(o.op_type, o.avg_time_us) for o in first.ops or []] == [("softmax_kernel", 10.0), ("Cast", 2.5)]
    assert records[1].kernel_avg_time_us is None
    assert records[1].error_message == "no resolved kernels matched profiler kernel view"
    assert records[2].ops is None and records[2].error_message == "RuntimeError: launch failed"
    assert records[0].latency_id == "latency-fp16_1024"
    assert record_source(records[2]) == (str(SECTION3), 3)


def test_upstream_file_is_rewritten_byte_for_byte(tmp_path: Path) -> None:
    records, problems = read_perf(SECTION3)
    assert problems == []
    out = tmp_path / "again_perf.txt"
    write_perf(out, records)
    assert out.read_bytes() == SECTION3.read_bytes()


def test_helix_keys_follow_upstream_keys_and_unknown_keys_survive(tmp_path: Path) -> None:
    line = (
        '{"case_label":"c1","kernel_names":["k"],"kernel_source":"metadata","kernel_avg_time_us":2.0,'
        '"ops":[],"total_op_avg_time_us":2.0,"error_message":null,"case_wall_clock_seconds":0.1,'
        '"bench_mode":"perf-counter","future_key":{"x":[1,2]},"samples_us":[2.0,2.1,1.9],'
        '"method":"perf-counter","zz_last":"kept"}'
    )
    records, problems = parse_perf_text(line + "\n", "p.txt")
    assert problems == []
    path = tmp_path / "p_perf.txt"
    write_perf(path, records)
    written = json.loads(path.read_text(encoding="utf-8"))
    keys = list(written)
    assert keys[: len(UPSTREAM_PERF_KEYS)] == list(UPSTREAM_PERF_KEYS)
    assert keys[len(UPSTREAM_PERF_KEYS):] == ["samples_us", "method", "future_key", "zz_last"]
    assert written["future_key"] == {"x": [1, 2]} and written["zz_last"] == "kept"
    # compact separators, one line per record
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") == 1 and ", " not in text and '": ' not in text
    again, problems = read_perf(path)
    assert problems == []
    assert [r.to_json() for r in again] == [r.to_json() for r in records]


def test_read_write_read_with_stats_and_all_helix_keys(tmp_path: Path) -> None:
    record = PerfRecord(
        case_label="big",
        kernel_avg_time_us=5.0,
        total_op_avg_time_us=6.0,
        bench_mode="device-event",
        samples_us=[5.0, 5.1, 4.9],
        stats=SampleStats(median=5.0, mean=5.0, p10=4.92, p90=5.08, stdev=0.1, n=3, n_outliers=0),
        method="device-event",
        device="NVIDIA H200",
        backend="cuda",
        helix_version="0.1.0",
    )
    path = tmp_path / "x_perf.txt"
    write_perf(path, [record])
    loaded, problems = read_perf(path)
    assert problems == []
    assert loaded[0].to_json() == record.to_json()
    assert loaded[0].stats is not None and loaded[0].stats.n == 3
    assert dump_record(loaded[0]) == path.read_text(encoding="utf-8").rstrip("\n")


def test_blank_lines_are_skipped_and_line_numbers_stay_true() -> None:
    text = "\n" + _line(case_label="a") + "\n   \n\n" + _line(case_label="b") + "\n"
    records, problems = parse_perf_text(text, "f.txt")
    assert problems == []
    assert [record_source(r) for r in records] == [("f.txt", 2), ("f.txt", 5)]


def test_numeric_case_label_becomes_text() -> None:
    records, problems = parse_perf_text('{"case_label":7,"kernel_avg_time_us":1.5}\n', "f")
    assert problems == [] and records[0].case_label == "7" and records[0].latency_id == "latency-7"


def test_nan_and_negative_values_load_so_the_comparison_can_judge_them() -> None:
    text = '{"case_label":"a","kernel_avg_time_us":NaN}\n{"case_label":"b","kernel_avg_time_us":-1}\n'
    records, problems = parse_perf_text(text, "f")
    assert problems == []
    assert math.isnan(records[0].kernel_avg_time_us or 0.0)
    assert records[1].kernel_avg_time_us == -1.0


def test_render_of_nothing_is_empty() -> None:
    assert render_perf([]) == ""


# ------------------------------------------------------------------------- hostile files


@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_empty_file_is_a_problem(tmp_path: Path, text: str) -> None:
    path = tmp_path / "e_perf.txt"
    path.write_text(text, encoding="utf-8")
    records, problems = read_perf(path)
    assert records == []
    assert len(problems) == 1 and "empty" in problems[0].message and problems[0].line is None


def test_non_json_line_is_a_problem_with_its_line_and_other_lines_still_load() -> None:
    text = _line(case_label="a") + "\nlatency-case-1: 2.5\n" + _line(case_label="b") + "\n"
    records, problems = parse_perf_text(text, "f.txt")
    assert [r.case_label for r in records] == ["a", "b"]
    assert len(problems) == 1
    assert problems[0].line == 2 and problems[0].file == "f.txt"
    assert "invalid JSON" in problems[0].message


@pytest.mark.parametrize(
    ("line", "kind"),
    [("[1, 2]", "list"), ("3.5", "float"), ('"text"', "str"), ("null", "NoneType"), ("true", "bool")],
)
def test_json_that_is_not_an_object_is_a_problem(line: str, kind: str) -> None:
    records, problems = parse_perf_text(line + "\n", "f")
    assert records == []
    assert problems[0].line == 1 and f"JSON {kind}" in problems[0].message


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"kernel_avg_time_us": "fast"}, "kernel_avg_time_us"),
        ({"ops": "not a list"}, "ops"),
        ({"ops": [{"avg_time_us": 1.0}]}, "ops.0.op_type"),
        ({"error_message": 42}, "error_message"),
        ({"samples_us": ["x"]}, "samples_us.0"),
        ({"case_label": ["a"]}, "case_label"),
        ({"stats": {"median": 1.0}}, "stats.mean"),
    ],
)
def test_wrongly_typed_fields_are_problems(fields: dict[str, object], where: str) -> None:
    records, problems = parse_perf_text(_line(**fields) + "\n", "f")
    assert records == []
    assert problems[0].line == 1 and where in problems[0].message


@pytest.mark.parametrize("label_fields", [{"case_label": None}, {"case_label": ""}])
def test_missing_case_label_is_a_problem(label_fields: dict[str, object]) -> None:
    records, problems = parse_perf_text(_line(**label_fields) + "\n" + '{"kernel_avg_time_us":1}\n', "f")
    assert records == []
    assert [p.line for p in problems] == [1, 2] and all("case_label" in p.message for p in problems)


def test_duplicate_case_labels_are_a_problem_naming_both_lines() -> None:
    text = _line(case_label="a") + "\n" + _line(case_label="b") + "\n" + _line(case_label="a") + "\n"
    records, problems = parse_perf_text(text, "f")
    assert len(records) == 3  # kept, so writing the file back loses nothing
    assert len(problems) == 1
    assert problems[0].line == 3 and "'a'" in problems[0].message and "line 1" in problems[0].message


def test_deeply_nested_json_is_a_problem_not_a_crash() -> None:
    text = '{"case_label":"a","x":' + "[" * 100_000 + "]" * 100_000 + "}\n"
    records, problems = parse_perf_text(text, "f")
    assert records == [] and problems[0].line == 1


def test_binary_file_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "b_perf.txt"
    path.write_bytes(b"\x00\x01\x02binary\xff")
    records, problems = read_perf(path)
    assert records == [] and "binary" in problems[0].message


def test_non_utf8_file_is_a_problem_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin_perf.txt"
    path.write_bytes((_line(case_label="a") + "\n").encode() + b'{"case_label":"caf\xe9"}\n')
    records, problems = read_perf(path)
    assert records == []
    assert "UTF-8" in problems[0].message and problems[0].line == 2


def test_huge_file_is_refused_without_being_parsed(tmp_path: Path) -> None:
    path = tmp_path / "huge_perf.txt"
    line = _line(case_label="x" * 200) + "\n"
    with path.open("w", encoding="utf-8") as handle:
        handle.write(line * (17 * 1024 * 1024 // len(line) + 1))  # > the 16 MiB limit
    records, problems = read_perf(path)
    assert records == [] and "MB" in problems[0].message and "limit" in problems[0].message


def test_missing_file_and_directory_are_problems(tmp_path: Path) -> None:
    assert "missing" in read_perf(tmp_path / "nope_perf.txt")[1][0].message
    assert "directory" in read_perf(tmp_path)[1][0].message


def test_symlink_leaving_the_workspace_is_a_problem_and_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside_perf.txt"
    outside.write_text(_line(case_label="secret") + "\n", encoding="utf-8")
    ws = tmp_path / "ws"
    (ws / "baseline").mkdir(parents=True)
    link = ws / "baseline" / "add_perf.txt"
    os.symlink(outside, link)
    records, problems = read_perf(link, ws)
    assert records == []
    assert problems[0].file == "baseline/add_perf.txt"
    assert "outside the workspace" in problems[0].message
    # without a workspace boundary the same file is readable
    assert [r.case_label for r in read_perf(link)[0]] == ["secret"]


def test_a_final_symlink_is_not_followed_even_inside_the_workspace(tmp_path: Path) -> None:
    """DESIGN.md principle 8: no final symlink (a link can be swapped between check and read)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    real = ws / "real_perf.txt"
    real.write_text(_line(case_label="a") + "\n", encoding="utf-8")
    link = ws / "link_perf.txt"
    os.symlink(real, link)
    records, problems = read_perf(link, ws)
    assert records == [] and problems[0].file == "link_perf.txt"
    assert "is a symbolic link" in problems[0].message and "replace it with the file" in problems[0].message
    records, problems = read_perf(real, ws)
    assert problems == [] and record_source(records[0]) == ("real_perf.txt", 1)
