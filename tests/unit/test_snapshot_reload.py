"""reload(): re-read only what changed, and end up where a full load would."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from helix_engine.workspace import reading
from helix_engine.workspace.snapshot import load_workspace, reload
from tests.builders import (
    NoteRound,
    RoundSpec,
    build_workspace,
    opt_note_text,
    workflow_state,
    write_opt_note,
    write_perf,
    write_round,
    write_workflow_state,
)

BASE = {"a": 10.0, "b": 20.0}


@pytest.fixture()
def perf_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every perf file the snapshot reads, in order."""
    seen: list[Path] = []
    original = reading.read_perf_safe

    def spy(path: Path, workspace: Path):  # noqa: ANN202
        seen.append(Path(path))
        return original(path, workspace)

    monkeypatch.setattr("helix_engine.workspace.round_reading.read_perf_safe", spy)
    return seen


def _same(a, b) -> None:  # noqa: ANN001
    """The parts of two snapshots the UI shows are equal."""
    assert a.best_round == b.best_round
    assert a.logged_best == b.logged_best
    assert sorted(a.rounds) == sorted(b.rounds)
    for n in a.rounds:
        ca, cb = a.rounds[n].comparison, b.rounds[n].comparison
        assert (ca.geomean_speedup if ca else None) == (cb.geomean_speedup if cb else None)
        assert a.rounds[n].parent == b.rounds[n].parent
        assert a.rounds[n].completed == b.rounds[n].completed
    assert sorted(map(str, a.problems)) == sorted(map(str, b.problems))
    assert a.evaluation.warnings == b.evaluation.warnings


def _ws(tmp_path: Path) -> Path:
    return build_workspace(tmp_path, baseline=BASE, rounds=[
        {"a": 8.0, "b": 18.0}, RoundSpec({"a": 9.0, "b": 10.0}, parent="opt-round-1"), {"a": 9.5, "b": 19.0}])


def test_reload_after_one_perf_file_changes_reads_only_that_file(tmp_path: Path, perf_reads: list[Path]) -> None:
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    assert snap.best_round == 2 and len(perf_reads) == 4
    perf_reads.clear()
    changed = write_perf(ws / "opt-round-3" / "opt_add_perf.txt", {"a": 5.0, "b": 5.0})
    new = reload(snap, [changed])
    assert perf_reads == [changed]
    # round 3 is now 10/5 = 2 and 20/5 = 4 → geomean sqrt(8) = 2.828427
    assert new.rounds[3].comparison.geomean_speedup == pytest.approx(2.828427, abs=1e-6)
    assert new.best_round == 3
    assert snap.best_round == 2  # the old snapshot is untouched
    assert snap.rounds[3].comparison.geomean_speedup == pytest.approx((10 / 9.5 * 20 / 19) ** 0.5)
    # a view is copied before it changes (copy on write): round 3's is new, round 1's (unchanged) is
    # shared, and nothing of the old snapshot changed
    assert new.rounds[3] is not snap.rounds[3] and new.rounds[1] is snap.rounds[1]
    _same(new, load_workspace(ws))


