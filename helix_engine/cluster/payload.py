"""What a cluster job carries by content: its input files, where its outputs go, and back.

Why by content: the workspace need not be on storage the nodes share. A worker request names
files by path (operator, harness, reference operator, reference archive, …); ``pack`` reads
them here (through the safe reader) with the other ``.py`` files of their folders (a harness
folder is on the child's ``sys.path``, so it may import a helper beside it) and gives each a
relative name. On the node ``materialize`` writes them under a temporary root and points the
request there; after the job ``collect`` reads the outputs the request named (an archive, a
profile or IR folder) and ``deliver`` writes them at their paths on this machine.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.workspace.reading import read_bytes_safe

#: Request keys that name a file the worker reads.
INPUT_KEYS: tuple[str, ...] = (
    "operator_file", "bench_file", "test_file", "ref_operator_file", "reference_operator_file",
    "baseline_operator_file", "ref_archive", "launches_file",
)
#: Request keys that name a file / a folder the worker writes (brought back after the job).
OUTPUT_FILE_KEYS: tuple[str, ...] = ("archive_path", "launches_file")
OUTPUT_DIR_KEYS: tuple[str, ...] = ("run_dir", "ir_dir")
MAX_INPUT_BYTES = 1 << 30  # a reference archive may be large; more than this is a mistake
MAX_OUTPUT_BYTES = 2 << 30
MAX_SIBLINGS = 200  # .py files carried from one folder


@dataclass
class Parcel:
    """One job's files and the request keys that name them (picklable: it travels to the node)."""

    files: dict[str, bytes] = field(default_factory=dict)  # relative name → content
    paths: dict[str, str] = field(default_factory=dict)  # request key → relative name
    outputs: dict[str, str] = field(default_factory=dict)  # request key → "file" | "dir"
    cwd: str = "."
    local: dict[str, str] = field(default_factory=dict)  # relative name → path here (stays here)

    def to_node(self) -> Parcel:
        """The parcel without this machine's paths (the node needs none of them)."""
        return Parcel(dict(self.files), dict(self.paths), dict(self.outputs), self.cwd, {})


def _names(ws: Path) -> Any:
    """A function giving each local path one relative name: ``ws/<path in workspace>`` or
    ``ext/<n>/<name>`` for a path outside it (one ``ext/<n>`` per outside folder)."""
    root = Path(os.path.abspath(ws))
    outside: dict[str, str] = {}

    def name(path: Path, *, folder: bool = False) -> str:
        path = Path(os.path.abspath(path))
        try:
            rel = path.relative_to(root)
            return str(PurePosixPath("ws", *rel.parts)) if rel.parts else "ws"
        except ValueError:
            base = path if folder else path.parent
            slot = outside.setdefault(str(base), f"ext/{len(outside)}")
            return slot if folder else f"{slot}/{path.name}"

    return name


