"""Cache files under ``.helix/cache/``, sealed with a key only this user can read.

Why (issue 12): a computed `helix status` at 1000 rounds rebuilt every round's summary, state,
the workflow and the ledger from JSON, checking every field of every entry again (~80 ms of a
~140 ms load), because the cache is workspace data and anyone can hand you a workspace. The same
objects come back from a pickle in ~13 ms, but unpickling runs code, and checked JSON still
trusted whatever numbers a crafted file held as long as their types were right. So every cache
file is sealed: an HMAC-SHA256 under this user's key, over the code that wrote it, the file's
name and its bytes. A file that does not verify is a miss and is never unpickled; a workspace
copied from someone else (their key) or made by other code is computed again and sealed anew.

The key: 32 random bytes in ``$XDG_CACHE_HOME/helix/cache.key`` (an absolute XDG_CACHE_HOME only,
as the XDG spec says; default ``~/.cache``), made on first use with mode 0600 in a 0700 folder.
It is used only when it is a regular file of this user that no one else can read, in a folder of
this user that no one else can write, itself in a folder that no one else can write: a key
someone else could have put there (a workspace's own ``.cache``, a shared folder) is no key.
Without one, nothing is sealed, so nothing is read back: helix computes everything, as the
first time.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

MAGIC = b"helix-sealed-1\n"
KEY_BYTES = 32
KEY_NAME = "cache.key"
_MAC_BYTES = 32
_MAX_BYTES = 256 * 1024 * 1024
_UNSET: Any = object()
_key: Any = _UNSET
_DIR = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_READ_ONLY = threading.local()  # .depth: how many `kept_as_is` blocks this thread is in


@contextlib.contextmanager
def kept_as_is() -> Iterator[None]:
    """In this thread, for the duration, no cache file is written or removed (a write is a miss,
    as when it could not be made); reads are as always. For what must write nothing, a workspace
    load included: the round checker (submit-round --check, the cockpit's preview)."""
    _READ_ONLY.depth = getattr(_READ_ONLY, "depth", 0) + 1
    try:
        yield
    finally:
        _READ_ONLY.depth -= 1


def _read_only() -> bool:
    return getattr(_READ_ONLY, "depth", 0) > 0


def user_cache_folder() -> Path | None:
    """``$XDG_CACHE_HOME/helix`` (an absolute XDG_CACHE_HOME only: the XDG spec says to ignore a
    relative one, which under `cd workspace` would point into the workspace), else
    ``~/.cache/helix``; None without an absolute home."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "helix"


def key_path() -> Path | None:
    folder = user_cache_folder()
    return folder / KEY_NAME if folder is not None else None


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


def _writable_by_others(st: os.stat_result) -> bool:
    """Whether someone other than the folder's owner can change what it holds. Group write counts
    only when the group is not this user's own (a user-private group: umask 002 systems make
    ~/.cache 0775, and no one else is in that group)."""
    if st.st_mode & 0o002:
        return True
    if not st.st_mode & 0o020:
        return False
    import grp
    import pwd

    try:
        group, user = grp.getgrgid(st.st_gid), pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return True
    return st.st_gid != os.getgid() or any(member != user for member in group.gr_mem)


def _check_base(path: Path) -> None:
    """The folder the key's folder lies in (``~/.cache``; a link to it is followed, as home
    quotas make common): this user's or root's, and no one else can swap what it holds."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (os.getuid(), 0) or _writable_by_others(st):
        raise ValueError(f"{path} is a folder others can write; helix keeps no cache key there")


def _own_folder(path: Path) -> None:
    """helix's own folder (``~/.cache/helix``): a real folder of this user, made private (0700)
    when it is not (another of helix's writers, or pip's umask, may have made it 0775)."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise ValueError(f"{path} is not a folder of this user; helix keeps no cache key there")
    if st.st_mode & 0o077:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))  # never a link's target
        try:
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
        if _writable_by_others(st):  # a key found there may be someone else's: a new one replaces it
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path / KEY_NAME)


def user_cache_folder_made() -> Path | None:
    """`user_cache_folder`, made (0700) and checked as the key's folder is; None when it cannot be."""
    folder = user_cache_folder()
    if folder is None:
        return None
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_base(folder.parent)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        _own_folder(folder)
    except (OSError, ValueError):
        return None
    return folder


