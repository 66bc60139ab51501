"""Which code is running: a cache entry or a warm worker made by other code is not used.

``package_identity``: every helix_engine module's name, size and mtime and the Python version,
once per process: what every cache under ``.helix/cache/`` is sealed with (workspace/sealed.py)
and keyed by. ``modules_digest_now``: the bytes of the modules as they are on disk now, for a
long-lived warm worker that must notice an edit while it runs (eval/warm.py).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def modules_digest_now(tag: str, names: Sequence[str]) -> str:
    """sha256 of ``tag``, helix's version and the bytes of each module (paths relative to
    helix_engine/) as they are on disk now; a missing module counts as its name."""
    from helix_engine import __version__

    root = Path(__file__).resolve().parent
    digest = hashlib.sha256(f"{tag} {__version__}".encode())
    for name in names:
        try:
            digest.update((root / name).read_bytes())
        except OSError:
            digest.update(f"missing {name}".encode())
    return digest.hexdigest()


def all_modules() -> tuple[str, ...]:
    """Every helix_engine module, as `modules_digest_now` names them."""
    root = Path(__file__).resolve().parent
    return tuple(sorted(str(p.relative_to(root)) for p in root.rglob("*.py")))


_package: str | None = None


def package_identity() -> str:
    """helix_engine's modules (name, size, mtime) and the Python version, once per process: what
    the sealed caches and the stored status output are stamped with (no module's bytes read: a
    dozen stats per folder instead of reading ~200 files)."""
    global _package
    if _package is None:
        package = Path(__file__).resolve().parent
        parts = [sys.version]
        for folder, dirs, files in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    parts.append(f"{os.path.relpath(os.path.join(folder, name), package)}\0{st.st_size}"
                                 f"\0{st.st_mtime_ns}")
        _package = hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()
    return _package