def pack(request: dict[str, Any], cwd: Path, ws: Path) -> Parcel:
    """The parcel of ``request`` (run in workspace ``ws`` from folder ``cwd``)."""
    name = _names(ws)
    parcel = Parcel(cwd=name(Path(cwd), folder=True))
    total = 0
    folders: dict[Path, None] = {}

    def carry(path: Path, within: Path | None) -> None:
        nonlocal total
        rel = name(path)
        if rel in parcel.files:
            return
        data, problem = read_bytes_safe(path, within, max_bytes=MAX_INPUT_BYTES)
        if data is None:
            raise HelixError(f"cannot send {path} to the cluster: {problem.message if problem else 'unreadable'}")
        total += len(data)
        if total > MAX_INPUT_BYTES:
            raise HelixError(f"the job's files add up to over {MAX_INPUT_BYTES >> 20} MB, more than helix sends "
                             "to a cluster; run it on this machine (without --cluster)")
        parcel.files[rel] = data
        parcel.local[rel] = str(path)

    ws_abs = Path(os.path.abspath(ws))
    for key in INPUT_KEYS:
        value = request.get(key)
        if not value or not Path(value).is_file():
            continue
        path = Path(os.path.abspath(value))
        within = ws_abs if _inside(path, ws_abs) else None
        carry(path, within)
        parcel.paths[key] = name(path)
        folders.setdefault(path.parent)
    for folder in folders:
        within = ws_abs if _inside(folder, ws_abs) else None
        siblings = sorted(p for p in folder.glob("*.py") if p.is_file() and not p.is_symlink())
        for sibling in siblings[:MAX_SIBLINGS]:
            carry(sibling, within)
    for kind, keys in (("file", OUTPUT_FILE_KEYS), ("dir", OUTPUT_DIR_KEYS)):
        for key in keys:
            value = request.get(key)
            if not value:
                continue
            if key not in parcel.paths:  # an output that is not also an input (launches_file is both)
                parcel.paths[key] = f"out/{key}/{Path(value).name}" if kind == "file" else f"out/{key}"
            parcel.local[parcel.paths[key]] = str(Path(os.path.abspath(value)))
            parcel.outputs[key] = kind
    return parcel


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _under(root: Path, rel: str) -> Path:
    """``root / rel`` for a relative name made by ``pack`` (never an absolute or ``..`` name)."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or any(p in ("..", "") for p in parts):
        raise HelixError(f"the cluster job names the file {rel!r}, which is not a relative name; helix refuses it")
    return root.joinpath(*parts)


def materialize(parcel: Parcel, request: dict[str, Any], root: Path) -> tuple[dict[str, Any], Path]:
    """On the node: write the files under ``root`` and return the request pointing at them, and
    the folder to run in."""
    for rel, data in parcel.files.items():
        target = _under(root, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    request = dict(request)
    for key, rel in parcel.paths.items():
        target = _under(root, rel)
        if parcel.outputs.get(key) == "dir":
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
        request[key] = str(target)
    cwd = _under(root, parcel.cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    return request, cwd


def collect(parcel: Parcel, root: Path) -> dict[str, bytes]:
    """On the node, after the job: the content of every output (relative name → bytes)."""
    found: dict[str, bytes] = {}
    total = 0
    for key, kind in parcel.outputs.items():
        base = _under(root, parcel.paths[key])
        files = [base] if kind == "file" else sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink())
        for path in files:
            if not path.is_file():
                continue
            total += path.stat().st_size
            if total > MAX_OUTPUT_BYTES:
                raise HelixError(f"the job wrote over {MAX_OUTPUT_BYTES >> 20} MB of outputs, more than helix brings "
                                 "back from a cluster; profile or capture one case at a time")
            found[str(PurePosixPath(parcel.paths[key], *path.relative_to(base).parts))] = path.read_bytes()
    return found


def deliver(parcel: Parcel, outputs: dict[str, bytes]) -> list[Path]:
    """Here, after the job: write each output at its path on this machine (atomically)."""
    written: list[Path] = []
    for key, kind in parcel.outputs.items():
        rel_base = parcel.paths[key]
        local_base = Path(parcel.local[rel_base])
        for rel, data in outputs.items():
            if rel != rel_base and not rel.startswith(rel_base + "/"):
                continue
            sub = PurePosixPath(rel).relative_to(rel_base).parts if kind == "dir" else ()
            target = _under(local_base, "/".join(sub)) if sub else local_base
            _write_bytes(target, data)
            written.append(target)
    return written


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def relocate(text: str, parcel: Parcel, node_root: str) -> str:
    """``text`` (a result JSON) with the node's paths replaced by the paths here."""
    pairs = sorted(((f"{node_root}/{rel}", local) for rel, local in parcel.local.items()),
                   key=lambda pair: len(pair[0]), reverse=True)
    for remote, local in pairs:
        text = text.replace(remote, local)
    return text
