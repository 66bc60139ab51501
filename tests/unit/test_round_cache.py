"""Per-round summaries in .helix/cache/rounds.sealed (issue 12): a second `helix status` reads no
round's perf file and prints the same bytes; a file not sealed by this user's helix is judged
again, never trusted (and never unpickled); a paired sidecar or the baseline operator it pairs
against, changed, is seen by a reload and by a full load (the memo used to key a round by its
records only)."""

from __future__ import annotations

import json
import os
import pickle
import random
import time
from pathlib import Path
from typing import Any

import pytest

from helix_engine.perf import evaluation
from helix_engine.status import collect, render
from helix_engine.workspace import reading, records, round_cache, sealed, status_rules
from helix_engine.workspace.snapshot import load_workspace, reload
from tests.builders import Case, RoundSpec, build_workspace, generate_large_workspace, write_paired_sidecar

CACHE = Path(".helix") / "cache" / round_cache.CACHE_FILE


def _case(value: float, seed: int) -> Case:
    rng = random.Random(seed)
    samples = [round(value * rng.gauss(1.0, 0.01), 5) for _ in range(12)]
    return Case(kernel_us=value, total_op_us=value + 2.0, samples_us=samples)


def _workspace(tmp_path: Path) -> Path:
    rounds = [RoundSpec({"a": _case(a, n), "b": _case(b, n + 10)}, parent="baseline" if n == 1 else f"opt-round-{n - 1}")
              for n, (a, b) in enumerate([(8.0, 18.0), (9.0, 10.0), (7.0, 14.0), (12.0, 25.0)], start=1)]
    return build_workspace(tmp_path, baseline={"a": _case(10.0, 0), "b": _case(20.0, 1)}, rounds=rounds)


def _status_json(ws: Path) -> str:
    statuses, _ = collect([ws])
    return render(statuses, fmt="json")


def _uncached(ws: Path) -> str:
    (ws / CACHE).unlink(missing_ok=True)
    records.forget()
    text = _status_json(ws)
    (ws / CACHE).unlink(missing_ok=True)
    return text


def test_cached_and_uncached_status_json_are_byte_identical(tmp_path: Path, perf_reads: list[Path]) -> None:
    ws = _workspace(tmp_path)
    cold = _status_json(ws)
    assert (ws / CACHE).is_file() and len(perf_reads) == 5  # the baseline and 4 rounds
    perf_reads.clear()
    warm = _status_json(ws)
    assert warm == cold
    assert perf_reads == [ws / "baseline" / "add_perf.txt"]  # no round's perf file
    data = json.loads(cold)["operators"][0]
    assert data["promoted_best_round"] == "round-2" and data["rounds"][1]["promotion"]["vs_baseline"]["ci95"]


