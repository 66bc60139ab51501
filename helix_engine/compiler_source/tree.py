"""A compiler checkout seen read-only: walked once, classified into search areas, read safely.

Why this shape: a real checkout holds ~10k files and the agent asks it several questions a round,
so one walk collects every searchable file and each question only reads text. The checkout is
someone else's tree: helix never writes into it, never runs anything from it, follows no
symbolic link (a link to ``/etc`` or to a FIFO is skipped, and every read is checked to have
opened a regular file inside the root), and caps what it reads (file size, file count, depth),
saying so when a cap cut the walk short.

Areas follow upstream's reading order (docs → lib → include → test) over three layouts:
- AscendNPU-IR: ``docs/source/{en,zh_cn}/developer_guide/{passes,features}``,
  ``bishengir/lib/{Conversion,Dialect,Transforms}``, ``bishengir/include``, ``bishengir/test``;
- triton-ascend and triton: ``lib/{Dialect,Conversion,...}``, ``include``, ``python/src``,
  ``python/triton/backends``, ``third_party/*/{lib,include,backend}``, ``test``;
- an installed triton package (``site-packages/triton``): ``backends/*``, ``compiler``.
Other folders (tools, benchmarks, other docs) are not searched.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from helix_engine.errors import HelixError
from helix_engine.workspace.reading import decode_text, read_bytes_safe

AREAS: tuple[str, ...] = ("docs", "lib", "include", "test")
#: Area bonus of upstream's score (docs are read first, then the implementation).
AREA_BONUS: dict[str, int] = {"docs": 2, "lib": 1, "include": 0, "test": 0}
TEXT_SUFFIXES = frozenset({".td", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inc", ".def", ".py", ".pyi",
                           ".md", ".rst", ".mlir", ".txt"})
DOC_SUFFIXES = frozenset({".md", ".rst"})
#: Folders never entered: version control, build output, caches, environments.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", "dist", ".tox", ".venv", "venv",
                       "_build", ".cache", ".mypy_cache", ".pytest_cache", "site-packages"})
_BUILD_DIR = re.compile(r"^(?:build|cmake-build)(?:[-_.].*)?$", re.IGNORECASE)
LIB_DIRS = frozenset({"lib", "src", "backends", "backend", "compiler", "conversion", "dialect", "transforms"})
TEST_DIRS = frozenset({"test", "tests", "unittest", "unittests"})
DOC_LANGS = frozenset({"en", "zh_cn"})
DOC_KINDS = frozenset({"passes", "features"})

MAX_FILE_BYTES = 1 << 20  # a larger source file is generated or vendored; skipped and counted
MAX_FILES = 40_000  # searchable files kept from one walk
MAX_ENTRIES = 400_000  # directory entries looked at, searchable or not
MAX_DEPTH = 32


@dataclass(frozen=True)
class SourceFile:
    """One searchable file: its path relative to the root (posix) and its area."""

    rel: str
    area: str
    size: int


@dataclass
class SourceTree:
    """The searchable files of one checkout and what the walk skipped (reported, never silent)."""

    root: Path
    files: list[SourceFile] = field(default_factory=list)
    skipped_links: int = 0
    skipped_large: int = 0
    skipped_other: int = 0
    truncated: str | None = None

    def path(self, rel: str) -> Path:
        return self.root / rel

    def read(self, rel: str) -> str | None:
        """The file's text, or None (gone, a link now, over the cap, binary): never raises."""
        data, problem = read_bytes_safe(self.root / rel, self.root, max_bytes=MAX_FILE_BYTES)
        if problem is not None or data is None:
            return None
        text, problem = decode_text(data, rel)
        if problem is not None:
            return None if b"\x00" in data else data.decode("utf-8", errors="replace")
        return text

    def by_area(self, area: str) -> list[SourceFile]:
        return [f for f in self.files if f.area == area]

    def summary(self) -> dict[str, object]:
        counts = {a: 0 for a in AREAS}
        for f in self.files:
            counts[f.area] += 1
        return {"files": len(self.files), "by_area": counts, "skipped_links": self.skipped_links,
                "skipped_large": self.skipped_large, "skipped_other": self.skipped_other, "truncated": self.truncated}


