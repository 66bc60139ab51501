"""Fixtures for the cockpit tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cockpit_helpers import make_workspace  # noqa: E402


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


@pytest.fixture
def active_ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path, active_round=True)


@pytest.fixture(autouse=True)
def _no_user_keymap(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cockpit reads the user's keymap file: tests (and snapshots) use the default keys."""
    monkeypatch.delenv("HELIX_KEYMAP", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))


