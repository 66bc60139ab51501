"""A line-API view of a growing text file: tail the end, follow appends, page back on demand.

Like toolong, nothing here loads a whole file: opening reads the last ``chunk_bytes``, appends
are read from the last offset, and scrolling to the top (or ``home``) reads the previous chunk.
Only the visible lines are rendered (``render_line``), so a 50 MB attempts.md costs what its
tail costs. Long lines wrap to the view's width (an 80-column terminal loses nothing); a line
longer than ``MAX_LINE_CELLS`` says how much was cut. A vanished or shrunk file is reopened,
never an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from helix_engine.sanitize import clean
from helix_engine.workspace.reading import UnreadableFile, open_workspace_file, owning_workspace

CHUNK_BYTES = 128 * 1024
MAX_LINE_CELLS = 4000
_HEADING = Style(bold=True)
_NOTE = Style(dim=True, italic=True)


class FileTail(ScrollView, can_focus=True):
    """Shows the end of ``path`` and follows it while the view is at the bottom."""

    BINDINGS = [
        Binding("home", "older", "Older", show=False, id="older"),
        Binding("end", "scroll_end", "End", show=False, id="end"),
    ]

    DEFAULT_CSS = """
    FileTail { height: 1fr; }
    """

    def __init__(self, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None, id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.chunk_bytes = chunk_bytes
        self.path: Path | None = None
        self.workspace: Path | None = None  # reads stay inside it (the safe reader)
        self.lines: list[str] = []
        self.start = 0  # byte offset of lines[0]
        self.end = 0  # byte offset after the last complete line read
        self.note = ""
        self.partial = ""  # the last line while it has no newline yet
        self._follow = True
        self._rows: list[tuple[str, Style | None]] = []  # wrapped rows, top to bottom
        self._row_width = 0
        self._generation = 0  # one per open: a read for an earlier file is dropped
        self._loading = False  # a load's tail read is in flight

    # ------------------------------------------------------------------ file reading
    #
    # Every read has a read half (bytes from disk: ``read_tail`` / ``read_from`` below, safe to
    # run in a thread) and an apply half (fields and rows, on the event loop). The cockpit uses
    # ``load`` / ``follow`` / ``action_older``, whose read halves run in thread workers that post
    # the bytes back, so a selection change never reads 4 × 128 KB on the UI thread; ``open`` and
    # ``poll`` do both halves at once (tests, and code that already runs off the event loop).

    class Read(Message):
        """Bytes a worker read for this tail (``generation``: the open they belong to)."""

        def __init__(self, generation: int, op: str, data: Any) -> None:
            super().__init__()
            self.generation, self.op, self.data = generation, op, data

    def _begin(self, path: Path | None, note: str, workspace: Path | None) -> None:
        self._generation += 1  # reads made for an earlier open are dropped when they arrive
        self._loading = False
        self.path = Path(path) if path is not None else None
        if workspace is not None:
            self.workspace = Path(workspace)
        self.lines, self.start, self.end, self.partial = [], 0, 0, ""
        self.note = note

    def _shown_at_end(self) -> None:
        self._resize()
        self._follow = True
        self.scroll_end(animate=False, immediate=True)
        self.call_after_refresh(self._keep_following)

    def open(self, path: Path | None, note: str = "", workspace: Path | None = None) -> None:
        """Show ``path`` (None: show ``note`` only), scrolled to the end, reading it now.
        ``workspace`` is the folder every read must stay inside (default: the one owning ``path``)."""
        self._begin(path, note, workspace)
        if self.path is not None:
            self._read_tail()
        self._shown_at_end()

    def load(self, path: Path | None, note: str = "", workspace: Path | None = None) -> None:
        """``open`` with the read in a thread worker: the tail shows when the bytes arrive."""
        self._begin(path, note, workspace)
        self._shown_at_end()
        if self.path is not None:
            self._loading = True  # follow() waits for the tail: it would read from offset 0
            self._in_worker("tail", read_tail, self.path, self._root(), self.chunk_bytes, self.note)

    def follow(self) -> None:
        """``poll`` with the read in a thread worker (what the cockpit calls on a file change)."""
        if self.path is not None and not self._loading:
            self._in_worker("poll", read_from, self.path, self._root(), self.end, 8 * self.chunk_bytes)

    def _in_worker(self, op: str, read: Any, *args: Any) -> None:
        generation = self._generation

        def work() -> None:
            self.post_message(self.Read(generation, op, read(*args)))

        self.run_worker(work, thread=True, group=f"tail-{id(self)}", exit_on_error=False, description=f"tail {op}")

    def on_file_tail_read(self, message: Read) -> None:
        message.stop()
        if message.generation != self._generation:
            return  # another file was opened since
        if message.op == "tail":
            self._loading = False
            self._take_tail(message.data)
            self._shown_at_end()
        elif message.op == "poll":
            read_at, size, data = message.data
            if read_at == self.end:
                self._apply_poll(size, data, reopen=self.load)
            elif size is not None and size > self.end:  # an earlier follow took part: read the rest
                self.follow()
        elif message.op == "older":
            begin_at, data = message.data
            if begin_at == self.start:
                self._apply_older(data)

    def on_resize(self) -> None:
        """A pane shown for the first time (or resized) re-wraps and keeps following the end."""
        if self._wrap_width() != self._row_width:
            self._resize()
        self.call_after_refresh(self._keep_following)

    def _keep_following(self) -> None:
        if self._follow and self.scroll_y < self.max_scroll_y:
            self.scroll_end(animate=False, immediate=True)

    def _root(self) -> Path:
        assert self.path is not None
        return self.workspace if self.workspace is not None else owning_workspace(self.path)

    def _read_tail(self) -> None:
        """Read the end of the file now and take it (the read half of ``open`` plus its fields)."""
        assert self.path is not None
        self._take_tail(read_tail(self.path, self._root(), self.chunk_bytes, self.note))

    def _take_tail(self, data: TailData) -> None:
        self.start, self.end, self.partial, self.note = data.start, data.end, data.partial, data.note
        self._add(data.lines, at_end=True)

    def poll(self) -> bool:
        """Read what was appended since the last call, now; True when something changed."""
        if self.path is None:
            return False
        read_at, size, data = read_from(self.path, self._root(), self.end, 8 * self.chunk_bytes)
        return self._apply_poll(size, data, reopen=self.open)

    def _apply_poll(self, size: int | None, data: bytes, reopen: Any) -> bool:
        assert self.path is not None
        if size is None:
            if self.lines or not self.note:
                reopen(self.path, note=f"{self.path.name} was removed")
                return True
            return False
        if size < self.end:  # truncated or replaced: start over
            reopen(self.path)
            return True
        if size == self.end and not self.partial:
            if not self.lines and self.note:
                self.note = ""
                self._resize()
                return True
            return False
        complete = data[: data.rfind(b"\n") + 1]
        partial = data[len(complete) :].decode("utf-8", errors="replace")
        if not complete and partial == self.partial:
            return False
        follow = self._follow or self.is_vertical_scroll_end or self.max_scroll_y == 0
        self.end += len(complete)
        self.partial = partial
        self.note = ""
        self._add(_split(complete), at_end=True)
        self._resize()
        if follow:
            self.scroll_end(animate=False, immediate=True)
        return True

    def action_older(self) -> None:
        """Read the chunk before the first loaded line (in a worker) and keep the view where it was."""
        if self.path is None or self.start <= 0:
            self.scroll_home(animate=False)
            return
        begin = max(0, self.start - self.chunk_bytes)
        self._in_worker("older", _read_before, self.path, self._root(), begin, self.start)

    def _apply_older(self, data: bytes) -> None:
        begin = max(0, self.start - len(data))
        if begin > 0:
            cut = data.find(b"\n")
            data = data[cut + 1 :] if cut >= 0 else b""
        new = _split(data)
        if not new and begin > 0:
            return
        self.start = self.start - len(data)
        before = len(self._rows) - (1 if self.start + len(data) > 0 else 0)
        self._add(new, at_end=False)
        self._resize()
        self.scroll_to(y=len(self._rows) - before, animate=False, immediate=True)

    def _add(self, new: list[str], *, at_end: bool) -> None:
        self.lines = self.lines + new if at_end else new + self.lines

    def _shown(self) -> list[str]:
        return self.lines + [self.partial] if self.partial else self.lines

    def _wrap_width(self) -> int:
        """The text width: the view less a vertical scrollbar (kept, so rows do not re-wrap
        when the scrollbar appears)."""
        return max(8, self.size.width - self.styles.scrollbar_size_vertical) if self.size.width else 80

    def _resize(self) -> None:
        width = self._row_width = self._wrap_width()
        rows: list[tuple[str, Style | None]] = []
        if self.start > 0:
            rows.append((f"… {self.start} earlier bytes (home: load more)", _NOTE))
        for line in self._shown():  # file text: escaped here, the one place rows are made
            style = _HEADING if line.startswith("#") else None
            rows.extend((part, style) for part in _wrap(clean(line), width))
        if self.note:
            rows.extend((part, _NOTE) for part in _wrap(clean(self.note), width))
        self._rows = rows
        self.virtual_size = Size(width, len(rows))
        self.refresh()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self.max_scroll_y > 0:
            self._follow = new >= self.max_scroll_y
        if new == 0 and old > 0 and self.start > 0:
            self.call_after_refresh(self.action_older)

    # ------------------------------------------------------------------ rendering

    def text_lines(self) -> list[str]:
        """Everything the view can show, top to bottom (for tests and copy)."""
        head = [f"… {self.start} earlier bytes (home: load more)"] if self.start > 0 else []
        return head + self._shown() + ([self.note] if self.note else [])

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if not 0 <= index < len(self._rows):
            return Strip.blank(width, self.rich_style)
        text, style = self._rows[index]
        strip = Strip([Segment(text, style)]).crop(self.scroll_offset.x, self.scroll_offset.x + width)
        return strip.extend_cell_length(width).apply_style(self.rich_style)


@dataclass
class TailData:
    """The end of a file as ``read_tail`` found it: complete lines from ``start`` to ``end``, the
    unfinished last line, and the note to show (why nothing is there)."""

    start: int = 0
    end: int = 0
    lines: list[str] = field(default_factory=list)
    partial: str = ""
    note: str = ""


def _file_size(path: Path) -> int | None:
    try:
        if os.path.islink(path) or not path.is_file():
            return None
        return path.stat().st_size
    except OSError:
        return None


def _read_bytes(path: Path, root: Path, start: int, length: int) -> bytes:
    try:  # the safe reader: a FIFO, device or link out of the workspace is never read
        with open_workspace_file(path, root) as handle:
            handle.seek(start)
            return handle.read(length)
    except OSError:
        return b""


def _absent_note(path: Path, root: Path) -> str:
    """Why there is nothing to show: the reader's sentence for a path that exists but is not a
    readable regular file (a FIFO, a link …), else "does not exist yet"."""
    if os.path.lexists(path):
        try:
            open_workspace_file(path, root).close()
        except UnreadableFile as exc:
            return clean(str(exc.problem))
        except OSError:
            pass
    return f"{clean(path.name)} does not exist yet"


def read_tail(path: Path, root: Path, chunk_bytes: int, note: str = "") -> TailData:
    """The last ``chunk_bytes`` of ``path`` (from its first complete line); bounded, from the end."""
    size = _file_size(path)
    if size is None:
        return TailData(note=note or _absent_note(path, root))
    start = max(0, size - chunk_bytes)
    data = _read_bytes(path, root, start, size - start)
    if start > 0:  # drop the partial first line
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
        start = size - len(data)
    complete = data[: data.rfind(b"\n") + 1]
    return TailData(start=start, end=start + len(complete), lines=_split(complete),
                    partial=data[len(complete) :].decode("utf-8", errors="replace"))


def read_from(path: Path, root: Path, end: int, cap: int) -> tuple[int, int | None, bytes]:
    """(``end``, the file's size or None when it is gone, the bytes after ``end``, capped)."""
    size = _file_size(path)
    if size is None or size <= end:
        return end, size, b""
    return end, size, _read_bytes(path, root, end, min(size - end, cap))


def _read_before(path: Path, root: Path, begin: int, start: int) -> tuple[int, bytes]:
    """(``start``, the bytes from ``begin`` up to ``start``): the chunk before the loaded lines."""
    return start, _read_bytes(path, root, begin, start - begin)


def _wrap(line: str, width: int) -> list[str]:
    """``line`` as rows of at most ``width`` cells, broken after a space when one is near."""
    if len(line) > MAX_LINE_CELLS:
        line = line[:MAX_LINE_CELLS] + f" … {len(line) - MAX_LINE_CELLS} more characters (e opens the file)"
    if (len(line) <= width and line.isascii()) or cell_len(line) <= width:
        return [line]
    rows: list[str] = []
    while line:
        head = chop_cells(line[: width * 2], width)[0] or line[:1]
        if len(head) < len(line):
            space = head.rfind(" ")
            if space >= width // 2:
                head = head[: space + 1]
        rows.append(head)
        line = line[len(head) :]
    return rows


def _split(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace").replace("\t", "    ")
    return [line.rstrip("\r") for line in text.split("\n")[:-1]] if text else []
