"""Profiler CSVs through polars, one bounded chunk at a time, from the safe reader's descriptor.

Why this shape:
- Profiler CSVs (``kernel_details.csv``, ``op_summary_*.csv``) grow with kernel launches: a long
  run writes millions of rows, gigabytes. polars parses them in native code (about 10x the csv
  module), but its own ``scan_csv`` holds the whole file in memory; here the bytes are read in
  chunks of `CHUNK_BYTES`, cut at a line end, into `BUFFERS` reused buffers that polars parses
  in place, and each chunk is aggregated as it comes, so memory stays flat whatever the file
  size. Three threads overlap: one reads, one parses, the caller's runs the queries (polars and
  the reads release the GIL); only the columns asked for are built, the numbers a query needs
  on every row converted once per chunk (`numbers_of`).
- The bytes come from `open_workspace_file` (DESIGN principle 8: a regular file, no final
  symbolic link, inside its root, checked on the opened descriptor). polars never opens a path,
  so nothing can be swapped in between the check and the read, and a FIFO never blocks.
- Cells are strings; `text` strips them the way CANN outputs need (the TAB after timestamps)
  and `number` parses them (``N/A``, empty, garbage, inf and nan → null). A UTF-8 BOM is
  dropped from the header.
- Damage is a `Problem` with its line, never an exception: a missing or empty file, a missing
  column, undecodable text (rows before it are kept), a short (truncated) row
  (skipped with a warning). Rows longer than the header keep the known columns.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import io
import itertools
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from helix_engine.errors import HelixError
from helix_engine.workspace.problem import Problem
from helix_engine.workspace.reading import (
    UnreadableFile,
    open_workspace_file,
    owning_workspace,
    shown,
)

if TYPE_CHECKING:
    import polars as pl

T = TypeVar("T")
#: Bytes per block: ~27k kernel_details rows; peak memory is a few times `BUFFERS` of these.
CHUNK_BYTES = 8 << 20
#: Blocks polars parses at once (one parse of a block keeps two cores only partly busy; on the
#: 2-core box, 1M rows: 2 → 0.39 s and 130 MiB, 3 → 0.35 s and 143 MiB, profile-report 187 → 200 MiB).
PARSERS = 3
#: Read buffers in turn: one being read, `PARSERS` + 1 being parsed or waiting, one being checked.
BUFFERS = PARSERS + 3
#: One line longer than this is not a profiler row (the csv module's old field cap was 1 MiB).
MAX_LINE_BYTES = 64 << 20
#: The data-row index column every chunk carries (0-based; first-seen order of groups).
ROW = "__row"
_BAD_TEXT = "is not UTF-8 text (binary or garbled); re-run the profiler"


class ProfileDataError(HelixError):
    """A profiler file helix needs is missing or unreadable (message says which and why)."""


@dataclass
class CsvReadReport:
    """What one pass saw besides the rows: header, row counts, problems."""

    path: Path
    header: list[str] = field(default_factory=list)
    rows: int = 0
    skipped_rows: int = 0
    problems: list[Problem] = field(default_factory=list)

    def problem(self, message: str, line: int | None = None, severity: Literal["error", "warning"] = "error") -> None:
        self.problems.append(Problem(file=str(self.path), message=message, line=line, severity=severity))


def raise_on(report: CsvReadReport) -> None:
    """Raise ProfileDataError with the first error of a pass (for callers that need the numbers)."""
    errors = [p for p in report.problems if p.severity == "error"]
    if errors:
        raise ProfileDataError(str(errors[0]))


def clean_cell(cell: str) -> str:
    """Strip the TABs and spaces CANN leaves around cells (and a UTF-8 BOM)."""
    return cell.strip().lstrip("\ufeff").strip()


def text(column: str) -> pl.Expr:
    """A cell as text: stripped of the spaces and TABs CANN leaves, "" for an empty cell.
    (Cleaning costs a pass over the column: group by the raw cells, then clean the keys.)"""
    import polars as pl

    return pl.col(column).fill_null("").str.strip_chars()


def number(column: str) -> pl.Expr:
    """A cell as a float: ``N/A``/empty/garbage/inf/nan → null, never an exception. (Like
    Python's ``float`` of the stripped cell, except that ``1_000`` and non-ASCII digits are
    garbage too.)"""
    import polars as pl

    value = pl.col(column).str.strip_chars().cast(pl.Float64, strict=False)
    return pl.when(value.is_finite()).then(value)


def numbers_of(cells: pl.Series) -> pl.Series:
    """`number` of each cell of a column at once: a plain cast when every cell parses as it stands
    (profilers write bare numbers), else the stripped cast; inf and nan → null. (One cast instead
    of a strip, a cast and a select per row: a third of what `number` costs in a query.)"""
    import polars as pl

    values = cells.cast(pl.Float64, strict=False)
    if values.null_count() != cells.null_count():  # a cell that needs stripping, or garbage
        values = cells.str.strip_chars().cast(pl.Float64, strict=False)
    if not values.is_finite().all():
        values = values.to_frame().select(pl.when(pl.first().is_finite()).then(pl.first())).to_series()
    return values


def first_present(header: Sequence[str], names: Sequence[str]) -> str | None:
    """The first of ``names`` that is a column of ``header`` (upstream's column fallbacks)."""
    present = set(header)
    for name in names:
        if name in present:
            return name
    return None


#: Builds one chunk's queries from its rows (a LazyFrame of `ROW` and the wanted columns); runs
#: in a parsing thread, `PARSERS` chunks at once.
Queries = Callable[["pl.LazyFrame"], list["pl.LazyFrame"]]


def aggregate_chunks(path: Path, report: CsvReadReport, columns: Sequence[str], queries: Queries, *,
                     root: Path | None = None, required: Sequence[str] = (),
                     any_of: Sequence[Sequence[str]] = (),
                     numbers: Sequence[str] = ()) -> Iterator[list[pl.DataFrame]]:
    """Run ``queries`` on each chunk of ``path``'s data rows; yield each chunk's results.

    The rows hold `ROW` and each of ``columns`` that the header has, as the raw cells (strings,
    null when empty; read them with `text` and `number`; for a repeated name, its first column).
    `ROW` counts from the chunk's first row; a `ROW` column in a result is then offset to count
    from the file's (so aggregate it with min, max or first; do not compare it with a number).
    Those also in ``numbers`` arrive as `number` reads them (Float64, finite or null), converted
    once per chunk (see `numbers_of`): cheaper than `number` in a query for a column every row needs.
    ``report.header`` is set before ``queries`` first runs. ``root``: the folder the file must stay
    inside (default: its workspace, see `owning_workspace`; a final symbolic link is never followed).
    ``required`` columns must all be present; each group in ``any_of`` needs one. Problems go to
    ``report``; a chunk without rows yields nothing.
    """
    path = Path(path)
    root = owning_workspace(path) if root is None else root
    try:
        handle = open_workspace_file(path, root)
    except UnreadableFile as exc:
        problem = exc.problem
        named = problem.file == shown(path, root)
        report.problems.append(Problem(str(path), problem.message, problem.line, problem.severity) if named else problem)
        return
    with handle:
        yield from _chunks(handle, report, columns, queries, required, any_of, numbers)


def read_table(path: Path, report: CsvReadReport, columns: Sequence[str], *, root: Path | None = None,
               required: Sequence[str] = (), any_of: Sequence[Sequence[str]] = ()) -> pl.DataFrame | None:
    """The whole (small) file as one DataFrame of `ROW` and the cells as `text`; None when it has
    no usable header (the problem is in ``report``)."""
    import polars as pl

    def cleaned(rows: pl.LazyFrame) -> list[pl.LazyFrame]:
        return [rows.select(pl.col(ROW), *(text(c).alias(c) for c in dict.fromkeys(columns) if c in report.header))]

    parts = [found for found, in aggregate_chunks(path, report, columns, cleaned, root=root, required=required,
                                                  any_of=any_of)]
    if parts:
        return pl.concat(parts)
    present = set(report.header)
    if not present or not all(c in present for c in required) or not all(
            any(c in present for c in group) for group in any_of):
        return None
    return pl.DataFrame(schema={ROW: pl.UInt32} | {c: pl.String for c in dict.fromkeys(columns) if c in present})


def _chunks(handle: io.BufferedReader, report: CsvReadReport, columns: Sequence[str], queries: Queries,
            required: Sequence[str], any_of: Sequence[Sequence[str]],
            numbers: Sequence[str] = ()) -> Iterator[list[pl.DataFrame]]:
    import polars as pl

    pending = _read_header(handle, report, required, any_of)
    if pending is None:
        return
    header = report.header
    # polars gets each chunk under a header of unique names c0..cN-1 (the real one may repeat a name)
    synthetic = ",".join(f"c{i}" for i in range(len(header))).encode() + b"\n"
    index: dict[str, int] = {}
    for name in columns:
        if name in header and name not in index:
            index[name] = header.index(name)
    last = f"c{len(header) - 1}"
    wanted = sorted({f"c{i}" for i in index.values()} | {last}, key=lambda c: int(c[1:]))
    numeric = [f"c{index[name]}" for name in dict.fromkeys(numbers) if name in index]
    named = [pl.col(ROW), *(pl.col(f"c{i}").alias(name) for name, i in index.items())]

    def run(frame: pl.DataFrame) -> list[pl.DataFrame]:
        return pl.collect_all(queries(frame.lazy().select(named)))

    # one thread reads and checks the blocks and hands `PARSERS` at a time to polars, to be parsed
    # and queried (polars and the reads release the GIL); this one offsets the results' rows
    found = _ahead(_frames(_checked(_blocks(handle, pending, report, synthetic)), report, synthetic, wanted,
                           numeric, run), "helix-csv-read")
    try:
        with contextlib.closing(found):
            for results, first_row in found:
                yield [part.with_columns(pl.col(ROW) + first_row) if ROW in part.columns else part
                       for part in results]
    except OSError as exc:  # the disk, not the content
        report.problem(f"cannot be read ({exc.strerror or exc}); make it a readable regular file")


@dataclass
class _Parsed:
    """One block as a parsing thread leaves it."""

    height: int  # the rows polars read, short ones included
    found: list[pl.DataFrame] | None  # the queries' results (`ROW` from the block's first row)
    suspects: pl.DataFrame | None = None  # instead: rows the csv module must check first


def _read_block(data: bytes, wanted: list[str], numeric: Sequence[str],
                run: Callable[[pl.DataFrame], list[pl.DataFrame]]) -> _Parsed:
    """polars' parse of one block: `ROW` (from 0 in the block) and the ``wanted`` columns as
    strings, those in ``numeric`` then as `numbers_of` reads them; then ``run`` (the queries) on
    them, unless a row's last cell is empty (the last of ``wanted`` is the header's last column:
    such a row may be short, i.e. truncated, or blank, so the rows are returned to be checked)."""
    import polars as pl

    try:
        frame = pl.read_csv(data, columns=wanted, infer_schema=False, truncate_ragged_lines=True,
                            row_index_name=ROW)
    except (pl.exceptions.PolarsError, OverflowError) as exc:
        raise _Unparsable(str(exc)) from None
    suspects = frame.get_column(wanted[-1]).null_count() > 0
    if numeric:
        frame = frame.with_columns(numbers_of(frame.get_column(c)) for c in numeric)
    if suspects:
        return _Parsed(frame.height, None, frame)
    return _Parsed(frame.height, run(frame) if frame.height else None)


def _frames(blocks: Iterator[tuple[bytes, str | None]], report: CsvReadReport, synthetic: bytes, wanted: list[str],
            numeric: Sequence[str], run: Callable[[pl.DataFrame], list[pl.DataFrame]],
            ) -> Iterator[tuple[list[pl.DataFrame], int]]:
    """The queries' results on each block's rows (see `_read_block`; short rows dropped), with the
    number of data rows before the block (its rows' `ROW` counts from 0). `PARSERS` blocks are
    parsed and queried at once, in a pool; at most `PARSERS` + 1 are held while the next is read
    (fewer than the `BUFFERS` that `_blocks` reuses in turn).

    A block that polars cannot parse and that holds an odd number of quotes ends inside a quoted
    cell spanning lines: it is parsed together with the next block. A quote that never closes
    is a problem after the whole lines before it are counted."""
    from concurrent.futures import Future, ThreadPoolExecutor


    prefix, width = len(synthetic), int(wanted[-1][1:]) + 1
    first_row = 0  # rows parsed so far: a row's line is ROW + 2 (no profiler cell spans lines)

    def parse(data: bytes, started: Future[_Parsed] | None = None) -> tuple[int, list[pl.DataFrame] | None]:
        """(rows parsed, the queries' results; None when the chunk's rows were all dropped)."""
        parsed = _read_block(data, wanted, numeric, run) if started is None else started.result()
        if parsed.suspects is None:
            report.rows += parsed.height
            return parsed.height, parsed.found
        keep = _drop_short_rows(parsed.suspects, memoryview(data)[prefix:], width, first_row + 2, report)
        if keep is None:
            raise _Stop
        report.rows += keep.height
        return parsed.height, run(keep) if keep.height else None

    def in_parallel(pool: ThreadPoolExecutor) -> Iterator[tuple[bytes, str | None, Future | None]]:
        """The blocks in order, each with its parse started, up to `PARSERS` blocks ahead."""
        started: collections.deque[tuple[bytes, str | None, Future | None]] = collections.deque()
        for data, damage in blocks:
            started.append((data, damage, pool.submit(_read_block, data, wanted, numeric, run)
                            if len(data) > prefix else None))
            del data
            if len(started) > PARSERS:
                yield started.popleft()
        while started:
            yield started.popleft()

    carry = b""  # a block that ends inside a quoted cell spanning lines, to parse with the next one
    pool = ThreadPoolExecutor(PARSERS, thread_name_prefix="helix-csv-parse")
    try:
        for data, damage, started in in_parallel(pool):  # no block is held once the next is asked for
            if carry:
                data, carry, started = b"".join((synthetic, carry, memoryview(data)[prefix:])), b"", None
            parsed = None
            if len(data) > prefix:
                try:
                    parsed = parse(data, started)
                except _Unparsable as exc:  # a query's error is not the file's: it is raised
                    if damage is None and data.count(b'"') % 2:
                        carry = data[prefix:]
                        del data
                        if len(carry) < MAX_LINE_BYTES:
                            continue
                        break
                    report.problem(f"is not a readable CSV file ({str(exc).splitlines()[0][:200]}); re-run "
                                   "the profiler", line=first_row + 2)
                    return
            del data
            if parsed is not None:
                height, found = parsed
                if found is not None:
                    yield found, first_row
                first_row += height
            if damage is not None:
                report.problem(damage, line=first_row + 2)
                return
        if carry:  # the quote never closes: count the whole lines before it, then say so
            whole = _balanced_prefix(carry)
            if whole:
                with contextlib.suppress(_Unparsable):
                    height, found = parse(synthetic + carry[:whole])
                    if found is not None:
                        yield found, first_row
                    first_row += height
            report.problem("is not a readable CSV file (a quoted cell never ends); re-run the profiler",
                           line=first_row + 2)
    except _Stop:
        return
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if report.skipped_rows > 3:
        report.problem(f"{report.skipped_rows} short rows were skipped in total", severity="warning")


class _Stop(Exception):
    """The careful path found a chunk it cannot read (the problem is in the report)."""


class _Unparsable(Exception):
    """polars cannot parse a block (its message is polars')."""


def _balanced_prefix(data: bytes) -> int:
    """The length of the longest run of whole lines at the start of ``data`` that holds an even
    number of quotes (where a quote that never closes begins)."""
    best = start = quotes = 0
    while (end := data.find(b"\n", start)) >= 0:
        quotes += data.count(b'"', start, end)
        start = end + 1
        if quotes % 2 == 0:
            best = start
    return best


def _blocks(handle: io.BufferedReader, pending: bytes, report: CsvReadReport, prefix: bytes) -> Iterator[bytes]:
    """The rest of the file in blocks of whole lines, about `CHUNK_BYTES` each, each after
    ``prefix``, read into reused buffers that polars parses in place: each block is its buffer's
    own bytes (`io.BytesIO.getvalue` shares them), reused `BUFFERS` blocks later (a block still
    held then is copied by that write, never changed). A block may end inside a quoted cell that
    spans lines; `_frames` then joins it to the next (counting quotes here would cost a pass over
    every block for what profilers never write)."""
    ring = [io.BytesIO() for _ in range(BUFFERS)]
    for buffer in ring:
        buffer.write(prefix)
    for turn in itertools.count():
        buffer = ring[turn % BUFFERS]
        buffer.seek(len(prefix))
        buffer.write(pending)  # the start of a line the last block cut
        start = buffer.tell()
        buffer.seek(start + CHUNK_BYTES - 1)
        buffer.write(b"\0")  # room for the next read
        with buffer.getbuffer() as view:
            size = handle.readinto(view[start:start + CHUNK_BYTES])
        buffer.truncate(start + size)
        if not size:
            if pending:
                yield buffer.getvalue()
            return
        block = buffer.getvalue()
        cut = block.rfind(b"\n", start) + 1
        if not cut:
            pending = block[len(prefix):]
            if len(pending) > MAX_LINE_BYTES:
                report.problem(f"has a line over {MAX_LINE_BYTES >> 20} MB (not a profiler row); re-run the "
                               "profiler")
                return
            continue
        pending = block[cut:]
        del block  # unshared, so that the truncation below does not copy the buffer
        buffer.truncate(cut)
        yield buffer.getvalue()
    raise AssertionError("unreachable")  # itertools.count() never ends


def _read_header(handle: io.BufferedReader, report: CsvReadReport, required: Sequence[str],
                 any_of: Sequence[Sequence[str]]) -> bytes | None:
    """Read and check the header line; return the bytes read past it (None: stop, see report)."""
    buf = b""
    while (end := buf.find(b"\n")) < 0:
        more = handle.read(min(1 << 16, CHUNK_BYTES))
        if not more:
            end = len(buf)
            break
        buf += more
        if len(buf) > MAX_LINE_BYTES:
            report.problem("has no header line (its first line never ends); re-run the profiler", line=1)
            return None
    if not buf:
        report.problem("is empty (no header line); re-run the profiler to regenerate it")
        return None
    raw = buf[:end]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        report.problem(_BAD_TEXT, line=1)
        return None
    report.header = [clean_cell(c) for c in next(csv.reader([text]), [])]
    present = set(report.header)
    missing = [c for c in required if c not in present]
    missing += [" or ".join(group) for group in any_of if not any(c in present for c in group)]
    if missing:
        report.problem(f"lacks the column(s) {', '.join(missing)}; it is not the profiler file helix expected "
                       "(or it is damaged): re-run the profiler", line=1)
        return None
    return buf[end + 1:]


def _checked(blocks: Iterator[bytes]) -> Iterator[tuple[bytes, str | None]]:
    """Each block as `_good_prefix` leaves it, in the reading thread (a block is not held once
    the next is asked for)."""
    for block in blocks:
        checked = _good_prefix(block)
        del block
        yield checked
        del checked


def _good_prefix(block: bytes) -> tuple[bytes, str | None]:
    """The whole lines of ``block`` before its first undecodable byte, and what that damage is
    (None when there is none)."""
    if block.isascii():
        return block, None
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as exc:
        return block[:block.rfind(b"\n", 0, exc.start) + 1], _BAD_TEXT
    return block, None


def _drop_short_rows(frame: pl.DataFrame, block: memoryview, width: int, line: int,
                     report: CsvReadReport) -> pl.DataFrame | None:
    """Rows whose last cell is empty may be short (truncated) or blank lines: re-read this chunk
    with the csv module to count their cells, drop short and blank rows (a warning for each of
    the first three short ones, with its line). Most chunks have no such row and skip this."""
    import polars as pl

    csv.field_size_limit(MAX_LINE_BYTES)
    reader = csv.reader(io.StringIO(bytes(block).decode("utf-8"), newline=""))
    keep: list[bool] = []
    try:
        for cells in reader:
            short = 0 < len(cells) < width
            if short:
                report.skipped_rows += 1
                if report.skipped_rows <= 3:
                    report.problem(f"row has {len(cells)} of {width} cells (truncated file?); the row was skipped",
                                   line=line + reader.line_num - 1, severity="warning")
            keep.append(bool(cells) and not short)
    except csv.Error as exc:
        report.problem(f"is not a readable CSV file ({exc}); re-run the profiler", line=line + reader.line_num - 1)
        return None
    if len(keep) != frame.height:
        report.problem("is not a readable CSV file (its quoting is broken); re-run the profiler", line=line)
        return None
    return frame.filter(pl.Series(keep, dtype=pl.Boolean))


def _ahead(items: Iterator[T], name: str) -> Generator[T, None, None]:
    """``items``, produced one ahead in a thread named ``name`` (closed there when it stops); no
    reference to an item is kept once the next is asked for (`_blocks` reuses its buffers)."""
    import queue
    import threading

    box: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        box.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                del item
                if stop.is_set():
                    return
            box.put((done, None))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            box.put((done, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item, error = box.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
            del item
    finally:
        stop.set()
        thread.join()
