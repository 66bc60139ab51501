"""helix_engine.record: dataclasses whose __eq__ and __repr__ are shared, not compiled per class
(issue 12), give what dataclass's generated ones give."""

from __future__ import annotations

import dataclasses
import math
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helix_engine.record import record


def _pair(**options: Any) -> tuple[type, type]:
    """The same declaration made by dataclass and by record."""
    def declare(decorate: Any) -> type:
        @decorate(**options)
        class Sample:
            a: Any
            b: Any = None
            hidden: Any = field(default=None, repr=False)
            ignored: Any = field(default=None, compare=False)
            items: list[Any] = field(default_factory=list)
        return Sample
    return declare(dataclass), declare(record)


_VALUES = st.one_of(st.none(), st.integers(-3, 3), st.floats(), st.text(max_size=3), st.lists(st.integers(0, 2), max_size=2))


@pytest.mark.parametrize("options", [{}, {"slots": True}, {"kw_only": True}, {"slots": True, "kw_only": True}])
@given(st.lists(_VALUES, min_size=5, max_size=5), st.lists(_VALUES, min_size=5, max_size=5), st.booleans())
def test_equality_repr_and_hash_are_dataclasses(options: dict[str, Any], left: list[Any], right: list[Any],
                                                 same: bool) -> None:
    theirs, ours = _pair(**options)
    values = [left, left if same else right]
    kw = [dict(zip(("a", "b", "hidden", "ignored", "items"), v)) for v in values]
    a, b = theirs(**kw[0]), theirs(**kw[1])
    x, y = ours(**kw[0]), ours(**kw[1])
    assert (a == b) == (x == y) and (a != b) == (x != y) and (a == a) == (x == x)
    assert repr(a).replace("Sample", "S") == repr(x).replace("Sample", "S")
    assert (a == 5) == (x == 5) is False
    with pytest.raises(TypeError):
        hash(x)


def test_a_nan_field_compares_as_in_a_tuple_and_pickles() -> None:
    theirs, ours = _pair(slots=True)
    nan = math.nan
    assert (theirs(nan) == theirs(nan)) == (ours(nan) == ours(nan)) is True  # the same object: equal
    assert (theirs(nan) == theirs(float("nan"))) == (ours(nan) == ours(float("nan"))) is False
    one = Kept(1, [2])
    assert pickle.loads(pickle.dumps(one)) == one and dataclasses.replace(one, b=5).b == 5


@record(slots=True)
class Kept:
    a: Any
    b: Any = None


def test_a_method_the_class_defines_is_kept_and_frozen_is_dataclasses() -> None:
    @record
    class Own:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

        def __repr__(self) -> str:
            return "mine"

    assert Own(1) == Own(2) and repr(Own(1)) == "mine"

    @record(frozen=True)
    class Frozen:
        a: int

    assert hash(Frozen(1)) == hash(Frozen(1)) and Frozen(1) == Frozen(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Frozen(1).a = 2  # type: ignore[misc]

    @record
    class Recursive:
        me: Any = None

    loop = Recursive()
    loop.me = loop
    assert repr(loop) == "test_a_method_the_class_defines_is_kept_and_frozen_is_dataclasses.<locals>.Recursive(me=...)"
