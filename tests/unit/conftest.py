"""Fixtures the unit tests of the workspace load share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helix_engine.workspace import reading, records


@pytest.fixture()
def perf_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every perf file a load reads (rounds and baseline), with no record list kept in memory."""
    records.forget()
    seen: list[Path] = []
    original = reading.read_perf_safe

    def spy(path: Path, workspace: Path) -> Any:
        seen.append(Path(path))
        return original(path, workspace)

    monkeypatch.setattr("helix_engine.workspace.round_reading.read_perf_safe", spy)
    monkeypatch.setattr(reading, "read_perf_safe", spy)
    return seen
