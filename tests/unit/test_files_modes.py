"""atomic_write_text keeps normal file permissions: mkstemp's 0600 made every file helix
wrote (opt-note.md, state.json, round snapshots) unreadable to anyone else sharing the
workspace, and silently narrowed a file a person had made group-readable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from helix_engine.workspace.files import atomic_write_json, atomic_write_text


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "opt-note.md", "# notes\n")
        atomic_write_json(tmp_path / "state.json", {"a": 1})
    finally:
        os.umask(old)
    assert _mode(tmp_path / "opt-note.md") == 0o644
    assert _mode(tmp_path / "state.json") == 0o644


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "opt-note.md"
    path.write_text("old\n")
    path.chmod(0o664)
    atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n" and _mode(path) == 0o664
    path.chmod(0o600)
    atomic_write_text(path, "newer\n")
    assert _mode(path) == 0o600