def check_root(source_root: Path | str | None) -> Path:
    """The checkout's real path (the user named it, so a link to it is followed once), or a sentence."""
    if source_root is None or not str(source_root).strip():
        raise HelixError("no compiler checkout given; pass --source-root DIR (an AscendNPU-IR, triton-ascend or "
                         "triton checkout, or an installed triton package) or set HELIX_COMPILER_SOURCE.")
    root = Path(os.path.expanduser(str(source_root)))
    if not root.is_dir():
        raise HelixError(f"compiler source root {root} is not a folder; pass --source-root DIR of a checkout.")
    return root.resolve()


def area_of(parts: tuple[str, ...]) -> str | None:
    """The search area of a file from its folder names (``parts`` excludes the file name)."""
    low = tuple(p.lower() for p in parts)
    if low[:1] == ("docs",):
        if (len(low) >= 5 and low[1] == "source" and low[2] in DOC_LANGS and low[3] == "developer_guide"
                and low[4] in DOC_KINDS):
            return "docs"
        return None
    if any(p in TEST_DIRS for p in low):
        return "test"
    if "include" in low:
        return "include"
    if any(p in LIB_DIRS for p in low):
        return "lib"
    return None


def _skip_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".") or bool(_BUILD_DIR.match(name))


def walk(source_root: Path | str | None) -> SourceTree:
    """Walk the checkout once (sorted, depth-first; no link followed) and keep the searchable files."""
    root = check_root(source_root)
    tree = SourceTree(root=root)
    entries = 0
    stack: list[tuple[str, tuple[str, ...]]] = [(str(root), ())]
    while stack:
        folder, parts = stack.pop()
        try:
            with os.scandir(folder) as it:
                listing = sorted(it, key=lambda e: e.name)
        except OSError:
            tree.skipped_other += 1
            continue
        subdirs: list[tuple[str, tuple[str, ...]]] = []
        for entry in listing:
            entries += 1
            if entries > MAX_ENTRIES or len(tree.files) >= MAX_FILES:
                tree.truncated = (f"the walk stopped after {min(entries, MAX_ENTRIES)} entries / {len(tree.files)} "
                                  "files; point --source-root at a smaller folder of the checkout")
                return _ordered(tree)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                tree.skipped_other += 1
                continue
            if stat.S_ISLNK(st.st_mode):
                tree.skipped_links += 1
                continue
            if stat.S_ISDIR(st.st_mode):
                if not _skip_dir(entry.name) and len(parts) < MAX_DEPTH:
                    subdirs.append((entry.path, (*parts, entry.name)))
                continue
            if not stat.S_ISREG(st.st_mode):
                tree.skipped_other += 1  # FIFOs, sockets, devices: never opened
                continue
            suffix = os.path.splitext(entry.name)[1].lower()
            if suffix not in TEXT_SUFFIXES:
                continue
            area = area_of(parts)
            if area is None or (area == "docs" and suffix not in DOC_SUFFIXES):
                continue
            if st.st_size > MAX_FILE_BYTES:
                tree.skipped_large += 1
                continue
            tree.files.append(SourceFile(rel="/".join((*parts, entry.name)), area=area, size=st.st_size))
        stack.extend(reversed(subdirs))
    return _ordered(tree)


def _ordered(tree: SourceTree) -> SourceTree:
    tree.files.sort(key=lambda f: (AREAS.index(f.area), f.rel))
    return tree


_HEX40 = re.compile(rb"^[0-9a-f]{40}$")


def checkout_commit(root: Path) -> str | None:
    """The checked-out commit, read from ``.git`` files (never by running git); None when unknown."""
    git = root / ".git"
    head = _small(git / "HEAD", root)
    if head is None:
        return None
    if _HEX40.match(head):
        return head.decode()
    if not head.startswith(b"ref: "):
        return None
    ref = head[5:].decode("utf-8", errors="replace")
    if ".." in ref or ref.startswith("/"):
        return None
    value = _small(git / ref, root)
    if value is not None and _HEX40.match(value):
        return value.decode()
    packed = _small(git / "packed-refs", root, cap=4 << 20) or b""
    for line in packed.splitlines():
        sha, _, name = line.partition(b" ")
        if name.decode("utf-8", errors="replace") == ref and _HEX40.match(sha):
            return sha.decode()
    return None


def _small(path: Path, root: Path, cap: int = 4096) -> bytes | None:
    data, problem = read_bytes_safe(path, root, max_bytes=cap)
    return None if problem is not None or data is None else data.strip()
