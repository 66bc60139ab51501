"""The tools measured side by side, each installed into its own virtual environment.

The upstream tool (`upstream_helix`), from its tarball (an editable install: its code reads data
files from its source tree), to measure it in the same run as helix (never a figure quoted from
somewhere else). The tarball is ``../shared/peers/upstream-helix-76b17cb.tar.gz`` beside the
checkout (set ``HELIX_PEER_TARBALL`` to use another copy). It is unpacked and installed once into
``benchmarks/.peer-venv/`` (ignored by git) and reused while the tarball's hash is unchanged.
Its ``status`` needs no NPU and no dependency on Python < 3.12, so a plain venv suffices; pip
fetches setuptools from PyPI to build it.

Helix itself (`helix_venv`) the way a user installs it: a non-editable ``pip install`` of this
checkout and its runtime dependencies into ``benchmarks/.helix-venv/`` (ignored by git), reused
while the packaged sources are unchanged. The interpreter this script runs under may carry
``.pth`` files a user's venv has not (an editable install's finder, a sandbox's certificate hook):
each ``import site`` runs them, ~0.03 s a process on the box that found it.

Both installs hold compiled bytecode (pip compiles what it installs; the upstream source tree is
compiled here): with ``PYTHONDONTWRITEBYTECODE`` set, as on some CI boxes, a tree without
``__pycache__`` is compiled again by every process (~0.2 s for upstream's ``status``), which no
user's second run pays.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAME = "upstream-helix-76b17cb"
HOME = REPO / "benchmarks" / ".peer-venv"


def tarball() -> Path:
    return Path(os.environ.get("HELIX_PEER_TARBALL") or REPO.parent / "shared" / "peers" / f"{NAME}.tar.gz")


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def upstream_helix(home: Path = HOME) -> Path:
    """The upstream ``helix`` console script, installing it first when needed. Raises
    RuntimeError with what to do when the tarball is missing or the install fails."""
    source = tarball()
    if not source.is_file():
        raise RuntimeError(f"the upstream tarball {source} is missing; set HELIX_PEER_TARBALL to its path")
    script = home / "venv" / "bin" / "helix"
    stamp = {"sha256": _digest(source), "tarball": str(source), "compiled": True}
    if _stamped(home / "installed.json", stamp) and script.is_file():
        return script
    shutil.rmtree(home, ignore_errors=True)
    (home / "src").mkdir(parents=True)
    with tarfile.open(source) as tar:
        tar.extractall(home / "src", filter="data")
    project = next(p.parent for p in (home / "src").glob("*/pyproject.toml"))
    python = str(home / "venv" / "bin" / "python")
    _steps("the upstream tool", [[sys.executable, "-m", "venv", str(home / "venv")],
                                 [python, "-m", "pip", "install", *PIP_QUIET, "-e", str(project)],
                                 [python, "-m", "compileall", "-q", str(project)]])
    (home / "installed.json").write_text(json.dumps(stamp))
    return script


HELIX_HOME = REPO / "benchmarks" / ".helix-venv"
#: What the wheel is built from (pyproject.toml's packages, package-dir and readme).
PACKAGED = ("pyproject.toml", "README.md", "helix_engine", "helix_tui", "styles", "examples")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def helix_venv(home: Path = HELIX_HOME) -> Path:
    """The ``helix`` console script of this checkout installed as a user installs it (not
    editable) into its own venv; the runtime dependencies are installed when pyproject.toml's
    list changes, helix itself when a packaged file changes. Raises RuntimeError when pip fails."""
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    python = str(home / "venv" / "bin" / "python")
    if not _stamped(home / "deps.json", {"dependencies": deps}) or not Path(python).is_file():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        _steps("helix's dependencies", [[sys.executable, "-m", "venv", str(home / "venv")],
                                        [python, "-m", "pip", "install", *PIP_QUIET, "setuptools>=68", "wheel", *deps]])
        (home / "deps.json").write_text(json.dumps({"dependencies": deps}))
    stamp = {"sources": _tree_digest(REPO, PACKAGED)}
    script = home / "venv" / "bin" / "helix"
    if _stamped(home / "installed.json", stamp) and script.is_file():
        return script
    build = home / "build"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir()
    for name in PACKAGED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, build / name, ignore=_SKIP)
        else:
            shutil.copy2(REPO / name, build / name)
    _steps("helix", [[python, "-m", "pip", "install", *PIP_QUIET, "--no-deps", "--no-build-isolation",
                      "--force-reinstall", str(build)]])
    shutil.rmtree(build, ignore_errors=True)
    (home / "installed.json").write_text(json.dumps(stamp))
    return script


PIP_QUIET = ("-q", "--disable-pip-version-check")


def _stamped(stamp: Path, expected: dict) -> bool:
    """Whether an install's stamp file says it was made from ``expected``."""
    try:
        return json.loads(stamp.read_text()) == expected
    except (OSError, ValueError):
        return False


def _steps(what: str, steps: list[list[str]]) -> None:
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing {what} failed ({' '.join(argv[:4])} …): {done.stderr.strip()[-600:]}")


def _tree_digest(root: Path, names: tuple[str, ...]) -> str:
    """sha256 over the relative path and bytes of every file under ``names`` (bytecode skipped)."""
    sha = hashlib.sha256()
    for name in names:
        top = root / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()
                                                   and "__pycache__" not in p.parts and p.suffix != ".pyc"
                                                   and not any(part.endswith(".egg-info") for part in p.parts))
        for path in files:
            sha.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()
