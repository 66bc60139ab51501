"""A line-API view of a growing text file: tail the end, follow appends, page back on demand.

Like toolong, nothing here loads a whole file: opening reads the last ``chunk_bytes``, appends
are read from the last offset, and scrolling to the top (or ``home``) reads the previous chunk.
Only the visible lines are rendered (``render_line``), so a 50 MB attempts.md costs what its
tail costs. A vanished or shrunk file is reopened, never an error.
"""

from __future__ import annotations

from pathlib import Path

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

CHUNK_BYTES = 128 * 1024
MAX_LINE_CELLS = 1000
_HEADING = Style(bold=True)
_NOTE = Style(dim=True, italic=True)


class FileTail(ScrollView, can_focus=True):
    """Shows the end of ``path`` and follows it while the view is at the bottom."""

    BINDINGS = [
        Binding("home", "older", "Older", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]

    DEFAULT_CSS = """
    FileTail { height: 1fr; }
    """

    def __init__(self, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None, id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.chunk_bytes = chunk_bytes
        self.path: Path | None = None
        self.lines: list[str] = []
        self.start = 0  # byte offset of lines[0]
        self.end = 0  # byte offset after the last complete line read
        self.note = ""
        self.partial = ""  # the last line while it has no newline yet
        self._follow = True
        self._width = 0

    # ------------------------------------------------------------------ file reading

    def open(self, path: Path | None, note: str = "") -> None:
        """Show ``path`` (None: show ``note`` only), scrolled to the end."""
        self.path = Path(path) if path is not None else None
        self.lines, self.start, self.end, self._width, self.partial = [], 0, 0, 0, ""
        self.note = note
        if self.path is not None:
            self._read_tail()
        self._resize()
        self._follow = True
        self.scroll_end(animate=False, immediate=True)
        self.call_after_refresh(self._keep_following)

    def on_resize(self) -> None:
        """A pane shown for the first time (or resized) keeps following the end."""
        self.call_after_refresh(self._keep_following)

    def _keep_following(self) -> None:
        if self._follow and self.scroll_y < self.max_scroll_y:
            self.scroll_end(animate=False, immediate=True)

    def _file_size(self) -> int | None:
        try:
            return self.path.stat().st_size if self.path is not None and self.path.is_file() else None
        except OSError:
            return None

    def _read_bytes(self, start: int, length: int) -> bytes:
        assert self.path is not None
        try:
            with open(self.path, "rb") as handle:
                handle.seek(start)
                return handle.read(length)
        except OSError:
            return b""

    def _read_tail(self) -> None:
        size = self._file_size()
        if size is None:
            self.note = self.note or f"{self.path.name if self.path else 'file'} does not exist yet"
            return
        start = max(0, size - self.chunk_bytes)
        data = self._read_bytes(start, size - start)
        if start > 0:  # drop the partial first line
            cut = data.find(b"\n")
            data = data[cut + 1 :] if cut >= 0 else b""
            start = size - len(data)
        complete = data[: data.rfind(b"\n") + 1]
        self.start, self.end = start, start + len(complete)
        self.partial = data[len(complete) :].decode("utf-8", errors="replace")
        self._add(_split(complete), at_end=True)
        self.note = ""

    def poll(self) -> bool:
        """Read what was appended since the last call; True when something changed."""
        if self.path is None:
            return False
        size = self._file_size()
        if size is None:
            if self.lines or not self.note:
                self.open(self.path, note=f"{self.path.name} was removed")
                return True
            return False
        if size < self.end:  # truncated or replaced: start over
            self.open(self.path)
            return True
        if size == self.end and not self.partial:
            if not self.lines and self.note:
                self.note = ""
                self._resize()
                return True
            return False
        data = self._read_bytes(self.end, min(size - self.end, 8 * self.chunk_bytes))
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
        """Read the chunk before the first loaded line and keep the view where it was."""
        if self.path is None or self.start <= 0:
            self.scroll_home(animate=False)
            return
        begin = max(0, self.start - self.chunk_bytes)
        data = self._read_bytes(begin, self.start - begin)
        if begin > 0:
            cut = data.find(b"\n")
            data = data[cut + 1 :] if cut >= 0 else b""
        new = _split(data)
        if not new and begin > 0:
            return
        self.start = self.start - len(data)
        self._add(new, at_end=False)
        self._resize()
        self.scroll_to(y=len(new), animate=False, immediate=True)

    def _add(self, new: list[str], *, at_end: bool) -> None:
        if new:
            self._width = max(self._width, max(len(line) for line in new))
        self.lines = self.lines + new if at_end else new + self.lines

    def _shown(self) -> list[str]:
        return self.lines + [self.partial] if self.partial else self.lines

    def _resize(self) -> None:
        rows = len(self.lines) + (1 if self.partial else 0) + (1 if self.start > 0 else 0) + (1 if self.note else 0)
        self.virtual_size = Size(min(self._width, MAX_LINE_CELLS) + 1, rows)
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
        offset = 1 if self.start > 0 else 0
        if offset and index == 0:
            segment = Segment(f"… {self.start} earlier bytes (home: load more)", _NOTE)
        else:
            i = index - offset
            n_lines = len(self.lines)
            if 0 <= i < n_lines or (i == n_lines and self.partial):
                text = (self.lines[i] if i < n_lines else self.partial)[:MAX_LINE_CELLS]
                segment = Segment(text, _HEADING if text.startswith("#") else None)
            elif i == n_lines + (1 if self.partial else 0) and self.note:
                segment = Segment(self.note, _NOTE)
            else:
                return Strip.blank(width, self.rich_style)
        strip = Strip([segment]).crop(self.scroll_offset.x, self.scroll_offset.x + width)
        return strip.extend_cell_length(width).apply_style(self.rich_style)


def _split(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace").replace("\t", "    ")
    return [line.rstrip("\r") for line in text.split("\n")[:-1]] if text else []
