"""Cache files under ``.helix/cache/``, sealed with a key only this user can read.

Why (issue 12): a computed `helix status` at 1000 rounds rebuilt every round's summary, state,
the workflow and the ledger from JSON, checking every field of every entry again (~80 ms of a
~140 ms load), because the cache is workspace data and anyone can hand you a workspace. The same
objects come back from a pickle in ~13 ms, but unpickling runs code, and checked JSON still
trusted whatever numbers a crafted file held as long as their types were right. So every cache
entry is sealed: an HMAC-SHA256 under this user's key, over the code that wrote it and its
bytes. A file that does not verify is a miss and is never unpickled; a workspace copied from
someone else (their key) or made by other code is computed again and sealed anew.

The key: 32 random bytes in ``$XDG_CACHE_HOME/helix/cache.key`` (default ``~/.cache``), made on
first use with mode 0600 in a 0700 folder, used only when it is a regular file of this user that
no one else can read. Without one (no home, a read-only one), nothing is sealed, so nothing is
read back: helix computes everything, as it would the first time.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MAGIC = b"helix-sealed-1\n"
KEY_BYTES = 32
KEY_NAME = "cache.key"
_MAC_BYTES = 32
_MAX_BYTES = 256 * 1024 * 1024
_UNSET: Any = object()
_key: Any = _UNSET


def key_path() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not base:
        home = os.path.expanduser("~")
        if home == "~" or not home:
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "helix" / KEY_NAME


def user_key() -> bytes | None:
    """This user's cache key (made on first use); None when there is none to be had."""
    global _key
    if _key is _UNSET:
        try:
            _key = _read_or_make_key()
        except (OSError, ValueError, AttributeError):  # AttributeError: no os.getuid (not a POSIX system)
            _key = None
    found: bytes | None = _key
    return found


def forget_key() -> None:
    """Read the key again on next use (tests that move XDG_CACHE_HOME)."""
    global _key
    _key = _UNSET


def _read_key(path: Path) -> bytes | None:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_uid != os.getuid():
            raise ValueError(f"{path} is not a private key file of this user")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise ValueError(f"{path} is not a key")
    return data


def _read_or_make_key() -> bytes | None:
    path = key_path()
    if path is None:
        return None
    found = _read_key(path)
    if found is not None:
        return found
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = _new_temp(os.fspath(path.parent), ".key.", "")  # mode 0600
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
        os.close(fd)
        fd = -1
        with contextlib.suppress(FileExistsError):  # another process made it first: its key is the key
            os.link(tmp, path)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(tmp)
    return _read_key(path)


def code_stamp() -> str:
    """The code that seals: helix_engine's modules and the Python version (an entry made by other
    code is a miss before anything in it is read)."""
    from helix_engine.code_identity import package_identity

    return package_identity()


def _mac(key: bytes, stamp: str, payload: bytes | memoryview) -> bytes:
    mac = hmac.new(key, stamp.encode() + b"\0", hashlib.sha256)
    mac.update(payload)
    return mac.digest()


def seal_bytes(payload: bytes, stamp: str | None = None) -> bytes | None:
    """``payload`` sealed (None: no key, so nothing can be sealed)."""
    key = user_key()
    if key is None:
        return None
    return MAGIC + _mac(key, stamp if stamp is not None else code_stamp(), payload) + payload


def write_sealed_pieces(workspace: Path, name: str, pieces: Iterable[bytes]) -> bool:
    """``.helix/cache/name`` sealed over the concatenation of ``pieces``, written as they come (a 1 MB
    stored status is not joined, encoded and sealed in whole copies); False when not written."""
    key = user_key()
    if key is None:
        return False
    mac = hmac.new(key, code_stamp().encode() + b"\0", hashlib.sha256)

    def fill(handle: Any) -> None:
        handle.write(MAGIC + b"\0" * _MAC_BYTES)  # the seal goes here once the payload is hashed
        for piece in pieces:
            mac.update(piece)
            handle.write(piece)
        handle.seek(len(MAGIC))
        handle.write(mac.digest())

    return _write_atomically(workspace, name, fill)


