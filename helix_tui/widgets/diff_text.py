"""A unified diff as a Rich renderable that wraps long lines itself, so every screen row of an
added or removed line still starts with its ``+`` / ``-`` in the line's colour (Syntax's word
wrap drops the marker on continuation rows: at 80 columns a wrapped ``+`` line read as context).

Continuation rows start with the line's marker and a ``↪`` in the same colour. The text is
already escaped (TextPane cleans workspace text before it gets here) and is never markup.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style

#: Line kind → style. Headers (---/+++) before +/- so "+++ b/x.py" is not an added line.
STYLES: dict[str, Style] = {
    "header": Style(bold=True),
    "hunk": Style(color="cyan"),
    "add": Style(color="green"),
    "remove": Style(color="red"),
    "comment": Style(dim=True),
    "context": Style(),
}
CONTINUATION = "↪"


def line_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "header"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "remove"
    if line.startswith("#"):
        return "comment"
    return "context"


def wrap_line(line: str, width: int) -> Iterator[str]:
    """The screen rows of one diff line at ``width`` cells: the first as is, each continuation
    prefixed with the line's marker (or a space) and ``↪``."""
    line = line.expandtabs(4)
    width = max(width, 4)
    if cell_len(line) <= width:
        yield line
        return
    kind = line_kind(line)
    marker = line[0] if kind in ("add", "remove") else " "
    first, rest = _split(line, width)
    yield first
    prefix = marker + CONTINUATION
    while rest:
        chunk, rest = _split(rest, width - cell_len(prefix))
        yield prefix + chunk


def _split(text: str, width: int) -> tuple[str, str]:
    chunks = chop_cells(text, width)
    return chunks[0], text[len(chunks[0]):]


class DiffText:
    """Renders ``text`` (a unified diff, possibly with ``#`` comment lines) wrapped to the width."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        for line in self.lines:
            style = STYLES[line_kind(line)]
            for row in wrap_line(line, width):
                yield Segment(row, style)
                yield Segment.line()
