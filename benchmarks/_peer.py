"""The upstream tool, installed from its tarball into its own virtual environment (an editable install:
its code reads data files from its source tree), to measure it side by side with helix in the same run (never a
figure quoted from somewhere else).

The tarball is ``../shared/peers/upstream-helix-76b17cb.tar.gz`` beside the checkout (set
``HELIX_PEER_TARBALL`` to use another copy). It is unpacked and installed once into
``benchmarks/.peer-venv/`` (ignored by git) and reused while the tarball's hash is unchanged.
Its ``status`` needs no NPU and no dependency on Python < 3.12, so a plain venv suffices; pip
fetches setuptools from PyPI to build it.
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
    digest = _digest(source)
    script = home / "venv" / "bin" / "helix"
    stamp = home / "installed.json"
    try:
        if script.is_file() and json.loads(stamp.read_text())["sha256"] == digest:
            return script
    except (OSError, ValueError, KeyError):
        pass
    shutil.rmtree(home, ignore_errors=True)
    (home / "src").mkdir(parents=True)
    with tarfile.open(source) as tar:
        tar.extractall(home / "src", filter="data")
    project = next(p.parent for p in (home / "src").glob("*/pyproject.toml"))
    steps = [[sys.executable, "-m", "venv", str(home / "venv")],
             [str(home / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
              "-e", str(project)]]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing the upstream tool failed ({' '.join(argv[:4])} …): "
                               f"{done.stderr.strip()[-600:]}")
    stamp.write_text(json.dumps({"sha256": digest, "tarball": str(source)}))
    return script
