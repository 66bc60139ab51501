"""A digest of the modules that compute a cached number: a cache entry made by other code is a miss.

One implementation for every cache under ``.helix/cache/`` (the interval cache, the round
summaries): each names the modules its entries depend on and a tag with its format version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=8)
def modules_digest(tag: str, names: Sequence[str]) -> str:
    """`modules_digest_now`, read once per process (a cache's entries are made by this process's code)."""
    return modules_digest_now(tag, names)


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
    """Every helix_engine module, as `modules_digest` names them."""
    root = Path(__file__).resolve().parent
    return tuple(sorted(str(p.relative_to(root)) for p in root.rglob("*.py")))
