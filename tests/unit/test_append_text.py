"""files.append_text: the open is the check (issue 11, item 3 - the FIFO swap left open).

A FIFO or a link swapped in after a caller's pre-check must be refused by the append itself:
no blocking on a FIFO (with or without a reader), no write through a link to a file outside.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from helix_engine.workspace.files import append_text


def _append_within(path: Path, text: str, seconds: float = 5.0) -> BaseException | None:
    """Run append_text in a thread; fail the test if it blocks; return what it raised."""
    box: list[BaseException | None] = []

    def go() -> None:
        try:
            append_text(path, text)
            box.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box.append(exc)

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        # release it: open the FIFO for reading so the blocked writer returns
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb", closefd=True):
            pass
        pytest.fail("append_text blocked on a FIFO")
    return box[0]


def test_regular_file_appends(tmp_path: Path) -> None:
    path = tmp_path / "attempts.md"
    path.write_text("a\n")
    assert _append_within(path, "b\n") is None
    assert path.read_text() == "a\nb\n"


def test_fifo_without_reader_is_refused_with_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "attempts.md"
    os.mkfifo(path)
    exc = _append_within(path, "x\n")
    assert isinstance(exc, OSError) and "FIFO" in str(exc) and "remove it" in str(exc)


def test_fifo_with_a_reader_is_refused_not_written(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a reader makes a plain open succeed
    try:
        exc = _append_within(path, "secret\n")
        assert isinstance(exc, OSError) and "FIFO" in str(exc)
        assert os.read(reader, 100) == b""  # nothing was written into the pipe (EOF: no writer left)
    finally:
        os.close(reader)


def test_symlink_to_outside_is_refused_and_target_untouched(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    link = ws / "attempts.md"
    link.symlink_to(outside)
    exc = _append_within(link, "payload\n")
    assert isinstance(exc, OSError) and "symbolic link" in str(exc)
    assert outside.read_text() == "keep\n"


def test_dangling_symlink_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "created-outside.txt"
    link = tmp_path / "timings.jsonl"
    link.symlink_to(target)
    exc = _append_within(link, "x\n")
    assert isinstance(exc, OSError)
    assert not target.exists()
