"""``record``: ``dataclasses.dataclass`` with one shared ``__eq__`` and ``__repr__`` (issue 12).

Why: dataclass compiles each method it generates from source with ``exec`` when the class is
made; a computed `helix status` makes ~40 dataclasses on its way in (~13 ms of ~70 ms at 200
rounds), two thirds of that for ``__repr__`` and ``__eq__``. These two are written once here and
read the class's fields, with the generated ones' results: fields in declaration order,
``compare=False`` and ``repr=False`` honoured, compared as tuples (so a field holding the same NaN
object compares equal, as in a tuple), a recursive repr cut to ``...``, and no hash (a mutable
record is unhashable, as dataclass makes it). A method the class defines itself is kept; frozen
classes are left to dataclass (their hash follows their equality).
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda fn: fn

T = TypeVar("T")


def _record_eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = self.__class__.__record_key__
        return key(self) == key(other)
    return NotImplemented


@reprlib.recursive_repr()
def _record_repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__class__.__record_shown__)
    return f"{self.__class__.__qualname__}({shown})"


def _tuple_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields' values as a tuple (attrgetter gives a bare value for one name)."""
    if len(names) >= 2:
        return operator.attrgetter(*names)  # a tuple for 2+ names
    if len(names) == 1:
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


@overload
def record(cls: type[T], /, **options: Any) -> type[T]: ...


@overload
def record(cls: None = None, /, **options: Any) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T] | None = None, /, **options: Any) -> Any:
    """``@dataclass`` (same options) whose ``__eq__`` and ``__repr__`` are the shared ones."""

    def wrap(klass: type[T]) -> type[T]:
        if options.get("frozen"):
            return dataclasses.dataclass(klass, **options)
        own = klass.__dict__
        want_eq = options.get("eq", True) and "__eq__" not in own
        want_repr = options.get("repr", True) and "__repr__" not in own
        keep_hash = "__hash__" in own
        made: Any = dataclasses.dataclass(klass, **{**options, "eq": options.get("eq", True) and not want_eq,
                                                     "repr": options.get("repr", True) and not want_repr})
        fields = dataclasses.fields(made)
        if want_eq:
            made.__record_key__ = _tuple_of(tuple(f.name for f in fields if f.compare))
            made.__eq__ = _record_eq
            if not keep_hash:
                made.__hash__ = None
        if want_repr:
            made.__record_shown__ = tuple(f.name for f in fields if f.repr)
            made.__repr__ = _record_repr
        return made

    return wrap if cls is None else wrap(cls)
