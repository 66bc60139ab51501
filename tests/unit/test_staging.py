"""Staging folders of job outputs: promoted by rename when the job passed, removed otherwise,
and leftovers of a killed helix (same host, dead pid) removed by the next run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.workspace import staging


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_promote_renames_in_the_same_folder(tmp_path: Path) -> None:
    final = tmp_path / "profile" / "PROF_a_1"
    staged = staging.staging_dir(final)
    assert staged.parent == final.parent and staged.name.startswith(".PROF_a_1.helix-")
    assert staged.name.endswith(f"-{os.getpid()}.partial")
    staged.mkdir(parents=True)
    (staged / "trace.json").write_text("{}")
    staging.promote(staged, final)
    assert (final / "trace.json").read_text() == "{}" and not staged.exists()


def test_promote_never_replaces_an_existing_folder(tmp_path: Path) -> None:
    final = tmp_path / "ir"
    (final / "old").mkdir(parents=True)
    staged = staging.staging_dir(final)
    staged.mkdir()
    with pytest.raises(FileExistsError):
        staging.promote(staged, final)
    assert (final / "old").is_dir() and staged.is_dir()


def test_discard_does_not_follow_a_symlink(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("x")
    link = staging.staging_dir(tmp_path / "ir")
    link.symlink_to(precious)
    staging.discard(link)
    assert not link.exists() and (precious / "keep.txt").read_text() == "x"


def test_leftovers_of_dead_writers_are_removed_only(tmp_path: Path) -> None:
    mine = staging.staging_dir(tmp_path / "PROF_a_1")
    host = mine.name.split(".helix-", 1)[1].rsplit("-", 1)[0]
    dead = tmp_path / f".PROF_b_2.helix-{host}-{_dead_pid()}.partial"
    other_host = tmp_path / f".PROF_c_3.helix-elsewhere-{_dead_pid()}.partial"
    lookalike = tmp_path / "PROF_d_4"
    for folder in (mine, dead, other_host, lookalike):
        folder.mkdir()
        (folder / "f").write_text("x")
    assert staging.remove_leftovers(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (mine, other_host, lookalike))
