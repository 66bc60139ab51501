"""The one sanitizer for workspace text on its way to a terminal.

Why: a workspace is written by agents, colleagues or anyone with access to a shared server.
A case label, folder name, job field, op name or markdown line can carry terminal escape
sequences (``ESC ]0;title BEL`` renames the window, ``ESC ]52;c;… BEL`` writes the
clipboard, ``ESC [2J`` clears the screen) or bidi overrides that make text read differently
from what it is. Every workspace-derived string printed as text, markdown or trend output,
and every one the cockpit shows, passes through :func:`clean` first.

What changes: C0 controls (except newline and tab where the text is multi-line), DEL, C1
controls, bidi embeddings/overrides/isolates and marks, lone surrogates (undecodable bytes
of a file name read with ``surrogateescape``), and the line/paragraph separators become
visible escapes such as ``\\x1b``, ``\\u202e`` or ``\\udcff``. Everything else, including
all printable non-ASCII text, is kept as is, so ordinary output stays byte-identical.

Where it is applied: each formatter escapes the workspace fields it prints (status, compare-perf,
jobs, profile-report, ir, the eval commands); ``helix_engine.cli.main`` adds a final guard
(:func:`guarded_stdio`) so a field a formatter forgets is still escaped; JSON goes past the guard
(``console.print_json``). The cockpit wraps workspace text in ``helix_tui.render.plain``.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any

#: Bidi formatting characters (LRE RLE PDF LRO RLO, LRI RLI FSI PDI), marks (LRM RLM ALM)
#: and the Unicode line/paragraph separators, which some terminals treat as newlines.
_BIDI = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029"
_UNSAFE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_UNSAFE_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: Any, *, multiline: bool = False) -> str:
    """``text`` (any value; ``str()`` is taken) with every unsafe character made visible.

    ``multiline`` keeps ``\\n`` and ``\\t`` (markdown bodies, logs); a ``\\r`` is always
    escaped, since a bare carriage return lets a line overwrite what was printed before it.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    pattern = _UNSAFE_BLOCK if multiline else _UNSAFE_LINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_visible, text)


def clean_name(name: Any) -> str:
    """A file or folder name for display: undecodable bytes and controls made visible."""
    return clean(name)


def is_clean(text: str, *, multiline: bool = False) -> bool:
    """True when :func:`clean` would leave ``text`` unchanged."""
    pattern = _UNSAFE_BLOCK if multiline else _UNSAFE_LINE
    return pattern.search(text) is None


# ------------------------------------------------------------------------ the final guard

#: The only escape sequences helix itself writes to a terminal: the SGR colours of
#: ``helix status`` (green, yellow, red, dim, reset). The final guard lets these through.
SGR: dict[str, str] = {"green": "\x1b[32m", "yellow": "\x1b[33m", "red": "\x1b[31m", "dim": "\x1b[2m",
                       "reset": "\x1b[0m"}
_OWN_SGR = re.compile("|".join(re.escape(code) for code in SGR.values()))


def clean_output(text: str) -> str:
    """Text on its way out of the CLI, with :func:`clean` (multi-line) applied to everything
    but helix's own colour codes.

    Why: defence in depth. Every workspace field is cleaned where it is formatted; this
    catches one that a future formatter forgets, so no escape sequence from a workspace
    reaches the terminal whatever the formatter does.
    """
    if _UNSAFE_BLOCK.search(text) is None:
        return text
    parts: list[str] = []
    start = 0
    for match in _OWN_SGR.finditer(text):
        parts += [clean(text[start:match.start()], multiline=True), match.group()]
        start = match.end()
    parts.append(clean(text[start:], multiline=True))
    return "".join(parts)


class GuardedStream:
    """A text stream whose writes pass through :func:`clean_output` (everything else, such as
    ``isatty``, ``flush`` or ``encoding``, is the wrapped stream's). ``raw`` is the wrapped
    stream, for JSON: ``json.dumps`` already escapes C0 controls, and escaping C1 or bidi
    characters the text way would make the JSON invalid."""

    def __init__(self, stream: Any) -> None:
        self.raw = stream

    def write(self, text: str) -> int:
        self.raw.write(clean_output(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


@contextlib.contextmanager
def guarded_stdio() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` wrapped in :class:`GuardedStream` for the block."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = GuardedStream(saved[0]), GuardedStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def unguarded(stream: Any) -> Any:
    """The stream under a :class:`GuardedStream` (``stream`` itself when it is not one)."""
    return stream.raw if isinstance(stream, GuardedStream) else stream