def test_reload_after_a_perf_file_changes_reuses_the_rounds_state_until_its_file_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A perf file rewritten: the round's round-state.json, the same file, is not read and
    validated again (the view's state is reused); once round-state.json changes, or the last
    read of the round reported a problem, it is read again."""
    from helix_engine.workspace import round_reading

    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    loaded: list[str] = []
    original = round_reading.load_model

    def spy(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        loaded.append(Path(path).parent.name)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(round_reading, "load_model", spy)
    perf = write_perf(ws / "opt-round-3" / "opt_add_perf.txt", {"a": 5.0, "b": 5.0})
    new = reload(snap, [perf])
    assert loaded == [] and new.rounds[3].state is snap.rounds[3].state and new.best_round == 3
    _same(new, load_workspace(ws))
    state_file = ws / "opt-round-3" / "round-state.json"
    data = json.loads(state_file.read_text())
    data["hypothesis"] = "unroll the inner loop twice"
    state_file.write_text(json.dumps(data))
    loaded.clear()
    edited = reload(new, [state_file])
    assert loaded == ["opt-round-3"] and edited.rounds[3].state.hypothesis == "unroll the inner loop twice"
    data["benchmark_status"] = "not_run"  # a state that is read but skipped, and a perf file that …
    state_file.write_text(json.dumps(data))
    (ws / "opt-round-3" / "attempts.md").unlink()  # … no longer makes the round complete
    loaded.clear()
    skipped = reload(edited, [state_file])
    assert loaded == ["opt-round-3"] and 3 not in skipped.evaluation.results
    _same(skipped, load_workspace(ws))
    loaded.clear()
    again = reload(skipped, [write_perf(ws / "opt-round-3" / "opt_add_perf.txt", {"a": 6.0, "b": 6.0})])
    assert again.rounds[3].completed is False  # rebuilt as a full read would: not from the state alone
    _same(again, load_workspace(ws))


def test_a_named_round_state_is_read_again_even_when_its_size_and_time_are_the_same(tmp_path: Path) -> None:
    """An in-place rewrite of round-state.json with the same size and its mtime put back (within
    one timestamp tick, or by touch -r) keeps its device, inode, size and mtime: the file named by
    the caller is read all the same, and since the identity holds the ctime, which no one can put
    back, a reload that names only the folder reads it again too."""
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    state_file = ws / "opt-round-2" / "round-state.json"
    before = os.stat(state_file)
    text = state_file.read_text()
    assert '"correctness_status": "passed"' in text
    state_file.write_text(text.replace('"correctness_status": "passed"', '"correctness_status": "failed"'))
    os.utime(state_file, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same size and time
    assert os.stat(state_file).st_size == before.st_size and os.stat(state_file).st_ino == before.st_ino
    after = reload(snap, [state_file])
    assert after.rounds[2].state.correctness_status == "failed"
    same_folder = reload(snap, [ws / "opt-round-2"])  # the folder named, not the file: its identity decides
    assert same_folder.rounds[2].state.correctness_status == "failed"


def test_reload_after_baseline_perf_changes(tmp_path: Path, perf_reads: list[Path]) -> None:
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    perf_reads.clear()
    changed = write_perf(ws / "baseline" / "add_perf.txt", {"a": 18.0, "b": 20.0})
    new = reload(snap, [changed])
    assert perf_reads == [changed]
    # round 1 is now 18/8 = 2.25 and 20/18 → geomean sqrt(2.5) = 1.581139;
    # round 2 is 18/9 = 2 and 20/10 = 2 → 2.0 (still the best); round 3: 18/9.5, 20/19 → 1.412
    assert new.rounds[1].comparison.geomean_speedup == pytest.approx(1.581139, abs=1e-6)
    assert new.rounds[2].comparison.geomean_speedup == pytest.approx(2.0)
    assert new.rounds[3].comparison.geomean_speedup == pytest.approx((18 / 9.5 * 20 / 19) ** 0.5)
    assert new.best_round == 2
    _same(new, load_workspace(ws))


def test_reload_picks_up_a_new_round(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    rdir = write_round(ws, 4, RoundSpec({"a": 2.0, "b": 4.0}, parent="opt-round-2"))
    new = reload(snap, [rdir / "round-state.json"])
    assert sorted(new.rounds) == [1, 2, 3, 4]
    assert new.best_round == 4 and new.rounds[4].parent == "opt-round-2"
    assert new.children("opt-round-2") == [4]
    _same(new, load_workspace(ws))
    # even with no path named, the round listing is rescanned
    write_round(ws, 5, RoundSpec({"a": 1.0, "b": 1.0}))
    assert reload(new, []).best_round == 5


def test_reload_after_a_round_is_deleted(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    shutil.rmtree(ws / "opt-round-2")
    new = reload(snap, [ws / "opt-round-2"])
    assert sorted(new.rounds) == [1, 3]
    assert new.best_round == 1
    _same(new, load_workspace(ws))


def test_reload_opt_note_and_workflow(tmp_path: Path, perf_reads: list[Path]) -> None:
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    perf_reads.clear()
    note = write_opt_note(ws, opt_note_text([NoteRound(1, best_status="current best")], final_best="round-1",
                                            geomean_text="1.18x"))
    state = write_workflow_state(ws, workflow_state(phase="round_active", current_round=3,
                                                    rounds={1: "passed", 2: "passed", 3: "active"}))
    new = reload(snap, [note, state])
    assert perf_reads == []
    assert new.logged_best == "round-1"
    assert any(w.startswith("numeric best round != logged best") for w in new.evaluation.warnings)
    assert new.workflow.current_round == 3 and new.rounds[3].workflow_status == "active"
    _same(new, load_workspace(ws))


def test_reload_relative_paths_and_unrelated_files(tmp_path: Path, perf_reads: list[Path]) -> None:
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    perf_reads.clear()
    (ws / "learned_lessons.md").write_text("# lessons\n")
    new = reload(snap, [Path("learned_lessons.md"), tmp_path / "elsewhere.txt"])
    assert perf_reads == []
    _same(new, snap)
    state = json.loads((ws / "opt-round-1" / "round-state.json").read_text())
    state["correctness_status"] = "failed"
    (ws / "opt-round-1" / "round-state.json").write_text(json.dumps(state))
    new = reload(new, [Path("opt-round-1/round-state.json")])
    assert perf_reads == [ws / "opt-round-1" / "opt_add_perf.txt"]
    assert new.rounds[1].comparison is None and not new.rounds[1].completed
    _same(new, load_workspace(ws))


def test_reload_when_a_round_becomes_malformed_and_recovers(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    target = ws / "opt-round-2" / "round-state.json"
    good = target.read_text()
    target.write_text('{"round": "opt-round-2", "parent_')
    broken = reload(snap, [target])
    assert broken.best_round == 1
    assert any(p.file == "opt-round-2/round-state.json" and "not valid JSON" in p.message
               for p in broken.problems)
    target.write_text(good)
    fixed = reload(broken, [target])
    assert fixed.best_round == 2
    assert not any(p.file == "opt-round-2/round-state.json" for p in fixed.problems)


def test_reload_with_the_workspace_itself_reads_everything(tmp_path: Path, perf_reads: list[Path]) -> None:
    """A full load: the baseline, and each round's perf file unless the round cache holds a
    summary made from the file as it is (.helix/cache/rounds.sealed), so only the changed one."""
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    write_perf(ws / "opt-round-1" / "opt_add_perf.txt", {"a": 1.0, "b": 1.0})
    perf_reads.clear()
    new = reload(snap, [ws])
    assert perf_reads == [ws / "baseline" / "add_perf.txt", ws / "opt-round-1" / "opt_add_perf.txt"]
    assert new.best_round == 1
    _same(new, load_workspace(ws))


def test_reload_after_submit_round_rejects_the_best_rejudges_it(tmp_path: Path, perf_reads: list[Path]) -> None:
    """Only .helix/state.json changes (no round is read again): round 2's promotion candidate, kept
    from the snapshot before when its inputs are the same, must be built again (rejected), and the
    rounds after it judged against the new best; then accepted again. Each time as a full load."""
    ws = _ws(tmp_path)
    snap = load_workspace(ws)
    assert snap.promotion.best_round == 2
    perf_reads.clear()
    state = write_workflow_state(ws, workflow_state(rounds={1: "passed", 2: "failed", 3: "passed"}))
    rejected = reload(snap, [state])
    assert perf_reads == []
    assert rejected.promotion.rounds[2].reason == "submit-round rejected it"
    assert rejected.promotion.best_round == 1
    assert dataclasses.asdict(rejected.promotion) == dataclasses.asdict(load_workspace(ws).promotion)
    state = write_workflow_state(ws, workflow_state(rounds={1: "passed", 2: "passed", 3: "passed"}))
    accepted = reload(rejected, [state])
    assert accepted.promotion.best_round == 2
    assert dataclasses.asdict(accepted.promotion) == dataclasses.asdict(snap.promotion) \
        == dataclasses.asdict(load_workspace(ws).promotion)


def test_reload_keeps_the_folder_listing_only_while_the_folder_is_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reload does not list the workspace folder again when its identity (mtime and ctime
    included) is the one the last listing saw, long enough ago; a new, removed or renamed round
    folder changes that identity, and the next reload sees it as a full load does."""
    import time

    from helix_engine.workspace import folder_listing, layout

    ws = _ws(tmp_path)
    listings: list[Path] = []
    original = layout.listing

    def spy(folder: Path):  # noqa: ANN202
        listings.append(Path(folder))
        return original(folder)

    monkeypatch.setattr(layout, "listing", spy)
    monkeypatch.setattr(folder_listing, "RECENT_S", 0.05)  # the ctime cannot be aged: wait the guard out instead
    time.sleep(0.1)
    snap = load_workspace(ws)
    assert len(listings) == 1
    again = reload(snap, [ws / "opt-round-2" / "opt_add_perf.txt"])
    assert len(listings) == 1, "an unchanged folder was listed again"
    assert sorted(again.rounds) == [1, 2, 3]
    write_round(ws, 4, RoundSpec({"a": 5.0, "b": 5.0}))
    fresh = reload(again, [ws / "opt-round-4"])
    assert len(listings) == 2 and sorted(fresh.rounds) == [1, 2, 3, 4]
    _same(fresh, load_workspace(ws))
    time.sleep(0.1)
    kept = reload(fresh, [])
    shutil.rmtree(ws / "opt-round-4")
    gone = reload(kept, [ws / "opt-round-4"])
    assert sorted(gone.rounds) == [1, 2, 3]
    _same(gone, load_workspace(ws))
    time.sleep(0.1)
    settled = reload(gone, [])
    (ws / "opt-round-3").rename(ws / "opt-round-5")
    renamed = reload(settled, [])  # no path named at all: the folder's identity alone says it changed
    assert sorted(renamed.rounds) == [1, 2, 5]
    _same(renamed, load_workspace(ws))


def test_reload_lists_a_folder_changed_within_the_timestamp_guard(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder changed in the last RECENT_S seconds is listed on every reload: a second change
    in the same timestamp tick would leave its identity as it was."""
    from helix_engine.workspace import layout

    ws = _ws(tmp_path)
    calls = [0]
    original = layout.listing

    def spy(folder: Path):  # noqa: ANN202
        calls[0] += 1
        return original(folder)

    monkeypatch.setattr(layout, "listing", spy)
    snap = load_workspace(ws)  # the folder was just built: within the guard
    reload(reload(snap, []), [])
    assert calls[0] == 3


def test_a_round_added_after_the_others_derives_and_judges_only_itself(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A new round folder numbered after every other (the usual new round): the earlier rounds'
    lines, judgements and candidates are last time's (none can name a later round as its parent),
    and the snapshot equals a full load. A round filling a gap below the last one is not such a
    round: an earlier round's parent may name it, and everything is derived again."""
    from helix_engine.workspace import snapshot as snapshot_module
    from helix_engine.workspace import status_rules

    ws = _ws(tmp_path)
    write_round(ws, 5, RoundSpec({"a": 7.0, "b": 9.0}, parent="opt-round-4"))  # 4 is missing: a problem
    snap = reload(load_workspace(ws), [])
    derived: list[int] = []
    keyed: list[int] = []
    normalize, round_key = snapshot_module._normalize_parent, status_rules._round_key

    def derive_spy(view, *args):  # noqa: ANN001, ANN002, ANN202
        derived.append(view.number)
        return normalize(view, *args)

    def key_spy(view, *args):  # noqa: ANN001, ANN002, ANN202
        keyed.append(view.number)
        return round_key(view, *args)

    monkeypatch.setattr(snapshot_module, "_normalize_parent", derive_spy)
    monkeypatch.setattr(status_rules, "_round_key", key_spy)
    write_round(ws, 6, RoundSpec({"a": 4.0, "b": 8.0}, parent="opt-round-2"))
    after = reload(snap, [ws / "opt-round-6"])
    assert derived == [6] and keyed == [6]
    assert all(after.rounds[n] is snap.rounds[n] for n in (1, 2, 3, 5))  # unchanged views stay shared
    _same(after, load_workspace(ws))
    assert after.promotion == load_workspace(ws).promotion
    assert any("opt-round-4" in p.message for p in after.problems)
    derived.clear()
    write_round(ws, 4, RoundSpec({"a": 9.0, "b": 19.0}))  # fills the gap round 5 names as its parent
    filled = reload(after, [ws / "opt-round-4"])
    assert sorted(derived) == [1, 2, 3, 4, 5, 6]
    assert filled.rounds[5].parent == "opt-round-4" and not any("opt-round-4" in p.message for p in filled.problems)
    _same(filled, load_workspace(ws))
    assert filled.promotion == load_workspace(ws).promotion


def test_a_linked_round_folder_is_looked_at_on_every_reload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A round folder that is a link inside the workspace: its target can go (or change) while the
    workspace folder keeps its identity, so a listing with such an entry is never kept. Found by a
    review: the kept listing still held round 3 after its target was removed."""
    import dataclasses
    import os
    import time

    from helix_engine.workspace import folder_listing

    def view(s):  # noqa: ANN001, ANN202
        return (s.best_round, sorted(s.rounds), sorted(map(str, s.problems)),
                {n: dataclasses.asdict(p) for n, p in s.promotion.rounds.items()})

    monkeypatch.setattr(folder_listing, "RECENT_S", 0.05)
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{"a": 8.0, "b": 18.0}])
    (ws / "archive").mkdir()
    write_round(ws / "archive", 3, RoundSpec({"a": 5.0, "b": 5.0}))
    (ws / "archive" / "opt-round-3").rename(ws / "archive" / "r3")
    os.symlink("archive/r3", ws / "opt-round-3")
    time.sleep(0.1)
    snap = load_workspace(ws)
    assert snap.best_round == 3
    r3 = ws / "archive" / "r3"
    named = [r3, *r3.iterdir()]
    shutil.rmtree(r3)
    time.sleep(0.1)
    after = reload(snap, named)
    assert sorted(after.rounds) == [1]
    assert view(after) == view(load_workspace(ws))


def test_upstreams_best_after_reloads_that_make_the_best_fall_and_another_round_rise(tmp_path: Path) -> None:
    """Upstream's best (the highest geomean) across chained reloads, each against a full load: the
    best falls (every round is ranked once, and the ranking kept), another round rises without
    passing the best (the kept ranking takes its new rank), then the best falls again (the risen
    round is the best: read from the kept ranking)."""
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[
        {"a": 5.0, "b": 10.0}, {"a": 4.0, "b": 8.0}, {"a": 8.0, "b": 16.0}, {"a": 6.5, "b": 13.0}])
    snap = load_workspace(ws)
    assert snap.best_round == 2
    steps = [(2, {"a": 10.0, "b": 20.0}, 1), (3, {"a": 5.5, "b": 11.0}, 1), (1, {"a": 10.0, "b": 20.0}, 3),
             (3, {"a": 9.0, "b": 18.0}, 4)]
    for n, times, best in steps:
        snap = reload(snap, [write_perf(ws / f"opt-round-{n}" / "opt_add_perf.txt", times)])
        assert snap.best_round == best == load_workspace(ws).best_round


def test_a_changed_path_on_a_link_loop_is_not_resolved(tmp_path: Path) -> None:
    """A path the watcher names that runs into a link loop resolves to nothing (as Path.resolve
    says), so it names no round to read; the reload still ends where a full load does."""
    from helix_engine.workspace import reading as reading_module
    from helix_engine.workspace.snapshot import _safe_resolve

    ws = _ws(tmp_path)
    (ws / "loop_a").symlink_to(ws / "loop_b")
    (ws / "loop_b").symlink_to(ws / "loop_a")
    snap = load_workspace(ws)
    with reading_module.load_session():
        assert _safe_resolve(ws / "loop_a" / "x") is None
        assert _safe_resolve(ws / "opt-round-1") == (ws / "opt-round-1").resolve()
    _same(reload(snap, [ws / "loop_a" / "x"]), load_workspace(ws))


def test_reloaded_problems_are_a_full_loads_in_order(tmp_path: Path) -> None:
    """A reload looks only at the re-read rounds' problems (snapshot._with_problems): they come and
    go with those rounds, in round order, exactly as a full load lists them."""
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{"a": 8.0, "b": 18.0}] * 4)

    def misnamed(n: int, name: str | None) -> Path:
        path = ws / f"opt-round-{n}" / "round-state.json"
        state = json.loads(path.read_text())
        state["round"] = name if name is not None else f"opt-round-{n}"
        path.write_text(json.dumps(state))
        return path

    def shown(snap) -> list[str]:  # noqa: ANN001
        return [f"{p.file}: {p.message}" for p in snap.problems]

    snap = load_workspace(ws)
    for change in [(3, "opt-round-9"), (1, "opt-round-7"), (2, "opt-round-8"), (3, None), (1, None), (2, None)]:
        snap = reload(snap, [misnamed(*change)])
        assert shown(snap) == shown(load_workspace(ws))
        assert any("opt-round-" in p.message for p in snap.problems) == (change != (2, None))
