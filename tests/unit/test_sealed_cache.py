"""Sealed cache files (workspace/sealed.py, issue 12): pickles read back only when this user's key
and code sealed them; the key is private, made once, shared by concurrent first users; without a
key nothing is kept and everything is computed; a file changed in the last seconds is not kept by
its identity (the round cache's guard)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_engine.status import collect, render
from helix_engine.workspace import records, round_cache, sealed
from helix_engine.workspace.snapshot import load_workspace
from tests.builders import RoundSpec, build_workspace

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh key folder for this test (the suite's is shared by every test of the run)."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    sealed.forget_key()
    yield home / "helix" / sealed.KEY_NAME
    sealed.forget_key()


def test_the_key_is_made_once_private_and_reused(own_key: Path) -> None:
    assert not own_key.exists()
    key = sealed.user_key()
    assert key is not None and len(key) == sealed.KEY_BYTES
    assert stat.S_IMODE(own_key.stat().st_mode) == 0o600 and own_key.read_bytes() == key
    sealed.forget_key()
    assert sealed.user_key() == key
    assert [p.name for p in own_key.parent.iterdir()] == [sealed.KEY_NAME]  # no temp file left


def test_a_key_others_can_read_or_a_link_is_no_key(own_key: Path) -> None:
    sealed.user_key()
    os.chmod(own_key, 0o644)
    sealed.forget_key()
    assert sealed.user_key() is None and sealed.seal({"a": 1}, "x") is None
    os.chmod(own_key, 0o600)
    target = own_key.with_name("real.key")
    os.rename(own_key, target)
    own_key.symlink_to(target)
    sealed.forget_key()
    assert sealed.user_key() is None


def test_seal_and_unseal(own_key: Path) -> None:
    data = sealed.seal({"rounds": {1: [1.5, None]}}, "rounds.sealed")
    assert data is not None and sealed.unseal(data, "rounds.sealed") == {"rounds": {1: [1.5, None]}}
    assert sealed.unseal(data, "rounds.delta.sealed") is None  # sealed for another file
    assert sealed.unseal(data[:-1] + bytes([data[-1] ^ 1]), "rounds.sealed") is None  # one bit of the payload
    assert sealed.unseal(data[:20] + bytes([data[20] ^ 1]) + data[21:], "rounds.sealed") is None  # of the seal
    assert sealed.unseal(data[len(sealed.MAGIC) + 32:], "rounds.sealed") is None  # the bare pickle
    assert sealed.unseal_bytes(sealed.seal_bytes(b"x", "f", "other code") or b"", "f") is None
    sealed.forget_key()
    sealed._key = b"k" * sealed.KEY_BYTES  # noqa: SLF001 - another user
    assert sealed.unseal(data, "rounds.sealed") is None


def test_two_first_users_at_once_share_one_key(own_key: Path) -> None:
    script = "from helix_engine.workspace import sealed; print(sealed.user_key().hex())"
    env = {**os.environ, "XDG_CACHE_HOME": str(own_key.parent.parent)}
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and bytes.fromhex(keys.pop()) == own_key.read_bytes()


def _ws(tmp_path: Path) -> Path:
    rounds = [RoundSpec({"a": 8.0, "b": 18.0}), RoundSpec({"a": 7.0, "b": 14.0}, parent="opt-round-1")]
    return build_workspace(tmp_path / "ws", baseline={"a": 10.0, "b": 20.0}, rounds=rounds)


def _status(ws: Path) -> str:
    records.forget()
    statuses, _ = collect([ws])
    return render(statuses, fmt="json")


def test_without_a_key_nothing_is_kept_and_everything_is_computed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _ws(tmp_path)
    expected = _status(ws)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # XDG_CACHE_HOME under a file: no key can be made
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "x"))
    sealed.forget_key()
    try:
        for name in (round_cache.CACHE_FILE, "intervals.sealed"):
            (ws / ".helix" / "cache" / name).unlink(missing_ok=True)
        assert _status(ws) == expected == _status(ws)
        assert not (ws / ".helix" / "cache" / round_cache.CACHE_FILE).exists()
    finally:
        sealed.forget_key()


def test_a_file_changed_in_the_last_seconds_is_not_kept_by_its_identity(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the guard on (the suite turns it off; helix's is 3 s, this one 0.2 s): a same-size rewrite
    within one timestamp tick would keep its old identity, so nothing just written is kept; once
    settled (its ctime too, which no one can set back), it is."""
    monkeypatch.setattr(round_cache, "RECENT_NS", 200_000_000)
    ws = _ws(tmp_path)
    load_workspace(ws)
    kept = round_cache._read(ws)[1]  # noqa: SLF001 - the file with its delta over it
    assert kept["context"] is not None and not kept["reads"] and not kept["perf"] and not kept["files"]
    assert not kept["rounds"]  # nor a summary judged from such a file (its key is the file's identity)
    time.sleep(0.25)
    load_workspace(ws)
    kept = round_cache._read(ws)[1]  # noqa: SLF001
    assert sorted(kept["reads"]) == [1, 2] and sorted(kept["perf"]) == [1, 2] and sorted(kept["rounds"]) == [1, 2]
    assert sorted(kept["files"]) == ["opt-note.md", "state.json"]
    state = ws / "opt-round-2" / "round-state.json"
    data = json.loads(state.read_text())
    state.write_text(json.dumps({**data, "correctness_status": "failed"}))  # in place, "passed": the same size
    warnings = json.loads(_status(ws))["operators"][0]["warnings"]
    assert "skipping opt-round-2 because correctness_status is failed" in warnings
    entry = round_cache._read(ws)[1]["reads"].get(2)  # noqa: SLF001 - just written: not kept (an entry
    assert entry is None or entry[0][0] != records.file_id(state)  # of the file as it was is a miss)


