"""layout.child: a load's ~3000 round paths made through pathlib's own helper for a plain name
(issue 12), exactly as ``folder / name`` makes them, for any name."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from helix_engine.workspace.layout import child


@given(st.sampled_from(["ws/opt-round-3", "/abs/ws/baseline", ".", "a/../b", "ws"]),
       st.text(alphabet="ab._-/ ", min_size=0, max_size=6))
def test_a_child_path_is_pathlibs(folder: str, name: str) -> None:
    made, expected = child(Path(folder), name), Path(folder) / name
    assert made == expected and str(made) == str(expected) and made.parts == expected.parts
    assert made.name == expected.name and made.parent == expected.parent and hash(made) == hash(expected)
