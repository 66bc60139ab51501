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
