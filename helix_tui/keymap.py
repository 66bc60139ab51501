"""User keymaps: remap any cockpit binding from a TOML file, by the binding's id.

``$HELIX_KEYMAP`` names the file, else ``$XDG_CONFIG_HOME/helix/keymap.toml`` (default
``~/.config/helix/keymap.toml``). Each line maps a binding id to one key or several, comma
separated, in Textual's key names::

    bench = "B"
    submit-round = "ctrl+s,S"
    pane-jobs = "j"

The ids are the names `?` lists (``bench``, ``pane-jobs``, ``close``…). The App hands the result
to Textual's ``App.set_keymap`` (as posting does). A file that cannot be used is a sentence the
cockpit shows, with its default keys, never a crash. Plain parsing (no widgets), testable without an app.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

KEYMAP_ENV = "HELIX_KEYMAP"
MAX_BYTES = 64 * 1024
#: Bindings outside the main screen's table (commands.ACTIONS), with their default keys.
OTHER_BINDINGS: dict[str, str] = {
    "close": "escape (forms); escape,q and the screen's own key (help, problems, pattern card)",
    "form-run": "ctrl+s (run the form: start, submit, round state, prepare baseline)",
    "older": "home (attempts.md: load the previous chunk)",
    "end": "end (attempts.md: jump to the end)",
}
_KEY = re.compile(r"^[^\s,]+$")
Keymap = dict[str, str]


def keymap_path() -> Path:
    """The keymap file: ``$HELIX_KEYMAP``, else the XDG config folder's helix/keymap.toml."""
    named = os.environ.get(KEYMAP_ENV, "").strip()
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or str(Path.home() / ".config")
    return Path(base) / "helix" / "keymap.toml"


def binding_ids() -> dict[str, str]:
    """Every id a keymap may name, with what it does now (its default keys)."""
    from helix_tui.commands import ACTIONS, display_key

    ids = {act.id: f"{display_key(act.key)} ({act.title})" for act in ACTIONS}
    ids.update(OTHER_BINDINGS)
    return ids


def load_keymap(path: Path | None = None) -> tuple[Keymap, str | None]:
    """(keymap, problem): the file's remaps, or an empty keymap and the sentence that says why the
    file is not used. A missing default file is no problem; a missing ``$HELIX_KEYMAP`` file is."""
    explicit = path is not None or bool(os.environ.get(KEYMAP_ENV, "").strip())
    path = keymap_path() if path is None else Path(path)
    try:
        if not path.is_file():
            if explicit:
                return {}, f"keymap {path} does not exist (from ${KEYMAP_ENV}); the cockpit uses its default keys"
            return {}, None
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        return {}, f"keymap {path} cannot be read ({exc.strerror or exc}); the cockpit uses its default keys"
    if len(data) > MAX_BYTES:
        return {}, f"keymap {path} is over {MAX_BYTES // 1024} KB; it should hold one line per remapped key"
    try:
        return parse_keymap(data.decode("utf-8"), binding_ids()), None
    except (UnicodeDecodeError, ValueError) as exc:
        return {}, f"keymap {path}: {exc}; the cockpit uses its default keys until it is fixed"


def parse_keymap(text: str, known: Iterable[str]) -> Keymap:
    """``id = "keys"`` lines → {id: keys}; raises ValueError with a sentence for a bad file."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ValueError("reading TOML needs Python 3.11 or the tomli package (pip install tomli)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML ({exc}); write one line per key, e.g. bench = \"B\"") from None
    known = sorted(set(known))
    keymap: Keymap = {}
    for binding_id, value in data.items():
        if binding_id not in known:
            close = difflib.get_close_matches(binding_id, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{binding_id!r} is not a cockpit binding{hint}; the ids are: {', '.join(known)}")
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{binding_id} = {value!r}: give the key as a string, e.g. {binding_id} = \"B\"")
        keys = [k.strip() for k in value.split(",")]
        if not all(_KEY.match(k) for k in keys):
            raise ValueError(f"{binding_id} = {value!r}: keys are names without spaces, comma separated "
                             "(e.g. \"ctrl+s,S\")")
        keymap[binding_id] = ",".join(keys)
    _refuse_clashes(keymap)
    return keymap


def _refuse_clashes(keymap: Keymap) -> None:
    """Two main-screen actions on one key: the second would silently never run."""
    from helix_tui.commands import ACTIONS

    keys: dict[str, str] = {}
    for act in ACTIONS:
        for key in keymap.get(act.id, act.key).split(","):
            key = _long(key)
            if key in keys:
                raise ValueError(f"{key!r} would run both {keys[key]} and {act.id}; give one of them another key")
            keys[key] = act.id


def _long(key: str) -> str:
    """Textual's long name of a key (``?`` → ``question_mark``), as bindings are matched."""
    from textual.keys import _character_to_key  # noqa: PLC2701 - the same normalization set_keymap uses

    return _character_to_key(key) if len(key) == 1 else key
