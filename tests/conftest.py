"""Shared test fixtures.

The suite runs one worker per core, each worker many test files in one process
(`pytest -n auto --dist loadfile`): what a test changes in the process is put back after it, so
no file's outcome depends on which files ran before it on the same worker.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# found examples are not kept in .hypothesis/ of the checkout: every run starts from the same state
settings.register_profile("helix", database=None)
settings.load_profile("helix")

# the sealed caches' key (workspace/sealed.py) lives in this run's own folder, not the user's
# ~/.cache: the commands the tests start as processes inherit it, so they share the run's key
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="helix-test-cache-")


@pytest.fixture(autouse=True)
def _files_settle_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The round cache keeps no entry of a file changed in the last 3 s (a same-size rewrite in one
    timestamp tick would look unchanged); a test writes a workspace and loads it within
    milliseconds, so in-process loads trust every file at once (test_sealed_cache.py checks the
    guard itself)."""
    from helix_engine.workspace import round_cache

    monkeypatch.setattr(round_cache, "RECENT_NS", 0)


@pytest.fixture(autouse=True)
def _process_as_it_was() -> Iterator[None]:
    """Put back what the cockpit and the CLI change for their process:
    - the collector: a cockpit raises its threshold and freezes each snapshot it loads (gc.freeze);
      left frozen, every later cockpit test's garbage stayed uncollectable (a worker running the
      cockpit tests grew from 77 to 229 MB over one file);
    - the parser `cli.command_names` stashes for the next `cli.main` (it holds the command functions
      as they were when it was built: a later test that patches one would run the real one);
    - the process's time zone (a test that sets TZ restores the variable, not tzset's effect)."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()
    cli = sys.modules.get("helix_engine.cli")
    if cli is not None:
        cli._built.clear()  # noqa: SLF001 - the stash itself is what leaks
    time.tzset()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_gate: run submit-round's gate as it is (no fixture evidence, "
                                       "the held-out job runs)")


@pytest.fixture(autouse=True)
def _rounds_measured_through_the_gate(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process commands on workspaces the builders write by hand read, where the gate left no
    record, the record a gate run would have left for the files as they are (tests/builders.py
    gate_record), and submit-round runs no held-out job: such tests are about what happens after
    the gate. The real checker still judges those records; a record on disk is read as it is.
    ``@pytest.mark.real_gate`` tests and every command a test starts as a process get the gate
    as it is."""
    if request.node.get_closest_marker("real_gate"):
        return
    from helix_engine.state import lifecycle, seals

    real = seals.read_record

    def or_fixture(ws: Path, name: str) -> tuple[dict[str, Any] | None, str | None]:
        record, why = real(ws, name)
        if record is not None or why is not None:
            return record, why
        from tests.builders import gate_record

        return gate_record(ws, name), None

    monkeypatch.setattr(seals, "read_record", or_fixture)
    monkeypatch.setattr(lifecycle, "_held_out_failure", lambda round_dir, kwargs: None)
