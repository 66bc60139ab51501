"""Names and paths of the workspace contract (no I/O beyond listing folders).

A workspace W holds one operator ``<op>.py`` plus its harnesses, ``baseline/`` and
``opt-round-N/`` folders (N ≥ 1, no leading zeros), ``opt-note.md``, ``learned_lessons.md`` and
``.helix/``.
"""

from __future__ import annotations

import errno
import functools
import operator
import os
import re
import stat
from pathlib import Path

from helix_engine.sanitize import clean_name
from helix_engine.workspace.models import Problem

NON_OPERATOR_PREFIXES: tuple[str, ...] = ("test_", "differential_test_", "bench_", "opt_")
ROUND_PREFIX = "opt-round-"
_ROUND_RE = re.compile(r"^opt-round-([1-9][0-9]*)$")
BASELINE_DIR = "baseline"
HELIX_DIR = ".helix"
OPT_NOTE = "opt-note.md"
LEARNED_LESSONS = "learned_lessons.md"
ATTEMPTS = "attempts.md"
SUMMARY = "summary.md"
PERF_ANALYSIS = "perf-analysis.md"
ROUND_STATE = "round-state.json"
BASELINE_STATE = "state.json"
WORKFLOW_STATE = "state.json"  # inside .helix/
JOBS_DIR = "jobs"  # inside .helix/
ROUND_TIMINGS_DIR = "round-timings"  # inside .helix/
CACHE_DIR = "cache"  # inside .helix/: derived data (summaries, intervals, stored status), safe to delete


_NAME = operator.attrgetter("name")
_CHILD = getattr(Path, "_make_child_relpath", None)  # pathlib's own, for a name it already split


def child(folder: Path, name: str) -> Path:
    """``folder / name`` for one plain name (no ``/``, not ``.`` or ``..``), without pathlib
    parsing it again: a 1000-round load makes ~3000 such paths (~2.5 us each through ``/``).
    Where pathlib has no such helper, or the name is not plain, it is ``folder / name``."""
    if _CHILD is not None and name and "/" not in name and name not in (".", "..") and "\0" not in name:
        found: Path = _CHILD(folder, name)
        return found
    return folder / name


@functools.lru_cache(maxsize=8192)
def round_number(name: str) -> int | None:
    """``opt-round-12`` → 12; anything else (``opt-round-0``, ``-007``, ``-x``) → None. Kept per
    name: a reload lists every round folder again (a dict lookup instead of a regex match)."""
    match = _ROUND_RE.match(name)
    return int(match.group(1)) if match else None


def round_dir_name(n: int) -> str:
    return f"{ROUND_PREFIX}{n}"


def round_label(n: int) -> str:
    """How upstream names a round in reports: ``round-N``."""
    return f"round-{n}"


def parse_round_ref(text: str | None) -> int | None:
    """Parse ``round-3``, ``round 3``, ``opt-round-3`` or ``3`` (case-insensitive) → 3."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(?:opt[-_ ]?)?(?:round[-_ ]?)?\s*([0-9]+)\s*", str(text), re.IGNORECASE)
    if not match:
        return None
    value = int(match.group(1))
    return value if value >= 1 else None


def is_operator_name(name: str) -> bool:
    return (
        name.endswith(".py")
        and name != "__init__.py"
        and not name.startswith(NON_OPERATOR_PREFIXES)
    )


def discover_operator(workspace: Path, entries: list[os.DirEntry[str]] | None = None,
                      ) -> tuple[Path | None, list[Problem]]:
    """Find the single operator ``.py`` at the top of the workspace. ``entries``: its listing
    (``listing``), when the caller has it (a load lists the top folder once)."""
    try:  # the name filter first: a 2000-round workspace has 2000 folders and a few files
        found = _entries(workspace) if entries is None else entries
        names = sorted(e.name for e in found if is_operator_name(e.name) and _is_file(e))
    except OSError as exc:
        return None, [Problem(file=".", message=f"cannot list the workspace ({exc.strerror or exc})")]
    candidates = names
    if len(candidates) == 1:
        return Path(workspace) / candidates[0], []
    if not candidates:
        return None, [
            Problem(
                file=".",
                severity="warning",
                message="no operator file found: put exactly one <op>.py (not test_/bench_/opt_) "
                "at the top of the workspace",
            )
        ]
    return None, [
        Problem(
            file=".",
            message="several operator candidates (" + ", ".join(map(clean_name, candidates)) + "); keep exactly one "
            "operator .py at the top of the workspace",
        )
    ]


def list_round_dirs(workspace: Path, known: dict[int, Path] | None = None,
                    listed: list[os.DirEntry[str]] | None = None) -> tuple[dict[int, Path], list[Problem]]:
    """Every valid ``opt-round-N`` folder by number, and problems for look-alikes. ``known``: the
    paths a previous listing of this folder returned, reused for the same names (a reload lists
    every round folder again). ``listed``: the folder's listing (``listing``), when the caller has it."""
    rounds: dict[int, Path] = {}
    problems: list[Problem] = []
    try:
        found_entries = _entries(workspace) if listed is None else listed
        entries = sorted((e for e in found_entries if e.name.startswith(ROUND_PREFIX)), key=_NAME)
    except OSError as exc:
        return {}, [Problem(file=".", message=f"cannot list the workspace ({exc.strerror or exc})")]
    base = Path(workspace)
    known = known or {}
    for found in entries:
        name = found.name
        n = round_number(name)
        if n is None:
            problems.append(
                Problem(
                    file=clean_name(name),
                    severity="warning",
                    message="is not a round folder name: rounds are opt-round-N with N ≥ 1 and no "
                    "leading zeros (rename it, or move it out of the workspace)",
                )
            )
            continue
        # a round number has one folder name (no leading zeros), so a known path for n is this
        # name's: reused, not joined again (~3 µs a Path, every round folder on every reload)
        entry = known.get(n) or child(base, name)
        if _plain_dir(found):  # a real folder, no link: nothing to check (no system call either)
            rounds[n] = entry
            continue
        problem = _round_folder_problem(workspace, entry)
        if problem is not None:
            problems.append(problem)
            continue
        rounds[n] = entry
    return rounds, problems


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    """A folder's entries, each with the type the listing already knows (no stat per entry)."""
    with os.scandir(folder) as it:
        return list(it)


