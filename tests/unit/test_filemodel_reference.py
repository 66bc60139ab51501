"""The workspace's files read and write as they did when their models were pydantic (issue 12):
every state, workflow, perf and goals file in the repository, and arbitrary JSON edits of each
kind of file, give the same verdict (valid or not) and the same written form from the filemodel
classes as from the pydantic reference models (tests/unit/reference_models.py, the definitions
before the move)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helix_engine.state import goals
from helix_engine.workspace import models
from tests.unit import reference_models as reference

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("RoundState", "BaselineState", "WorkflowState", "PerfRecord", "Goals")


def _written(model: Any, data: Any) -> tuple[bool, str | None]:
    try:
        built = model.model_validate(copy.deepcopy(data))
    except ValueError:  # both kinds of validation error are ValueErrors
        return False, None
    return True, json.dumps(built.to_json(), default=str)


def _ours(kind: str) -> Any:
    return goals.Goals if kind == "Goals" else getattr(models, kind)


def _agree(kind: str, data: Any) -> None:
    assert _written(_ours(kind), data) == _written(getattr(reference, kind), data), (kind, data)


def _files(*roots: Path) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for path in sorted(p for root in roots for p in root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            if path.name == "round-state.json":
                found.append(("RoundState", json.loads(path.read_text())))
            elif path.name == "state.json":
                found.append(("BaselineState" if path.parent.name == "baseline" else "WorkflowState",
                              json.loads(path.read_text())))
            elif path.name == "goals.json":
                found.append(("Goals", json.loads(path.read_text())))
            elif path.name.endswith("_perf.txt"):
                found += [("PerfRecord", json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
        except (UnicodeDecodeError, ValueError):
            continue  # a fixture that is broken on purpose: its own tests cover it
    return found


def test_every_file_in_the_repository_and_a_generated_workspace_reads_and_writes_as_before(tmp_path: Path) -> None:
    from tests.builders import generate_large_workspace

    ws = generate_large_workspace(tmp_path, rounds=12, cases=5, samples=4)
    files = _files(ROOT / "examples", ROOT / "tests" / "fixtures", ws)
    assert {kind for kind, _ in files} >= {"RoundState", "BaselineState", "WorkflowState", "PerfRecord"}
    for kind, data in files:
        _agree(kind, data)


_BASE: dict[str, dict[str, Any]] = {
    "RoundState": {"round": "opt-round-1", "parent_round": "baseline", "hypothesis": "h", "evidence_sources": ["a"],
                   "correctness_status": "passed", "benchmark_status": "passed", "summary_path": "summary.md",
                   "opt_note_updated": True, "perf_artifact": "p.txt", "comparison_target_path": "../baseline/p.txt",
                   "effective_metric_source": "kernel"},
    "PerfRecord": {"case_label": "a", "kernel_names": ["k"], "kernel_avg_time_us": 1.5,
                   "ops": [{"op_type": "x", "avg_time_us": 2}], "total_op_avg_time_us": 3.0,
                   "bench_mode": "perf-counter", "samples_us": [1.0, 2.0],
                   "stats": {"median": 1, "mean": 1, "p10": 1, "p90": 1, "stdev": 0, "n": 2},
                   "context": {"host": "h", "load_avg": 1}},
    "WorkflowState": {"schema_version": 1, "run_id": "r", "phase": "round_active", "current_round": 1,
                      "baseline": {"status": "passed", "submitted_at": "t"},
                      "rounds": {"1": {"status": "active", "round_dir": "opt-round-1", "parent_round": "baseline",
                                       "strategy_state": {"round_strategy": "exploration",
                                                          "analysis_policy": "pattern_entry", "reason": "r",
                                                          "updated_at": "t", "updated_by": "start-round"}}}},
    "BaselineState": {"baseline_kind": "k", "source_operator": "a.py", "baseline_operator": "b.py",
                      "test_file": "t.py", "test_mode": "differential", "bench_file": "b.py",
                      "bench_mode": "perf-counter", "perf_artifact": "p.txt", "correctness_status": "passed",
                      "benchmark_status": "passed", "baseline_established": True},
    "Goals": {"schema_version": 1, "target_speedup": 1.5, "max_rounds": 10},
}
_VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, 1, 2, -1, 1.5, 2.0, 10**30, "", "x", "1", "yes", " yes ", "passed",
                     "failed", "not_run", "kernel", "mixed", "opt-round-2", "baseline", "awaiting_round_start",
                     "active", " 7 ", "5.0", "nan", "round_active"]),
    st.floats(), st.integers(), st.text(max_size=4),
    st.lists(st.sampled_from(["a", 1, None, {"op_type": "y"}]), max_size=2),
    st.dictionaries(st.sampled_from(["a", "op_type", "median", "status", "round_dir"]),
                    st.sampled_from([1, "x", None, 2.5]), max_size=2))


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found.append((*prefix, key))
        found += _paths(value, (*prefix, key))
    return found


_EDITS = [None, True, False, 0, 1, 2, -1, 1.5, 2.0, 2**63, 10**30, 10**400, float("nan"), float("inf"), "", "x", "1",
          "yes", " yes ", "TRUE", "passed", "failed", "not_run", "kernel", "mixed", "baseline", " 7 ", "5.0", "1e3",
          "nan", [], ["a"], [1], {}, {"a": 1}, {"op_type": "y", "avg_time_us": "2"}]


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_given_every_kind_of_value_reads_and_writes_as_before(kind: str) -> None:
    """Each field (nested ones too) set to each value above, and each dropped, one at a time."""
    for path in _paths(_BASE[kind]):
        for value in [*_EDITS, KeyError]:
            record = copy.deepcopy(_BASE[kind])
            target = record
            for key in path[:-1]:
                target = target[key]
            if value is KeyError:
                if not isinstance(target, dict):
                    continue
                del target[path[-1]]
            else:
                target[path[-1]] = copy.deepcopy(value)
            _agree(kind, record)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(KINDS), st.data())
def test_any_edit_of_a_file_reads_and_writes_as_before(kind: str, data: st.DataObject) -> None:
    record = copy.deepcopy(_BASE[kind])
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(record)))
        target = record
        for key in path[:-1]:
            target = target[key]
        if isinstance(target, dict) and data.draw(st.booleans()) and data.draw(st.booleans()):
            target.pop(path[-1], None)  # a key dropped
        else:
            target[path[-1]] = copy.deepcopy(data.draw(_VALUES))  # a drawn dict may be drawn again
    if data.draw(st.booleans()):
        record[data.draw(st.sampled_from(["extra", "zeta", "comparison_target"]))] = copy.deepcopy(data.draw(_VALUES))
    _agree(kind, json.loads(json.dumps(record)))  # what a file can hold


@pytest.mark.parametrize("kind", KINDS)
def test_the_reference_is_the_models_own_declaration(kind: str) -> None:
    """The reference declares the same fields, in the same order, as the models it stands for."""
    ours, theirs = _ours(kind), getattr(reference, kind)
    assert ours.field_names() == tuple(theirs.model_fields)