def _read_key(path: Path) -> bytes | None:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
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
    folder = user_cache_folder_made()
    if folder is None:
        return None
    path = folder / KEY_NAME
    found = _read_key(path)
    if found is not None:
        return found
    fd, tmp = _new_temp(os.fspath(folder), ".key.", "")  # mode 0600
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
        os.close(fd)
        fd = -1
        try:
            os.link(tmp, path)  # never over a key another process made first: its key is the key
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links: the last rename wins, and every process reads it
            os.rename(tmp, path)
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return _read_key(path)


def code_stamp() -> str:
    """The code that seals: helix_engine's modules and the Python version (an entry made by other
    code is a miss before anything in it is read)."""
    from helix_engine.code_identity import package_identity

    return package_identity()


def _mac(key: bytes, name: str, stamp: str | None) -> Any:
    """The HMAC of a file ``name`` under this code (``stamp``), before its payload is fed in: a
    file sealed for one name (rounds.delta.sealed) does not verify as another (rounds.sealed)."""
    head = f"{stamp if stamp is not None else code_stamp()}\0{name}\0".encode("utf-8", "surrogateescape")
    return hmac.new(key, head, hashlib.sha256)


def seal_bytes(payload: bytes, name: str, stamp: str | None = None) -> bytes | None:
    """``payload`` sealed for the file ``name`` (None: no key, so nothing can be sealed)."""
    key = user_key()
    if key is None:
        return None
    mac = _mac(key, name, stamp)
    mac.update(payload)
    return MAGIC + mac.digest() + payload


def unseal_bytes(data: bytes, name: str, stamp: str | None = None) -> memoryview | None:
    """The payload of ``data`` when it was sealed for ``name`` under this user's key and code;
    None otherwise (not sealed, another key, code or name, a byte changed). A view, not a copy."""
    key = user_key()
    head = len(MAGIC) + _MAC_BYTES
    if key is None or len(data) < head or not data.startswith(MAGIC):
        return None
    payload = memoryview(data)[head:]
    mac = _mac(key, name, stamp)
    mac.update(payload)
    return payload if hmac.compare_digest(mac.digest(), data[len(MAGIC):head]) else None


def seal(obj: Any, name: str) -> bytes | None:
    """``obj`` pickled and sealed for the file ``name``."""
    import pickle

    return seal_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), name)


def unseal(data: bytes, name: str) -> Any:
    """The object sealed in ``data`` for ``name``, or None when the seal does not verify (never
    unpickled then)."""
    payload = unseal_bytes(data, name)
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
    return unseal(data, name) if data is not None else None


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
        data = seal(obj, name)
        return data is not None and write_bytes(workspace, name, data)
    except Exception:  # noqa: BLE001 - an object pickle refuses, a full disk, a folder swapped: no cache
        return False


def write_sealed_pieces(workspace: Path, name: str, pieces: Iterable[bytes]) -> bool:
    """``.helix/cache/name`` sealed over the concatenation of ``pieces``, written as they come (a 1 MB
    stored status is not joined, encoded and sealed in whole copies); False when not written."""
    key = user_key()
    if key is None:
        return False
    mac = _mac(key, name, None)

    def fill(fd: int) -> None:
        os.write(fd, MAGIC + b"\0" * _MAC_BYTES)  # the seal goes here once the payload is hashed
        for piece in pieces:
            mac.update(piece)
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view):]
        os.pwrite(fd, mac.digest(), len(MAGIC))

    return _write_atomically(workspace, name, fill)


def can_keep(workspace: Path) -> bool:
    """Whether the workspace's ``.helix/`` is a real folder, the only place a cache is written."""
    helix = Path(workspace) / ".helix"
    return not os.path.islink(helix) and os.path.isdir(helix)


