"""filemodel: the workspace file models' checks accept and convert what pydantic's lax mode did.

The file models left pydantic (issue 12: its import and builds were ~60 ms of `helix status`), but
the files users and upstream tools wrote must read exactly as before: the same values accepted and
converted the same way, the same ones refused, at the same places. The property test holds each
kind of field against a pydantic model of the same declaration, on arbitrary JSON values.
"""

from __future__ import annotations

import json
import math
import pickle
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError

from helix_engine.workspace import filemodel
from helix_engine.workspace.filemodel import FileModel, ValidationError
from helix_engine.workspace.models import PerfRecord, RoundState, WorkflowState
from helix_engine.workspace.reading import describe_validation


class Inner(FileModel):
    n: int
    tag: str | None = None


class Kinds(FileModel):
    text: str | None = None
    flag: bool | None = None
    count: int | None = None
    value: float | None = None
    status: Literal["passed", "failed"] | None = None
    one: Literal[1] | None = None
    names: list[str] | None = None
    table: dict[str, float] | None = None
    pair: tuple[float, float] | None = None
    inner: Inner | None = None
    inners: list[Inner] | None = None


class PInner(BaseModel):
    model_config = ConfigDict(extra="allow")
    n: int
    tag: str | None = None


class PKinds(BaseModel):
    model_config = ConfigDict(extra="allow")
    text: str | None = None
    flag: bool | None = None
    count: int | None = None
    value: float | None = None
    status: Literal["passed", "failed"] | None = None
    one: Literal[1] | None = None
    names: list[str] | None = None
    table: dict[str, float] | None = None
    pair: tuple[float, float] | None = None
    inner: PInner | None = None
    inners: list[PInner] | None = None


_WORDS = st.sampled_from(["", "1", "0", "2", "-3", "1.5", "1e3", "true", "False", "YES", "no", "on", "off",
                          "t", "f", "y", "n", "passed", "failed", " 7 ", "nan", "inf", "x", "1_000", "5.0", "+5", "5.5",
                          "-0", "1e20", "0x10", "١", "\t3\n", "Infinity", "-inf", "1.", ".5", " yes ", "yes ", "No",
                          "TRUE"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=False, allow_infinity=False),
                     st.sampled_from([0.0, 1.0, 2.0, 1.5, -0.0, 1e20, 2.0**63, -2.0**63, 9.2e18, math.nan, math.inf,
                                      -math.inf, 10**400, -10**400, 2**63]),
                     _WORDS, st.text(max_size=4))
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(["n", "tag", "x"]), inner,
                                                                       max_size=3)), max_leaves=6)
_FIELDS = ["text", "flag", "count", "value", "status", "one", "names", "table", "pair", "inner", "inners"]


def _theirs(data: dict[str, Any]) -> tuple[bool, Any, list[tuple[Any, ...]]]:
    try:
        return True, PKinds.model_validate(data).model_dump(mode="python"), []
    except PydanticError as exc:
        return False, None, sorted(tuple(e["loc"]) for e in exc.errors())


def _ours(data: dict[str, Any]) -> tuple[bool, Any, list[tuple[Any, ...]]]:
    try:
        return True, Kinds.model_validate(data).model_dump(mode="python"), []
    except ValidationError as exc:
        return False, None, sorted(tuple(e["loc"]) for e in exc.errors())


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (1 is not 1.0 here, nor a tuple a list)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and (a == b or a != a and b != b)  # NaN is NaN here


@settings(max_examples=int(__import__("os").environ.get("FM_EXAMPLES", 600)), deadline=None, database=None)
@given(st.sampled_from(_FIELDS), _JSON)
def test_each_kind_accepts_converts_and_refuses_as_pydantic_did(name: str, value: Any) -> None:
    data = {name: value, "other": 3}
    ok, dumped, locs = _ours(data)
    their_ok, their_dumped, their_locs = _theirs(data)
    assert ok == their_ok, (data, locs, their_locs)
    if ok:
        assert _same(dumped, their_dumped), (data, dumped, their_dumped)
    else:  # pydantic names a union's member in some locations ('tuple[float, float]'): compare the fields
        assert {loc[0] for loc in locs} == {loc[0] for loc in their_locs}
        if name in ("flag", "count", "value"):  # a scalar's error: the same kind as pydantic's
            assert _kinds(Kinds, data) == _kinds(PKinds, data), data


def _kinds(model: Any, data: dict[str, Any]) -> list[str]:
    try:
        model.model_validate(data)
    except (ValidationError, PydanticError) as exc:
        return sorted(e["type"] for e in exc.errors())
    return []


