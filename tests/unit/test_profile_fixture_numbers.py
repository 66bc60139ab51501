"""Every number the Ascend parsers give on every profiler fixture, against the numbers the
previous parser (a csv.reader stream, replaced by polars chunks) gave on the same files.

``tests/fixtures/profile-golden.json`` was written by that previous parser
(``python3 tests/unit/test_profile_fixture_numbers.py --write`` at the commit before the
switch); regenerate it only when a number is meant to change, and say why in the commit.
Floats are compared to 1e-12 relative: the two parsers add the same values in a different
order, nothing else.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = FIXTURES / "profile-golden.json"
PROFILE_DIRS = [
    "ascend-profiler/standalone_real_output",
    "ascend-profiler/msprof_real_output",
    "ascend-profiler/realistic_parent_layout",
    "kernels/profiler/standalone",
    "kernels/profiler/msprof",
]


def _stat(s: Any) -> list[Any]:
    return [s.count, s.total, s.min if s.count else None, s.max if s.count else None]


def _problems(report: Any) -> list[list[Any]]:
    return [[p.message, p.line, p.severity] for p in report.problems]


def _csv_report(report: Any) -> dict[str, Any]:
    return {"header": list(report.header), "rows": report.rows, "skipped_rows": report.skipped_rows,
            "problems": _problems(report)}


def _rel(value: Any) -> Any:
    """Fixture paths relative to tests/fixtures, so the file does not depend on the checkout."""
    if isinstance(value, str):
        return value.replace(str(FIXTURES), "<FIX>")
    if isinstance(value, dict):
        return {k: _rel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rel(v) for v in value]
    return value


#: The report keys the parsers fill (symptom wording and pattern routing are not theirs).
REPORT_KEYS = ("profile_dir", "op_statistic_file", "op_summary_file", "task_time_file", "api_statistic_file",
               "msprof_json_file", "target_operator", "selection", "target_row", "op_summary", "core_type_totals",
               "data_movement_hotspots", "top_ops", "pipeline_signals", "task_timeline_signals", "host_api_signals",
               "msprof_timeline_signals", "op_count", "total_time_us", "hotspots", "notes", "problems")


def _parsed(report: dict[str, Any]) -> dict[str, Any]:
    return {k: report[k] for k in REPORT_KEYS}


def numbers() -> dict[str, Any]:
    """What every parser entry point says about every fixture (only public functions)."""
    from helix_engine.profile import ascend
    from helix_engine.profile.report import build_report

    out: dict[str, Any] = {}
    for rel in PROFILE_DIRS:
        folder = FIXTURES / rel
        layout = ascend.find_layout(folder)
        assert layout is not None and layout.op_statistic is not None, rel
        got: dict[str, Any] = {"mode": layout.mode}
        stats, report = ascend.read_op_statistic(layout.op_statistic)
        got["op_statistic"] = {"rows": [s.to_json() for s in stats], "report": _csv_report(report)}
        got["op_averages_msprof_rule"] = list(ascend.op_averages_from_op_statistic(layout.op_statistic, None).items())
        got["op_averages_repeats_10"] = list(ascend.op_averages_from_op_statistic(layout.op_statistic, 10).items())
        targets = [s.op_type for s in stats]
        if layout.op_summary is not None:
            per_target = {}
            for target in [*targets, None, "no_such_op"]:
                s = ascend.summarize_invocations(layout.op_summary, layout.mode, target)
                per_target[str(target)] = {
                    "name_column": s.name_column, "durations": _stat(s.durations),
                    "ratios": {k: _stat(v) for k, v in s.ratios.items()}, "cube_util": _stat(s.cube_util),
                    "wait": _stat(s.wait), "block_dims": s.block_dims,
                    "per_name": [[k, _stat(v)] for k, v in s.per_name.items()],
                    "step_ids": sorted(s.step_ids), "report": _csv_report(s.report)}
            got["invocations"] = per_target
            if layout.mode == ascend.MODE_TORCH:
                by_step = ascend.kernel_details_by_step(layout.op_summary, 7)
                got["kernel_details_by_step"] = {
                    "averages": list(by_step.averages.items()),
                    "steps": [[step, list(ops.items())] for step, ops in by_step.steps.items()]}
                got["op_averages_kernel_details"] = list(
                    ascend.op_averages_from_kernel_details(layout.op_summary, 7).items())
        if layout.task_time is not None:
            got["task_timeline"] = {}
            for target in targets:
                timeline, report = ascend.task_timeline(layout.task_time, target)
                got["task_timeline"][target] = {"timeline": timeline, "report": _csv_report(report)}
        if layout.api_statistic is not None:
            apis, report = ascend.read_api_statistic(layout.api_statistic)
            got["api_statistic"] = {"rows": [a.to_json() for a in apis], "report": _csv_report(report)}
        if layout.timeline_json is not None:
            tracks, problem = ascend.count_tracks(layout.timeline_json)
            got["tracks"] = [tracks, None if problem is None else problem.message]
        got["reports"] = {str(t): _parsed(build_report(folder, target_op=t, top=3).to_json()) for t in [None, *targets]}
        out[rel] = _rel(got)
    return json.loads(json.dumps(out))  # tuples → lists, as the golden file reads back


def _same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            _same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("rel", PROFILE_DIRS)
def test_every_fixture_gives_the_previous_parsers_numbers(rel: str) -> None:
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert list(want) == PROFILE_DIRS
    want[rel]["reports"] = {t: _parsed(r) for t, r in want[rel]["reports"].items()}
    _same(numbers()[rel], want[rel], rel)


def test_the_comparison_can_fail() -> None:
    """A changed number, a reordered op and a dropped problem are each caught."""
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))["ascend-profiler/standalone_real_output"]
    got = json.loads(json.dumps(want))
    got["invocations"]["matmul_kernel"]["durations"][1] *= 1 + 1e-9
    with pytest.raises(AssertionError, match="durations"):
        _same(got, want, "x")
    got = json.loads(json.dumps(want))
    got["op_averages_repeats_10"].reverse()
    got["op_averages_repeats_10"].append(["extra", 1.0])
    with pytest.raises(AssertionError):
        _same(got, want, "x")


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python3 tests/unit/test_profile_fixture_numbers.py --write  (rewrites the golden file)")
    sys.path.insert(0, str(ROOT))
    GOLDEN.write_text(json.dumps(numbers(), indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