def listing(folder: Path) -> list[os.DirEntry[str]] | None:
    """The workspace folder's entries, listed once for ``discover_operator``, ``list_round_dirs``
    and the top-level perf files (each listed it again: ~1 ms each at 1000 rounds); None when it
    cannot be listed (each then says why itself)."""
    try:
        return _entries(folder)
    except OSError:
        return None


def _is_file(entry: os.DirEntry[str]) -> bool:
    """``Path.is_file`` of the entry: links followed; a missing or looping target is no file,
    any other error is raised as it was."""
    try:
        return entry.is_file()
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise


def _plain_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _round_folder_problem(workspace: Path, entry: Path) -> Problem | None:
    """Why ``entry`` cannot be read as a round folder (a link out of the workspace or in a loop,
    a file, a FIFO …), or None. A link to a folder inside the workspace is fine."""
    from helix_engine.workspace.reading import file_kind, link_problem

    try:
        if entry.is_symlink():
            linked = link_problem(entry, Path(workspace))
            if linked is not None:
                return linked
        if entry.is_dir():
            return None
        mode = entry.lstat().st_mode
    except OSError as exc:
        return Problem(file=clean_name(entry.name), message=f"cannot be read ({exc.strerror or exc})")
    if stat.S_ISLNK(mode):
        what = "is a symbolic link to nothing"
    elif stat.S_ISREG(mode):
        what = "is a file"
    else:
        what = f"is {file_kind(mode)}"
    return Problem(file=clean_name(entry.name), message=f"{what}, expected a round folder")


def operator_stem(operator_file: Path) -> str:
    return Path(operator_file).stem


def baseline_dir(workspace: Path) -> Path:
    return Path(workspace) / BASELINE_DIR


def baseline_perf_name(op_stem: str) -> str:
    return f"{op_stem}_perf.txt"


def round_operator_name(op_stem: str) -> str:
    return f"opt_{op_stem}.py"


def round_perf_name(op_stem: str) -> str:
    return f"opt_{op_stem}_perf.txt"


def perf_path_for(operator_file: Path) -> Path:
    """The perf file run-bench writes beside an operator: ``<stem>_perf.txt``."""
    operator_file = Path(operator_file)
    return operator_file.with_name(f"{operator_file.stem}_perf.txt")


def result_path_for(operator_file: Path) -> Path:
    """The differential result archive beside an operator: ``<stem>_result.pt``."""
    operator_file = Path(operator_file)
    return operator_file.with_name(f"{operator_file.stem}_result.pt")


def workspace_of(operator_file: Path) -> Path:
    """The workspace that owns an operator file: its folder, or that folder's parent when the
    folder is ``baseline/`` or ``opt-round-N/``."""
    folder = Path(operator_file).resolve().parent
    if folder.name == BASELINE_DIR or round_number(folder.name) is not None:
        return folder.parent
    return folder


def harness_files(workspace: Path, op_stem: str) -> dict[str, Path | None]:
    """The test and bench harnesses for an operator, when present."""
    workspace = Path(workspace)
    found: dict[str, Path | None] = {}
    for key, name in (
        ("test", f"test_{op_stem}.py"),
        ("differential_test", f"differential_test_{op_stem}.py"),
        ("bench", f"bench_{op_stem}.py"),
    ):
        path = workspace / name
        found[key] = path if path.is_file() else None
    return found


def looks_like_workspace(path: Path) -> bool:
    """Upstream's rule for treating a folder as one workspace (vs. a folder of workspaces)."""
    path = Path(path)
    base = path / BASELINE_DIR
    if (base / "perf.txt").is_file() or any(base.glob("*_perf.txt")):
        return True
    if (path / OPT_NOTE).is_file():
        return True
    try:
        for entry in path.iterdir():
            if entry.is_dir() and round_number(entry.name) is not None:
                return True
            if entry.is_file() and entry.name.endswith("_perf.txt"):
                return True
    except OSError:
        return False
    return False