def test_a_key_in_a_place_others_could_write_is_no_key(own_key: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A key someone else could have put there is never used: a relative XDG_CACHE_HOME (a
    workspace's own .cache/ under `cd workspace`), a folder others can write, a FIFO."""
    made = sealed.user_key()
    assert made is not None
    monkeypatch.chdir(tmp_path)
    planted = tmp_path / "rel" / "helix" / sealed.KEY_NAME
    planted.parent.mkdir(parents=True, mode=0o700)
    planted.write_bytes(b"p" * sealed.KEY_BYTES)
    os.chmod(planted, 0o600)
    monkeypatch.setenv("XDG_CACHE_HOME", "rel")  # relative: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    sealed.forget_key()
    assert sealed.key_path() == tmp_path / "home" / ".cache" / "helix" / sealed.KEY_NAME
    assert sealed.user_key() not in (None, b"p" * sealed.KEY_BYTES)
    monkeypatch.setenv("XDG_CACHE_HOME", str(own_key.parent.parent))
    os.chmod(own_key.parent, 0o703)  # the key's folder writable by anyone: made private, its key replaced
    sealed.forget_key()
    fresh = sealed.user_key()
    assert fresh is not None and fresh != made and own_key.read_bytes() == fresh
    assert stat.S_IMODE(own_key.parent.stat().st_mode) == 0o700
    os.chmod(own_key.parent.parent, 0o777)  # the folder above it writable by anyone
    sealed.forget_key()
    assert sealed.user_key() is None and sealed.seal({"a": 1}, "x") is None
    os.chmod(own_key.parent.parent, 0o700)
    own_key.unlink()
    os.mkfifo(own_key, 0o600)  # read without blocking: refused, not a hang
    sealed.forget_key()
    assert sealed.user_key() is None


def test_a_umask_002_cache_folder_of_a_private_group_keeps_its_key(own_key: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Systems with user-private groups and umask 002 make ~/.cache 0775 (pip, other tools): helix
    keeps its key there, its own folder made 0700 with the key kept; a group with others in it, or
    another user's group, is a place others could write."""
    import grp

    key = sealed.user_key()
    base = own_key.parent.parent
    os.chmod(base, 0o775)
    os.chmod(own_key.parent, 0o755)  # readable by others, writable by no one else: the key stays
    monkeypatch.setattr(grp, "getgrgid", lambda gid: grp.struct_group(("me", "x", gid, [])))
    sealed.forget_key()
    assert sealed.user_key() == key and stat.S_IMODE(own_key.parent.stat().st_mode) == 0o700
    monkeypatch.setattr(grp, "getgrgid", lambda gid: grp.struct_group(("team", "x", gid, ["someone-else"])))
    sealed.forget_key()
    assert sealed.user_key() is None


def test_a_linked_cache_folder_is_followed(own_key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~/.cache a link to a bigger disk (home quotas) is followed; helix's own folder as a link is not."""
    real = tmp_path / "bigdisk" / "cache"
    real.mkdir(parents=True, mode=0o700)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".cache").symlink_to(real)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    sealed.forget_key()
    assert sealed.user_key() is not None and (real / "helix" / sealed.KEY_NAME).is_file()
    sealed.forget_key()
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    (real / "helix").rename(other / "helix")
    (real / "helix").symlink_to(other / "helix")
    assert sealed.user_key() is None and sealed.user_cache_folder_made() is None


def test_a_killed_writers_temp_files_are_removed_by_the_next_write(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    cache = ws / ".helix" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    old, young, other = (cache / ".status.sealed.abcdefgh.tmp", cache / ".status.sealed.ijklmnop.tmp",
                         cache / ".status.sealed.notours.tmp")
    for path in (old, young, other):
        path.write_bytes(b"partial")
    stale = time.time() - sealed.STALE_TEMP_S - 60
    os.utime(old, (stale, stale))
    os.utime(other, (stale, stale))
    assert sealed._write_atomically(ws, "status.sealed", lambda fd: os.write(fd, b"x"))  # noqa: SLF001
    assert not old.exists() and young.exists() and other.exists()  # only its pattern, only when old
    assert (cache / "status.sealed").read_bytes() == b"x"


def test_a_write_that_cannot_land_is_false_not_an_error(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    cache = ws / ".helix" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "status.sealed").mkdir()  # a folder where the file goes: the rename fails
    assert not sealed._write_atomically(ws, "status.sealed", lambda fd: os.write(fd, b"x"))  # noqa: SLF001
    assert [p.name for p in cache.iterdir() if p.name.startswith(".status")] == []  # its temp removed
