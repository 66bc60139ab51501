"""The stored `helix status --json` output (.helix/cache/status.sealed, issue 12): a run on an
unchanged workspace prints the bytes the computing run printed without loading the workspace;
any change to the workspace, a stored file this user's helix did not seal (even one with the right
digest), a link, a temp file or a file written in the last seconds means the status is computed
(and then prints what it always did)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helix_engine import cli
from helix_engine.workspace import sealed, status_cache
from tests.builders import RoundSpec, build_workspace, write_perf, write_round

STORED = Path(".helix") / "cache" / status_cache.CACHE_NAME


@pytest.fixture()
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(status_cache, "RECENT_S", 0.0)  # files written by the test count as settled
    rounds = [RoundSpec({"a": 8.0, "b": 18.0}), RoundSpec({"a": 7.0, "b": 14.0}, parent="opt-round-1")]
    return build_workspace(tmp_path / "ws", baseline={"a": 10.0, "b": 20.0}, rounds=rounds)


def _run(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["status", *words])
    return code, capsys.readouterr().out


def _loads_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the workspace was loaded")

    monkeypatch.setattr("helix_engine.status.load_workspace", refuse)


def _computed(capsys: pytest.CaptureFixture[str], ws: Path, *words: str) -> str:
    (ws / STORED).unlink(missing_ok=True)
    code, out = _run(capsys, str(ws), *words)
    assert code == 0
    return out


def test_unchanged_workspace_prints_the_stored_bytes_without_loading(
        ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first = _computed(capsys, ws, "--json")
    assert json.loads(first)["operators"][0]["best_round"] == "round-2"
    assert (ws / STORED).is_file()
    _loads_refused(monkeypatch)
    for words in (("--json",), ("--format", "json"), ("--json", "--view", "best")):
        code, again = _run(capsys, str(ws), *words)
        assert code == 0 and again == first
    code, other = _run(capsys, "-i", str(ws), "--json", "-m", "kernel")  # other options: not this store
    assert code == 1  # the refused load: proof that it was computed, not printed from the store


@pytest.mark.parametrize("change", ["perf", "new_round", "opt_note", "mode"])
def test_any_change_is_computed(ws: Path, capsys: pytest.CaptureFixture[str], change: str) -> None:
    _computed(capsys, ws, "--json")
    if change == "perf":
        write_perf(ws / "opt-round-1" / "opt_add_perf.txt", {"a": 5.0, "b": 9.0})
    elif change == "new_round":
        write_round(ws, 3, RoundSpec({"a": 4.0, "b": 8.0}, parent="opt-round-2"))
    elif change == "opt_note":
        with open(ws / "opt-note.md", "a", encoding="utf-8") as handle:
            handle.write("\n")
    else:
        os.chmod(ws / "opt-round-2" / "round-state.json", 0o600)
    code, out = _run(capsys, str(ws), "--json")
    assert code == 0
    assert out == _computed(capsys, ws, "--json")
    if change in ("perf", "new_round"):
        assert json.loads(out)["operators"][0]["upstream_best_round"] == ("round-1" if change == "perf" else "round-3")


def _sealed(text: str, *, key: bytes | None = None) -> bytes:
    """``text`` sealed as helix seals the stored output (under another user's ``key`` when given)."""
    if key is not None:
        sealed._key = key  # noqa: SLF001
    try:
        data = sealed.seal_bytes(text.encode(), status_cache.CACHE_NAME)
    finally:
        sealed.forget_key()
    assert data is not None
    return data


@pytest.mark.parametrize("tamper", ["digest", "control", "length", "link", "not_json", "unsealed", "another_key"])
def test_a_stored_file_that_is_not_ours_is_a_miss(ws: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch, tamper: str) -> None:
    first = _computed(capsys, ws, "--json")
    path = ws / STORED
    payload = sealed.unseal_bytes(path.read_bytes(), status_cache.CACHE_NAME)
    assert payload is not None
    header, body = str(payload, "utf-8").split("\n", 1)
    meta = json.loads(header)
    forged = body.replace('"round-2"', '"round-9"')
    if tamper == "digest":
        meta["digest"] = "0" * 64
        path.write_bytes(_sealed(json.dumps(meta) + "\n" + forged))
    elif tamper == "control":
        forged = forged.replace('"round-9"', '"\x1b[2Jround-9"')
        meta["chars"] = len(forged)
        path.write_bytes(_sealed(json.dumps(meta) + "\n" + forged))
    elif tamper == "length":
        path.write_bytes(_sealed(header + "\n" + forged.replace('"round-9"', '"round-99"')))
    elif tamper == "link":
        outside = ws.parent / "elsewhere.sealed"
        outside.write_bytes(_sealed(json.dumps(meta) + "\n" + forged))
        path.unlink()
        path.symlink_to(outside)
    elif tamper == "unsealed":  # the right digest and length, in the clear: anyone could write it
        meta["chars"] = len(forged)
        path.write_text(json.dumps(meta) + "\n" + forged, encoding="utf-8")
    elif tamper == "another_key":  # what the owner of a shared workspace could leave for its next user
        meta["chars"] = len(forged)
        path.write_bytes(_sealed(json.dumps(meta) + "\n" + forged, key=b"k" * sealed.KEY_BYTES))
    else:
        path.write_bytes(_sealed("{not json\n" + forged))
    code, out = _run(capsys, str(ws), "--json")  # the walk is the stored one (.helix/cache/ is not walked)
    assert code == 0 and out == first and "round-9" not in out


@pytest.mark.parametrize("odd", ["link", "temp", "recent", "folder_of_workspaces", "text"])
def test_nothing_is_stored_when_a_walk_cannot_vouch_for_the_output(
        ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, odd: str) -> None:
    target, words = ws, ["--json"]
    if odd == "link":
        (ws / "opt-round-1" / "notes.md").symlink_to(ws / "opt-note.md")
    elif odd == "temp":
        (ws / "opt-round-1" / ".round-state.json.abcd1234.tmp").write_text("{}", encoding="utf-8")
    elif odd == "recent":
        monkeypatch.setattr(status_cache, "RECENT_S", 3600.0)
    elif odd == "folder_of_workspaces":
        target = ws.parent
    else:
        words = []
    code, out = _run(capsys, str(target), *words)
    assert code == 0 and out
    assert not (ws / STORED).exists()


def test_usage_errors_are_the_full_commands(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["status", str(ws), "--json", "--format", "xml"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("invalid choice") == 1
    with pytest.raises(SystemExit):
        cli.main(["status", "--json", "--help"])
    assert "usage: helix status" in capsys.readouterr().out
    assert not (ws / STORED).exists()


def test_the_environment_helix_reads_is_part_of_the_key(
        ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """HELIX_OPTIMIZE_MIN_SPEEDUP changes what status's Next says: a run with another value must
    not print the output stored without it."""
    monkeypatch.delenv("HELIX_OPTIMIZE_MIN_SPEEDUP", raising=False)
    _computed(capsys, ws, "--json")
    monkeypatch.setenv("HELIX_OPTIMIZE_MIN_SPEEDUP", "1.05")
    _loads_refused(monkeypatch)
    code, _ = _run(capsys, str(ws), "--json")
    assert code == 1  # the refused load: computed, not printed from the store


def test_a_computed_json_status_builds_no_other_command_and_names_every_workspace(
        ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a miss the status runs from the arguments the store's parser read (the full CLI parser
    is not built); --workspace names a second workspace, so the first one's stored output is not
    the answer (it was printed alone)."""
    first = _computed(capsys, ws, "--json")

    def refuse() -> None:
        raise AssertionError("the full parser was built")

    write_perf(ws / "opt-round-1" / "opt_add_perf.txt", {"a": 9.0, "b": 19.0})
    with monkeypatch.context() as patched:
        patched.setattr(cli, "build_parser", refuse)
        code, out = _run(capsys, str(ws), "--json")
    assert code == 0 and out != first and json.loads(out)["operators"][0]["best_round"] == "round-2"
    other = build_workspace(tmp_path / "other", baseline={"a": 10.0}, rounds=[RoundSpec({"a": 5.0})])
    code, both = _run(capsys, str(ws), "-w", str(other), "--json")
    assert code == 0 and len(json.loads(both)["operators"]) == 2
    code, missing = _run(capsys, str(tmp_path / "nowhere"), "--json")
    assert code == 1 and missing == ""


def test_the_stored_output_path_imports_no_pydantic_and_no_dataclasses(ws: Path) -> None:
    """The unchanged-workspace path is the common `helix status`: it imports neither pydantic nor
    `dataclasses` (with the `inspect` it pulls in, 7 ms of a 55 ms command), in a fresh process."""
    import subprocess
    import sys

    script = ("import sys\nfrom helix_engine.workspace import status_cache\nstatus_cache.RECENT_S = 0.0\n"
              "from helix_engine import cli\nassert cli.main(['status', sys.argv[1], '--json']) == 0\n"
              "print(sorted(m for m in ('pydantic', 'dataclasses', 'inspect') if m in sys.modules), file=sys.stderr)\n")
    root = Path(__file__).resolve().parents[2]
    runs = [subprocess.run([sys.executable, "-c", script, str(ws)], cwd=root, capture_output=True, text=True,
                           timeout=60) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert runs[0].stdout == runs[1].stdout  # the second printed the first's stored bytes
    assert "'dataclasses'" in runs[0].stderr  # the computing run did import it: the check can fail
    assert runs[1].stderr.strip().splitlines()[-1] == "[]", runs[1].stderr


# ----------------------------------------------------------- the walk's listing feeds the load


def test_a_walk_goes_on_past_what_it_cannot_vouch_for(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed just now (or a link, a temp file) means no stored output, but the walk lists
    every folder whole, so the load can still take its lstats from it."""
    monkeypatch.setattr(status_cache, "RECENT_S", 3.0)
    found = status_cache.fingerprint(ws, ("json", "best", "None"))
    assert found.digest is None and found.listing is not None  # every file was just written
    stats, folders, _ = found.listing
    top = os.fspath(ws)
    assert {f"{top}/opt-round-1/round-state.json", f"{top}/opt-round-2/opt_add_perf.txt",
            f"{top}/.helix/state.json"} <= stats.keys()
    assert {top, f"{top}/opt-round-2", f"{top}/baseline"} <= folders
    assert f"{top}/.helix/cache" not in folders  # never walked: a cache never changes an output


def test_seen_answers_from_the_listing_and_falls_back_outside_it(ws: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from helix_engine.workspace import reading

    _computed(capsys, ws, "--json")  # makes .helix/cache/
    found = status_cache.fingerprint(ws, ("json", "best", "None"))
    calls: list[str] = []
    real = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path, *a, **k: calls.append(os.fspath(path)) or real(path, *a, **k))
    state = os.fspath(ws / "opt-round-1" / "round-state.json")
    with reading.walked(found.listing):
        assert reading.seen(state)[2] == real(state).st_ino
        with pytest.raises(FileNotFoundError):
            reading.seen(os.fspath(ws / "opt-round-1" / "opt_add_perf.paired.json"))  # its folder was listed
        assert calls == []
        reading.seen(os.fspath(ws / ".helix" / "cache"))  # seen by the walk, not walked into
        assert calls == []
        reading.seen(os.fspath(ws / STORED))  # in a folder not walked: looked at
        assert len(calls) == 1
    reading.seen(state)  # outside the load: looked at
    assert len(calls) == 2


@pytest.mark.parametrize("form", ["path", "dot"])
def test_a_computed_status_looks_at_no_round_file_the_walk_saw(ws: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    """After one perf file changes, the load takes the round folders' lstats from the walk
    (9 a round: ~15 ms at 1000 rounds), and prints what a load without the walk prints; the same
    run inside the workspace (`helix status .`, whose walk lists ./x where the load names x)."""
    target = str(ws)
    if form == "dot":
        monkeypatch.chdir(ws)
        target = "."
    first = _computed(capsys, ws, "--json")
    write_perf(ws / "opt-round-1" / "opt_add_perf.txt", {"a": 8.5, "b": 18.0})
    looked: list[str] = []
    real = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path, *a, **k: looked.append(os.fspath(path)) or real(path, *a, **k))
    walks: list[status_cache.Fingerprint] = []
    original = status_cache.fingerprint
    monkeypatch.setattr(status_cache, "fingerprint", lambda *a: walks.append(original(*a)) or walks[-1])
    code, out = _run(capsys, target, "--json")
    assert code == 0 and out != first and walks and walks[-1].listing is not None
    assert [p for p in looked if "opt-round-" in p] == []  # every look at a round's files came from the walk
    monkeypatch.setattr(os, "lstat", real)
    assert out == _computed(capsys, Path(target), "--json")


def test_seen_reads_a_name_up_and_over_a_listed_folder_from_the_listing(
        ws: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A round's comparison target (opt-round-N/../baseline/...) is the baseline's name in the
    listing, but only through folders the walk listed (a linked folder's .. leads elsewhere)."""
    from helix_engine.workspace import reading

    (ws / "linked").symlink_to(tmp_path, target_is_directory=True)
    found = status_cache.fingerprint(ws, ("json", "best", "None"))
    calls: list[str] = []
    real = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path, *a, **k: calls.append(os.fspath(path)) or real(path, *a, **k))
    top = os.fspath(ws)
    with reading.walked(found.listing):
        assert reading.seen(f"{top}/opt-round-2/../baseline/add_perf.txt")[2] == \
            real(f"{top}/baseline/add_perf.txt").st_ino
        assert calls == []
        with pytest.raises(FileNotFoundError):  # a link: looked at for real (it leads out of the workspace)
            reading.seen(f"{top}/linked/../baseline/add_perf.txt")
        assert calls == [f"{top}/linked/../baseline/add_perf.txt"]


@pytest.mark.parametrize("path, expected", [
    ("ws/r1/../baseline/x", "ws/baseline/x"), ("r1/../x", "x"), ("/a/ws/r1/../b/c", "/a/ws/b/c"),
    ("ws/r1/../../x", "x"), ("ws/r1/./../x", "ws/x"),
    ("ws/r2/../x", None), ("ws/r1/../b/../c", None),  # r2, ws/b: not folders the walk listed
])
def test_a_dot_dot_is_collapsed_only_over_listed_folders(path: str, expected: str | None) -> None:
    from helix_engine.workspace.reading import _collapsed

    assert _collapsed(path, {"ws/r1", "ws", "r1", "/a/ws/r1"}) == expected