def test_a_same_bytes_rewrite_of_the_best_round_judges_no_later_round_again(
        tmp_path: Path, perf_reads: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Judgements against a best round are keyed by its records' content, not its file's
    identity: rewriting round 2 (the best round 3 is compared with) with the same bytes reads
    round 2 again and no later round, in a fresh status and in a reload alike."""
    ws = _workspace(tmp_path)
    expected = _uncached(ws)
    assert json.loads(expected)["operators"][0]["rounds"][2]["promotion"]["previous_best"] == "round-2"
    _status_json(ws)  # writes the cache
    best = ws / "opt-round-2" / "opt_add_perf.txt"
    best.write_bytes(best.read_bytes())
    records.forget()
    perf_reads.clear()
    assert _status_json(ws) == expected
    assert sorted(perf_reads) == sorted([ws / "baseline" / "add_perf.txt", best])
    snap = load_workspace(ws)
    best.write_bytes(best.read_bytes())
    records.forget()
    perf_reads.clear()
    again = reload(snap, [best])
    assert perf_reads == [best]
    assert again.promotion.rounds[3] == snap.promotion.rounds[3]
    changed = best.read_text().replace("9.0", "9.5")  # other records: round 3 is judged again,
    best.write_text(changed)  # from its compact values (its point vs round 2 cannot pass): no read
    records.forget()
    perf_reads.clear()
    compared: list[Any] = []
    original = evaluation.compare_values
    monkeypatch.setattr(evaluation, "compare_values", lambda *args: compared.append(args) or original(*args))
    after = reload(snap, [best])
    assert after.promotion.rounds[3] is not None and after.promotion.rounds[3].reason  # compared when read
    assert status_rules.view_values(snap.rounds[3]) in [args[1] for args in compared]
    assert ws / "opt-round-3" / "opt_add_perf.txt" not in perf_reads
    fresh = load_workspace(ws)
    assert after.promotion.rounds[3] == fresh.promotion.rounds[3] != snap.promotion.rounds[3]


def _opened(path: Path) -> Any:
    return sealed.unseal(path.read_bytes(), path.name)


def _resealed(path: Path, data: Any) -> None:
    """``data`` sealed as this user's helix seals (what only helix itself can write)."""
    path.write_bytes(sealed.seal(data, path.name))


class _Runs:
    """A pickle that creates a file when unpickled: a crafted cache must never get that far."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (self.marker,))


def _with_other_key(fn: Any) -> Any:
    sealed.forget_key()
    sealed._key = b"k" * sealed.KEY_BYTES  # noqa: SLF001 - another user's key
    try:
        return fn()
    finally:
        sealed.forget_key()


TAMPERS = {
    "a byte changed": lambda path, data, marker: path.write_bytes(path.read_bytes()[:-9] + b"X" + path.read_bytes()[-8:]),
    "not sealed": lambda path, data, marker: path.write_bytes(pickle.dumps(data)),
    "another user's key": lambda path, data, marker: path.write_bytes(_with_other_key(lambda: sealed.seal(data, path.name))),
    "other code": lambda path, data, marker: path.write_bytes(sealed.seal_bytes(pickle.dumps(data), path.name, "other code")),
    "sealed for another file": lambda path, data, marker: path.write_bytes(sealed.seal(data, round_cache.DELTA_FILE)),
    "code in a pickle": lambda path, data, marker: path.write_bytes(
        sealed.MAGIC + b"\0" * 32 + pickle.dumps({**data, "rounds": _Runs(marker)})),
    "code, another key": lambda path, data, marker: path.write_bytes(
        _with_other_key(lambda: sealed.seal({**data, "rounds": _Runs(marker)}, path.name))),
    "wrong version": lambda path, data, marker: _resealed(path, {**data, "version": 99}),
    "key of another file": lambda path, data, marker: (data["rounds"][3][0][2].__setitem__(2, [1, 2, 3, 4]),
                                                       _resealed(path, data)),
    "read of another state file": lambda path, data, marker: (data["reads"][3][0][0].__setitem__(1, 1),
                                                              _resealed(path, data)),
}


@pytest.mark.parametrize("tamper", [*TAMPERS, "a folder", "a link out"])
def test_a_cache_this_user_did_not_seal_is_never_trusted(tmp_path: Path, tamper: str) -> None:
    ws = _workspace(tmp_path / "ws")
    expected = _uncached(ws)
    _status_json(ws)  # writes the cache
    path = ws / CACHE
    data = _opened(path)
    assert data["version"] == round_cache.VERSION and 3 in data["rounds"] and 3 in data["reads"]
    marker = tmp_path / "ran"
    if tamper == "a folder":
        path.unlink()
        path.mkdir()
    elif tamper == "a link out":
        outside = tmp_path / "elsewhere.sealed"
        outside.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(outside)
    else:
        TAMPERS[tamper](path, data, marker)
    records.forget()
    assert _status_json(ws) == expected
    assert not marker.exists()  # nothing in a file that does not verify is ever unpickled
    if tamper not in ("a folder", "a link out"):  # written again, sealed: the next run reads it
        assert _opened(path)["version"] == round_cache.VERSION


def test_a_non_finite_time_in_a_perf_file_still_lets_the_cache_be_kept(tmp_path: Path) -> None:
    """A case stopped by an infinite time keeps that time in its problem; when the cache was strict
    JSON it could write none of it (every load judged every round again)."""
    ws = _workspace(tmp_path / "ws")
    perf = ws / "opt-round-2" / "opt_add_perf.txt"
    lines = perf.read_text().splitlines()
    first = json.loads(lines[0])
    first["kernel_avg_time_us"] = float("inf")
    perf.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    expected = _uncached(ws)
    assert _status_json(ws) == expected
    kept = _opened(ws / CACHE)
    assert 2 in kept["rounds"]
    records.forget()
    assert _status_json(ws) == expected  # and read back as it was computed


def test_a_warm_load_reads_no_round_state_and_sees_every_change_of_a_round_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The round folder memo (round_reading._remembered): a warm load reads no round-state.json,
    and a folder whose looked-at names changed (a file gone, a link, a rewritten state, an
    analysis declared) is read again: the output is the uncached one each time."""
    ws = _workspace(tmp_path / "ws")
    _status_json(ws)
    reads: list[Path] = []
    original = reading.load_model

    def spy(path: Path, *args: Any, **kwargs: Any) -> Any:
        reads.append(Path(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr("helix_engine.workspace.round_reading.load_model", spy)
    assert _status_json(ws) == _uncached(ws)
    _status_json(ws)  # the uncached run above removed the cache: written again
    reads.clear()
    _status_json(ws)
    assert not [p for p in reads if p.name == "round-state.json"]
    (ws / "elsewhere.md").write_text("# summary\n")
    state = ws / "opt-round-4" / "round-state.json"
    changes = [
        lambda: (ws / "opt-round-3" / "attempts.md").unlink(),
        lambda: ((ws / "opt-round-2" / "summary.md").unlink(),
                 (ws / "opt-round-2" / "summary.md").symlink_to(ws / "elsewhere.md")),
        lambda: state.write_text(state.read_text().replace('"passed"', '"failed"', 1)),
        lambda: state.write_text(json.dumps({**json.loads(state.read_text()), "perf_analysis_path": "pa.md"})),
        lambda: (ws / "opt-round-4" / "pa.md").write_text("analysis\n"),
    ]
    for change in changes:
        _status_json(ws)  # warm: the memo of every round is current
        change()
        records.forget()
        warm = _status_json(ws)
        assert warm == _uncached(ws)


def _pair_round(ws: Path, n: int, cand: tuple[float, float]) -> Path:
    """A paired sidecar for round ``n`` against the baseline whose paired job measured the round's
    cases a, b at ``cand``: the same speedup as the reference measured at 10·r and 20·r with the
    round's perf-file times r·cand (the builder takes the round's perf file as the candidate side)."""
    perf = ws / f"opt-round-{n}" / "opt_add_perf.txt"
    mine = {json.loads(line)["case_label"]: json.loads(line)["kernel_avg_time_us"] for line in perf.read_text().splitlines()}
    return write_paired_sidecar(ws, n, {"a": 10.0 * mine["a"] / cand[0], "b": 20.0 * mine["b"] / cand[1]})


def _paired(snap: Any, n: int) -> Any:
    comp = snap.rounds[n].comparison
    return comp.paired.geomean if comp is not None and comp.paired is not None else None


def _fresh(ws: Path) -> Any:
    (ws / CACHE).unlink(missing_ok=True)
    return load_workspace(ws)


def test_a_sidecar_and_the_baseline_operator_it_pairs_against_are_watched(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    sidecar = _pair_round(ws, 3, (7.0, 14.0))
    snap = load_workspace(ws)
    found = _paired(snap, 3)
    assert found is not None and found.interval is not None  # judged on the paired blocks
    assert _paired(load_workspace(ws), 3) == found  # from .helix/cache/rounds.sealed

    op = ws / "baseline" / "add.py"
    original = op.read_text()
    op.write_text(original + "# edited: the pairing no longer holds\n")
    after_edit = reload(snap, [op])
    assert _paired(after_edit, 3) is None
    assert _paired(load_workspace(ws), 3) is None  # a full load with the cache present
    assert after_edit.promotion == _fresh(ws).promotion

    sidecar.unlink()
    op.write_text(original)
    restored = reload(after_edit, [op])
    assert _paired(restored, 3) is None  # the operator is back, the sidecar gone
    again = _pair_round(ws, 3, (7.0, 14.0))
    with_sidecar = reload(restored, [again])
    assert _paired(with_sidecar, 3) == found
    assert with_sidecar.promotion == snap.promotion == _fresh(ws).promotion
    os.utime(again, ns=(1, 1))  # a touched sidecar is read again, and gives the same
    assert _paired(load_workspace(ws), 3) == found


DELTA = CACHE.parent / round_cache.DELTA_FILE


def _delta_tampers(ws: Path) -> dict[str, Any]:
    def edit(fn: Any) -> Any:
        def apply(path: Path) -> None:
            data = _opened(path)
            fn(data)
            _resealed(path, data)
        return apply

    return {
        "a byte changed": lambda path: path.write_bytes(path.read_bytes()[:-1] + b"X"),
        "another user's key": lambda path: path.write_bytes(_with_other_key(lambda: sealed.seal(_opened(path), path.name))),
        "another base": edit(lambda d: d.update(base=[1, 2, 3, 4])),
        "another context": edit(lambda d: d["context"].__setitem__(0, "x")),
        "a link out": lambda path: (path.unlink(), path.symlink_to(ws.parent / "elsewhere.sealed")),
    }


@pytest.mark.parametrize("tamper", ["a byte changed", "another user's key", "another base", "another context",
                                    "a link out"])
def test_one_changed_round_is_saved_as_a_delta_and_a_tampered_delta_is_ignored(
        tmp_path: Path, perf_reads: list[Path], tamper: str) -> None:
    ws = _workspace(tmp_path / "ws")
    _status_json(ws)  # rounds.sealed, whole
    perf = ws / "opt-round-3" / "opt_add_perf.txt"
    text = perf.read_text()
    perf.write_text(text.replace("7.00663", "7.00664", 1))  # one sample changed: round 3 judged again
    assert perf.read_text() != text
    base = (ws / CACHE).read_bytes()
    records.forget()
    changed = _status_json(ws)
    assert (ws / CACHE).read_bytes() == base  # not rewritten: the delta holds round 3
    entries = _opened(ws / DELTA)
    assert sorted(entries["rounds"]) == [3] and sorted(entries["perf"]) == [3]
    perf_reads.clear()
    records.forget()
    assert _status_json(ws) == changed
    assert perf_reads == [ws / "baseline" / "add_perf.txt"]  # round 3's summary came from the delta
    (ws.parent / "elsewhere.sealed").write_bytes((ws / DELTA).read_bytes())
    _delta_tampers(ws)[tamper](ws / DELTA)
    records.forget()
    assert _status_json(ws) == changed == _uncached(ws)


def test_a_delta_past_its_limit_rewrites_the_cache_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path / "ws")
    _status_json(ws)
    perf = ws / "opt-round-3" / "opt_add_perf.txt"
    perf.write_bytes(perf.read_bytes())
    records.forget()
    changed = _status_json(ws)
    assert (ws / DELTA).is_file()
    # a same-bytes rewrite keeps the round's summary (judged by content): round 3's perf entry
    # fits, one more round's does not
    assert sum(len(_opened(ws / DELTA)[part]) for part in ("perf", "reads", "files", "rounds")) == 1
    monkeypatch.setattr(round_cache, "DELTA_MAX", 1)
    perf = ws / "opt-round-2" / "opt_add_perf.txt"
    perf.write_bytes(perf.read_bytes())
    base = (ws / CACHE).read_bytes()
    records.forget()
    assert _status_json(ws) == changed
    assert not (ws / DELTA).exists() and (ws / CACHE).read_bytes() != base
    assert _status_json(ws) == changed == _uncached(ws)


# ------------------------------------------------- compact values as the round cache stores them

from hypothesis import given  # noqa: E402 - the property tests below only
from hypothesis import strategies as st  # noqa: E402

_CELL = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64))


@given(st.lists(st.tuples(_CELL, _CELL), min_size=1, max_size=30), st.sampled_from([None, "torch-npu-profiler"]),
       st.booleans())
def test_stored_values_come_back_as_they_were(cells: list[tuple[float | None, float | None]], mode: str | None,
                                               sampled: bool) -> None:
    """values_in(values_out(v)) is v for every column, full (parsed in C) or with absent averages,
    and whether its records carry samples."""
    ids = tuple(f"case-{i:03d}" for i in range(len(cells)))
    values = evaluation.CaseValues(ids, tuple(k for k, _ in cells), tuple(t for _, t in cells), mode, sampled)
    back = round_cache.values_in(round_cache.values_out(values))
    assert back is not None
    assert (back.ids, back.kernel, back.total, back.bench_mode, back.sampled) \
        == (values.ids, values.kernel, values.total, mode, sampled)


@pytest.mark.parametrize("cells", ["1.0|inf", "nan|2.0", "1.0|x", "1.0|2.0|3.0", "1.0", "1e999|1.0", "|inf"])
def test_a_stored_column_that_is_not_two_finite_averages_is_not_used(cells: str) -> None:
    assert round_cache.values_in([None, "a|b", cells, "1.0|2.0", True]) is None
    assert round_cache.values_in([None, "a|b", "1.0|2.0", cells, True]) is None


@pytest.mark.parametrize("sampled", [None, 1, "yes", 0.0])
def test_stored_values_without_a_bool_sampled_are_not_used(sampled: object) -> None:
    """A fifth cell that is not a bool (or none: an entry of the previous format) is not ours: a
    round read as unsampled would be judged on its point where an interval is due."""
    assert round_cache.values_in([None, "a|b", "1.0|2.0", "1.0|2.0", True]) is not None
    assert round_cache.values_in([None, "a|b", "1.0|2.0", "1.0|2.0", sampled]) is None
    assert round_cache.values_in([None, "a|b", "1.0|2.0", "1.0|2.0"]) is None


def test_rounds_read_from_the_cache_share_one_copy_of_their_ids_and_bench_mode(tmp_path: Path) -> None:
    """A warm load keeps each round's stored values as text, the latency ids and the bench mode
    interned: one string for all the rounds that have the same cases (a regression of version 7
    kept one per round)."""
    ws = generate_large_workspace(tmp_path, rounds=12, cases=5)
    load_workspace(ws)  # writes rounds.sealed
    stored = [view.values for view in load_workspace(ws).rounds.values() if isinstance(view.values, list)]
    assert len(stored) >= 6
    assert len({id(v[1]) for v in stored}) == 1 and len({id(v[0]) for v in stored}) == 1


def test_a_file_written_back_with_its_old_size_and_time_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cp -p or touch -r puts back a file's size and mtime, never its ctime: a perf file edited in
    place that way is read again, not taken for the file the cache was made from (a new user's
    walkthrough found status printing the old geomean after `cp -p perf.orig perf`)."""
    monkeypatch.setattr(round_cache, "RECENT_NS", 100_000_000)  # the guard on, shorter than helix's 3 s
    ws = _workspace(tmp_path / "ws")
    old = 1_700_000_000 * 10**9
    perf = ws / "opt-round-2" / "opt_add_perf.txt"
    os.utime(perf, ns=(old, old))
    original = perf.read_bytes()
    time.sleep(0.15)  # every file settled (its ctime too: no one can set that)
    expected = _status_json(ws)
    _status_json(ws)  # every entry kept
    assert 2 in round_cache._read(ws)[1]["perf"]  # noqa: SLF001
    edited = original.replace(b'"kernel_avg_time_us":9.0', b'"kernel_avg_time_us":8.0', 1)
    assert len(edited) == len(original) and edited != original
    with open(perf, "r+b") as handle:  # in place: the same inode
        handle.write(edited)
    os.utime(perf, ns=(old, old))  # and the old mtime back
    changed = _status_json(ws)
    assert changed != expected
    with open(perf, "r+b") as handle:
        handle.write(original)
    os.utime(perf, ns=(old, old))
    assert _status_json(ws) == expected
