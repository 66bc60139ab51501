"""How helix runs its own Python helpers so that no module of the caller's folder is imported.

Why: ``python -c`` puts ``''`` (the current folder) first on ``sys.path``, and ``python -m``
puts the current folder's path there. Run from a workspace holding a ``json.py`` or a
``torch.py``, a helper would import and run that file: workspace code, without the user
asking for a job on it. ``-I``/``-E``/``-s`` are not used because they also drop
``PYTHONPATH`` and the user site-packages, where the device stack legitimately lives
(CANN's ``set_env.sh`` puts its Python packages on ``PYTHONPATH``; torch may be a
``pip install --user``). Instead a helper starts in :data:`NEUTRAL_CWD` and its first
statement drops the current-folder entry, before anything is imported from ``sys.path``
(``site`` and the encodings are imported during start-up, before that entry is added).

Job children that run the user's operator keep their cwd (the operator's folder) on
``sys.path``: that is the code the user asked to run.
"""

from __future__ import annotations

import os
import sys

#: A folder no user can plant modules in, for helpers that need no particular cwd.
NEUTRAL_CWD = "/"

#: First statement of every ``python -c`` helper: drop the current-folder entries.
DROP_CWD = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"


def code_argv(python: str, code: str) -> list[str]:
    """``python -c CODE`` with the current folder removed from ``sys.path`` first."""
    return [python, "-c", DROP_CWD + code]


def drop_cwd_entry() -> None:
    """Called by ``python -m helix_engine``: forget the current folder that ``-m`` put first
    on ``sys.path`` (the package itself is already imported), so no later import of
    json, pydantic, … can come from the folder helix was started in. ``-P`` (3.11+) or
    PYTHONSAFEPATH already kept it out."""
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    try:
        here = os.getcwd()
    except OSError:
        here = None
    if sys.path[0] in ("", ".", here):
        del sys.path[0]