def write_bytes(workspace: Path, name: str, data: bytes) -> bool:
    """Atomically (temp file + rename), into .helix/cache/``name`` of the workspace, only through
    real folders inside it. Not the engine's durable write (no fsync, not one of a transition's
    writes): after a power loss the file may be empty or old, and then it is a miss."""

    def fill(fd: int) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    return _write_atomically(workspace, name, fill)


def _new_temp(folder: str, prefix: str, suffix: str, dir_fd: int | None = None) -> tuple[int, str]:
    """A new file (mode 0600, opened for writing, not following a link) named like ``mkstemp``'s
    (``prefix`` + 8 characters + ``suffix``), in ``folder`` or the folder open as ``dir_fd``:
    tempfile's import (random, shutil) was ~2 ms of the status command that writes one cache file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        token = "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in os.urandom(8))
        name = f"{prefix}{token}{suffix}"
        try:
            if dir_fd is not None:
                return os.open(name, flags, 0o600, dir_fd=dir_fd), name
            return os.open(os.path.join(folder, name), flags, 0o600), os.path.join(folder, name)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


#: What mkstemp draws its names from (files.is_temp_name knows this shape).
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _write_atomically(workspace: Path, name: str, fill: Callable[[int], Any]) -> bool:
    """``fill`` a new temp file in the workspace's ``.helix/cache/`` and rename it to ``name``,
    through folders opened without following a link (none can be swapped for one meanwhile);
    False when it could not be written (no permission, a full disk, a folder in its place), or
    may not be now (`kept_as_is`)."""
    if _read_only():
        return False
    try:
        return _write_in_cache(workspace, name, fill)
    except OSError:
        return False


#: A temp file of a cache write this old is a killed writer's: the next write of that name removes it.
STALE_TEMP_S = 600.0


def _write_in_cache(workspace: Path, name: str, fill: Callable[[int], Any]) -> bool:
    try:
        helix_fd = os.open(os.path.join(os.fspath(workspace), ".helix"), _DIR)
    except OSError:
        return False  # no .helix/ (an upstream workspace gets no new folder), or a link
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir("cache", 0o700, dir_fd=helix_fd)
        cache_fd = os.open("cache", _DIR, dir_fd=helix_fd)
    except OSError:
        os.close(helix_fd)
        return False
    try:
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(os.lstat(name, dir_fd=cache_fd).st_mode):
                return False  # a link someone put in its place is left as it is
        fd, tmp = _new_temp("", f".{name}.", ".tmp", dir_fd=cache_fd)
        try:
            try:
                fill(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=cache_fd, dst_dir_fd=cache_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=cache_fd)
            raise
        with contextlib.suppress(OSError):  # the file is written: a sweep that fails changes nothing
            _remove_stale_temps(cache_fd, name)
    finally:
        os.close(cache_fd)
        os.close(helix_fd)
    return True


def _remove_stale_temps(cache_fd: int, name: str) -> None:
    """Remove the temp files a killed write of ``name`` left (regular files of its pattern, older
    than STALE_TEMP_S: a live writer's is younger); nothing else reports or removes them."""
    import time

    prefix, now = f".{name}.", time.time()
    for entry in os.listdir(cache_fd):
        if entry.startswith(prefix) and entry.endswith(".tmp") and len(entry) == len(prefix) + 12:
            with contextlib.suppress(OSError):
                st = os.lstat(entry, dir_fd=cache_fd)
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TEMP_S:
                    os.unlink(entry, dir_fd=cache_fd)


def remove(workspace: Path, name: str) -> None:
    """Delete ``.helix/cache/name`` when it is a file of a real cache folder (never through a link)."""
    if _read_only():
        return
    try:
        helix_fd = os.open(os.path.join(os.fspath(workspace), ".helix"), _DIR)
    except OSError:
        return
    try:
        cache_fd = os.open("cache", _DIR, dir_fd=helix_fd)
        try:
            if not stat.S_ISLNK(os.lstat(name, dir_fd=cache_fd).st_mode):
                os.unlink(name, dir_fd=cache_fd)
        finally:
            os.close(cache_fd)
    except OSError:
        pass
    finally:
        os.close(helix_fd)