def test_missing_fields_and_hooks_read_as_pydantic_errors_did() -> None:
    with pytest.raises(ValidationError) as exc:
        RoundState.model_validate({"round": 1, "correctness_status": "bad", "benchmark_status": "passed"})
    errors = exc.value.errors()
    assert {"type": "missing", "loc": ("parent_round",), "msg": "Field required"} in errors
    assert {"type": "string_type", "loc": ("round",), "msg": "Input should be a valid string"} in errors
    assert {"type": "literal_error", "loc": ("correctness_status",),
            "msg": "Input should be 'passed', 'failed' or 'not_run'"} in errors
    assert describe_validation(exc.value).startswith("round: Input should be a valid string; parent_round is missing")
    assert str(exc.value).startswith(f"{exc.value.error_count()} validation errors for RoundState\nround\n")


def test_hooks_before_after_and_across_fields() -> None:
    base = {"round": "opt-round-1", "parent_round": "baseline", "hypothesis": "h", "evidence_sources": [],
            "correctness_status": "passed", "benchmark_status": "not_run", "summary_path": "summary.md"}
    state = RoundState.model_validate({**base, "opt_note_updated": "Yes", "comparison_target": "../baseline/a.py"})
    assert state.opt_note_updated is True and state.comparison_target_path == "../baseline/a.py"
    with pytest.raises(ValidationError, match="both set and differ"):
        RoundState.model_validate({**base, "opt_note_updated": 1, "comparison_target": "a", "comparison_target_path": "b"})
    with pytest.raises(ValidationError, match="must be a list of strings"):
        RoundState.model_validate({**base, "opt_note_updated": 1, "evidence_sources": [1]})
    with pytest.raises(ValidationError, match="these fields are missing: perf_artifact"):
        RoundState.model_validate({**base, "opt_note_updated": 1, "benchmark_status": "passed"})
    with pytest.raises(ValidationError, match=r"rounds\['2'\] has round_dir"):
        WorkflowState.model_validate({"run_id": "r", "rounds": {"2": {"status": "passed", "round_dir": "opt-round-3"}}})


def test_an_unknown_keys_nan_is_written_as_null_as_pydantic_did() -> None:
    theirs = PKinds.model_validate({"x": [math.nan, {"y": math.inf}], "value": math.nan}).model_dump(mode="json")
    ours = Kinds.model_validate({"x": [math.nan, {"y": math.inf}], "value": math.nan}).model_dump(mode="json")
    assert ours["x"] == theirs["x"] == [None, {"y": None}]
    assert math.isnan(ours["value"]) and math.isnan(theirs["value"])  # a declared float keeps it, as there
    data = {"x": [math.nan], "value": math.inf}
    text = Kinds.model_validate(data).model_dump_json()  # JSON text: strict, every NaN and infinity null
    assert text == PKinds.model_validate(data).model_dump_json() and json.loads(text)["value"] is None


def test_unknown_keys_survive_the_round_trip_in_order() -> None:
    line = {"case_label": 7, "kernel_avg_time_us": 3, "zeta": [1], "alpha": {"b": None}}
    record = PerfRecord.model_validate(line)
    assert record.case_label == "7" and record.kernel_avg_time_us == 3.0
    assert list(record.to_json())[-2:] == ["zeta", "alpha"] and record.model_extra == {"zeta": [1], "alpha": {"b": None}}
    assert record.model_fields_set == {"case_label", "kernel_avg_time_us", "zeta", "alpha"}
    copy = record.model_copy(update={"kernel_avg_time_us": 4.0})
    assert copy.kernel_avg_time_us == 4.0 and record.kernel_avg_time_us == 3.0 and copy.model_extra["zeta"] == [1]
    assert pickle.loads(pickle.dumps(record)) == record
    assert json.loads(record.model_dump_json())["zeta"] == [1]


def test_a_model_that_forbids_unknown_keys_refuses_them() -> None:
    from helix_engine.perf.margins import NoiseMargins

    with pytest.raises(ValidationError) as exc:
        NoiseMargins.model_validate({"default": 0.02, "typo": 1})
    assert exc.value.errors() == [{"type": "extra_forbidden", "loc": ("typo",), "msg": "Extra inputs are not permitted"}]
    assert NoiseMargins(default=0.03).model_dump_json() == ('{"default":0.03,"per_case":{},"per_case_median":{},'
                                                            '"per_case_unpaired":{},'
                                                            '"source":"default","file":null,"note":null}')


def test_a_class_compiles_its_checks_when_it_first_validates() -> None:
    class Late(FileModel):
        a: int
        b: list[str] = filemodel.field(default_factory=list)

    assert Late.__dict__.get("_spec") is None
    first, second = Late(a=1), Late(a="2")
    assert Late.__dict__.get("_spec") is not None
    assert (first.a, second.a, first.b, first.b is not second.b) == (1, 2, [], True)
    with pytest.raises(ValidationError):
        Late(a=1.5)
