"""json_indent writes json.dumps(indent=2, ensure_ascii=False)'s exact text (status --json's bytes)."""

from __future__ import annotations

import enum
import json
import random
from typing import Any

import pytest

from helix_engine.json_indent import dumps_indented, indented_chunks

_STRINGS = ["", "plain", "quote \" and \\ back", "tab\there\nnew", "\x00\x1f\x7f", "ünïcødé ✓ 𝄞", "\ud800", "</script>"]
_NUMBERS = [0, -1, 2**70, 1.0, -0.0, 1e-300, 1.7976931348623157e308, 0.1 + 0.2, float("nan"), float("inf"),
            float("-inf"), True, False, None]


class _Level(enum.IntEnum):
    LOW = 1


def _value(rng: random.Random, depth: int) -> Any:
    kind = rng.random()
    if depth > 4 or kind < 0.45:
        return rng.choice(_STRINGS + _NUMBERS)
    if kind < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind < 0.75:
        return tuple(_value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    return {rng.choice(_STRINGS) + str(i): _value(rng, depth + 1) for i in range(rng.randint(0, 4))}


@pytest.mark.parametrize("seed", range(40))
def test_the_text_is_json_dumps_indent_2(seed: int) -> None:
    data = _value(random.Random(seed), 0)
    expected = json.dumps(data, indent=2, ensure_ascii=False)
    assert dumps_indented(data) == expected
    assert "".join(indented_chunks({"x": [data] * 3000})) == json.dumps({"x": [data] * 3000}, indent=2,
                                                                         ensure_ascii=False) + "\n"


@pytest.mark.parametrize("data", [{1: "int key"}, {"a": {None: 1}}, [_Level.LOW], {"s": {1, 2}}, [b"bytes"]])
def test_what_it_does_not_write_itself_is_json_s_own(data: Any) -> None:
    try:
        expected = json.dumps(data, indent=2, ensure_ascii=False)
    except TypeError as exc:
        with pytest.raises(TypeError, match=str(exc)):
            dumps_indented(data)
    else:
        assert dumps_indented(data) == expected