def unseal_bytes(data: bytes, stamp: str | None = None) -> memoryview | None:
    """The payload of sealed ``data`` when its seal verifies under this user's key and code; None
    otherwise (not sealed, another key or code, a byte changed). A view of ``data``, not a copy."""
    key = user_key()
    head = len(MAGIC) + _MAC_BYTES
    if key is None or len(data) < head or not data.startswith(MAGIC):
        return None
    payload = memoryview(data)[head:]
    expected = _mac(key, stamp if stamp is not None else code_stamp(), payload)
    return payload if hmac.compare_digest(expected, data[len(MAGIC):head]) else None


def seal(obj: Any) -> bytes | None:
    """``obj`` pickled and sealed."""
    import pickle

    return seal_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def unseal(data: bytes) -> Any:
    """The object sealed in ``data``, or None when the seal does not verify (never unpickled then)."""
    payload = unseal_bytes(data)
    if payload is None:
        return None
    import pickle

    try:
        return pickle.loads(payload)
    except Exception:  # noqa: BLE001 - our own bytes, but a class may have moved since: a miss
        return None


# ------------------------------------------------------------------------ the cache folder


def cache_path(workspace: Path, name: str) -> Path:
    return Path(workspace) / ".helix" / "cache" / name


def read(workspace: Path, name: str, *, max_bytes: int = _MAX_BYTES) -> Any:
    """The object sealed in ``.helix/cache/name`` (through the safe reader), or None."""
    data = read_bytes(workspace, name, max_bytes=max_bytes)
    return unseal(data) if data is not None else None


def read_bytes(workspace: Path, name: str, *, max_bytes: int = _MAX_BYTES) -> bytes | None:
    """The raw bytes of ``.helix/cache/name`` through the safe reader, or None."""
    path = cache_path(workspace, name)
    if not os.path.lexists(path):
        return None
    from helix_engine.workspace.reading import read_bytes_safe

    data, problem = read_bytes_safe(path, workspace, max_bytes=max_bytes)
    return data if problem is None else None


def write(workspace: Path, name: str, obj: Any) -> bool:
    """Seal ``obj`` into ``.helix/cache/name``; False when it was not written. Never raises: a
    cache only saves time."""
    try:
        data = seal(obj)
        if data is None:
            return False
        return write_bytes(workspace, name, data)
    except (OSError, ValueError, TypeError, RecursionError, AttributeError):
        return False


def can_keep(workspace: Path) -> bool:
    """Whether the workspace's ``.helix/`` is a real folder, the only place a cache is written."""
    helix = Path(workspace) / ".helix"
    return not os.path.islink(helix) and os.path.isdir(helix)


def write_bytes(workspace: Path, name: str, data: bytes) -> bool:
    """Atomically (temp file + rename), into .helix/cache/``name`` of the workspace, only through
    real folders inside it. Not the engine's durable write (no fsync, not one of a transition's
    writes): after a power loss the file may be empty or old, and then it is a miss."""
    return _write_atomically(workspace, name, lambda handle: handle.write(data))


def _new_temp(folder: str, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file (mode 0600, opened for writing, not following a link) named like ``mkstemp``'s
    (``prefix`` + 8 characters + ``suffix``): tempfile's import (random, shutil) was ~2 ms of the
    status command that writes one cache file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        token = "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in os.urandom(8))
        path = os.path.join(folder, f"{prefix}{token}{suffix}")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


#: What mkstemp draws its names from (files.is_temp_name knows this shape).
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _write_atomically(workspace: Path, name: str, fill: Callable[[Any], Any]) -> bool:
    from helix_engine.workspace.reading import inside

    if not can_keep(workspace):
        return False
    folder = Path(workspace) / ".helix" / "cache"
    if os.path.islink(folder):
        return False
    if not os.path.isdir(folder):
        os.mkdir(folder)
    target = folder / name
    if os.path.islink(target) or not inside(folder, Path(workspace)):
        return False
    fd, tmp = _new_temp(os.fspath(folder), f".{name}.", ".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def remove(workspace: Path, name: str) -> None:
    """Delete ``.helix/cache/name`` when it is a file of a real cache folder (never through a link)."""
    helix = Path(workspace) / ".helix"
    path = helix / "cache" / name
    if os.path.islink(helix) or os.path.islink(helix / "cache") or not os.path.lexists(path) or os.path.islink(path):
        return
    with contextlib.suppress(OSError):
        os.unlink(path)

