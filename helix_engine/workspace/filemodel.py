"""Typed models of workspace files: declared fields, checked on read, unknown keys kept.

Why not pydantic (issue 12): `helix status` must answer in a fraction of the upstream tool's time,
and importing pydantic, defining the model classes and building their validators was ~60 ms of a
~140 ms status at 200 rounds, before a single file was checked. The workspace files are small,
flat JSON objects with a dozen fields of a few kinds; this module checks exactly those kinds,
with pydantic's lax rules and error shapes (so messages and accepted files stay as they were),
and costs nothing at import: a class's checks are compiled from its annotations when it first
validates.

A model is a class with annotated fields (defaults as class values, ``field(default_factory=)``
for mutable ones). Kinds: ``str``, ``bool``, ``int``, ``float``, ``Any``, ``Literal[...]``, ``X |
None``, ``list[X]``, ``tuple[X, Y]``, ``dict[str, X]`` and other models. Hooks, all optional: ``_prepare``
(classmethod, the raw dict before checks), ``_field_before`` / ``_field_after`` (name → function
of a value, before and after its kind's check) and ``_validate`` (the built instance). A hook
raises ValueError to reject; every problem becomes one entry of a ValidationError.
"""

from __future__ import annotations

import json
import math
import re
import sys
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda cls: cls

M = TypeVar("M", bound="FileModel")
_MISSING: Any = object()
#: A check's way of saying the value is rejected (its error is already recorded).
_BAD: Any = object()
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})

Check = Callable[[Any, tuple[Any, ...], list[dict[str, Any]]], Any]


class ValidationError(ValueError):
    """Every problem one validation found: ``errors()`` as pydantic lists them (loc, msg, type),
    so `reading.describe_validation` words both alike."""

    def __init__(self, title: str, errors: list[dict[str, Any]]) -> None:
        self.title = title
        self._errors = errors
        super().__init__(str(self))

    def errors(self) -> list[dict[str, Any]]:
        return [dict(e) for e in self._errors]

    def error_count(self) -> int:
        return len(self._errors)

    def __str__(self) -> str:
        n = len(self._errors)
        lines = [f"{n} validation error{'' if n == 1 else 's'} for {self.title}"]
        for err in self._errors:
            lines.append(".".join(str(p) for p in err["loc"]) or self.title)
            lines.append(f"  {err['msg']}")
        return "\n".join(lines)


class _Field:
    __slots__ = ("default", "factory")

    def __init__(self, default: Any, factory: Callable[[], Any] | None) -> None:
        self.default = default
        self.factory = factory


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None) -> Any:
    """A field's default when it is not a plain value (``default_factory`` for a list or dict)."""
    return _Field(default, default_factory)


def _error(errors: list[dict[str, Any]], loc: tuple[Any, ...], kind: str, msg: str) -> Any:
    errors.append({"type": kind, "loc": loc, "msg": msg})
    return _BAD


# ----------------------------------------------------------------------------- the kinds


def _check_any(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
    return value


def _check_str(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
    if isinstance(value, str):
        return value
    return _error(errors, loc, "string_type", "Input should be a valid string")


def _check_bool(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
    if value is True or value is False:
        return value
    if isinstance(value, str):
        word = value.lower()  # not stripped: pydantic refuses " yes "
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        return _error(errors, loc, "bool_parsing", "Input should be a valid boolean, unable to interpret input")
    if isinstance(value, (int, float)):
        if value in (0, 1):
            return bool(value)
        # a whole number that fits 64 bits is a word it cannot read; anything else is no boolean at all
        if (isinstance(value, int) or (math.isfinite(value) and value == int(value))) and -2**63 <= value < 2**63:
            return _error(errors, loc, "bool_parsing", "Input should be a valid boolean, unable to interpret input")
    return _error(errors, loc, "bool_type", "Input should be a valid boolean")


_INT_TEXT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")  # ASCII digits only, as pydantic


def _check_int(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return _error(errors, loc, "finite_number", "Input should be a finite number")
        if value != int(value):
            return _error(errors, loc, "int_from_float", "Input should be a valid integer, got a number with a "
                          "fractional part")
        if abs(value) >= 2**63:
            return _error(errors, loc, "int_parsing_size", "Unable to parse input string as an integer, exceeded "
                          "maximum size")
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if _INT_TEXT.fullmatch(text):
            return int(text.partition(".")[0])
        return _error(errors, loc, "int_parsing", "Input should be a valid integer, unable to parse string "
                      "as an integer")
    return _error(errors, loc, "int_type", "Input should be a valid integer")


def _check_float(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # an integer past a float's range (a crafted line): not a number
            return _error(errors, loc, "float_type", "Input should be a valid number")
    if isinstance(value, str):
        try:
            if not value.isascii():  # float() reads other scripts' digits; pydantic does not
                raise ValueError(value)
            return float(value)
        except ValueError:
            return _error(errors, loc, "float_parsing", "Input should be a valid number, unable to parse string "
                          "as a number")
    return _error(errors, loc, "float_type", "Input should be a valid number")


_PLAIN: dict[Any, Check] = {str: _check_str, bool: _check_bool, int: _check_int, float: _check_float, Any: _check_any}


def _literal(choices: tuple[Any, ...]) -> Check:
    allowed = tuple((type(c), c) for c in choices)
    words = [repr(c) for c in choices]
    expected = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"

    def check(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
        for kind, choice in allowed:
            # an int choice takes an equal bool or float (lax, as pydantic); a string only itself
            if (type(value) is kind or (kind is int and type(value) in (bool, float))) and value == choice:
                return choice
        return _error(errors, loc, "literal_error", f"Input should be {expected}")
    return check


def _optional(inner: Check) -> Check:
    def check(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
        return None if value is None else inner(value, loc, errors)
    return check


def _list(inner: Check) -> Check:
    def check(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
        if not isinstance(value, (list, tuple)):
            return _error(errors, loc, "list_type", "Input should be a valid list")
        out = [inner(item, (*loc, i), errors) for i, item in enumerate(value)]
        return _BAD if any(item is _BAD for item in out) else out
    return check


def _tuple(items: tuple[Check, ...]) -> Check:
    def check(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
        if not isinstance(value, (list, tuple)):
            return _error(errors, loc, "tuple_type", "Input should be a valid tuple")
        if len(value) != len(items):
            return _error(errors, loc, "too_short" if len(value) < len(items) else "too_long",
                          f"Tuple should have {len(items)} items after validation, not {len(value)}")
        out = tuple(inner(item, (*loc, i), errors) for i, (inner, item) in enumerate(zip(items, value)))
        return _BAD if any(item is _BAD for item in out) else out
    return check


def _dict(inner: Check) -> Check:
    def check(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
        if not isinstance(value, dict):
            return _error(errors, loc, "dict_type", "Input should be a valid dictionary")
        out: dict[str, Any] = {}
        bad = False
        for key, item in value.items():
            if not isinstance(key, str):
                bad = _error(errors, (*loc, key), "string_type", "Input should be a valid string") is _BAD
                continue
            out[key] = inner(item, (*loc, key), errors)
            bad = bad or out[key] is _BAD
        return _BAD if bad else out
    return check


def _model(cls: type[FileModel]) -> Check:
    def check(value: Any, loc: tuple[Any, ...], errors: list[dict[str, Any]]) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            return _error(errors, loc, "model_type", f"Input should be a valid dictionary or instance of "
                          f"{cls.__name__}")
        found: list[dict[str, Any]] = []
        built = cls._build(value, found)
        for err in found:
            errors.append({**err, "loc": (*loc, *err["loc"])})
        return _BAD if found else built
    return check


def _compile(kind: Any) -> Check:
    """The check of one annotation (evaluated)."""
    if kind in _PLAIN:
        return _PLAIN[kind]
    if isinstance(kind, type) and issubclass(kind, FileModel):
        return _model(kind)
    origin, args = get_origin(kind), get_args(kind)
    if origin is Literal:
        return _literal(args)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return _optional(_compile(rest[0]))
    if origin is list and len(args) == 1:
        return _list(_compile(args[0]))
    if origin is tuple and args and Ellipsis not in args:
        return _tuple(tuple(_compile(a) for a in args))
    if origin is dict and len(args) == 2 and args[0] is str:
        return _dict(_compile(args[1]))
    raise TypeError(f"filemodel cannot check {kind!r}")


# ---------------------------------------------------------------------------- the models


@dataclass_transform(kw_only_default=True, field_specifiers=(field,))
class _ModelMeta(type):
    """Turns the annotated fields into slots (their defaults kept aside) so an instance is small."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kw: Any) -> type:
        notes = namespace.get("__annotations__", {})
        own = [k for k, v in notes.items() if not k.startswith("_") and "ClassVar" not in str(v)]
        defaults = {k: namespace.pop(k) for k in own if k in namespace}
        namespace["__slots__"] = (*own, *namespace.get("__slots__", ()))
        cls = super().__new__(mcls, name, bases, namespace, **kw)
        cls._own = (own, defaults)  # type: ignore[attr-defined]
        return cls


class FileModel(metaclass=_ModelMeta):
    """Base of the workspace's file models (see the module docstring)."""

    # the unknown keys and the keys given: slots without annotations (an annotated name is a field
    # to a type checker that reads the class as dataclass-like)
    __slots__ = ("_extra", "_set")
    #: unknown keys are kept (upstream tools may add some) unless False
    _allow_extra: ClassVar[bool] = True
    _field_before: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    _field_after: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    #: (name, check, default, factory) per field, in declaration order: compiled on first use
    _spec: ClassVar[tuple[tuple[str, Check, Any, Any], ...] | None] = None

    def __init__(self, **data: Any) -> None:
        errors: list[dict[str, Any]] = []
        self._fill(data, errors)
        if errors:
            raise ValidationError(type(self).__name__, errors)

    # ------------------------------------------------------------------ reading

    @classmethod
    def model_validate(cls: type[M], data: Any) -> M:
        """An instance from a dict read from a file; ValidationError (a ValueError) listing every
        problem."""
        if isinstance(data, cls):
            return data
        errors: list[dict[str, Any]] = []
        if not isinstance(data, dict):
            raise ValidationError(cls.__name__, [{"type": "model_type", "loc": (), "msg": "Input should be a "
                                                  f"valid dictionary or instance of {cls.__name__}"}])
        built = cls._build(data, errors)
        if errors:
            raise ValidationError(cls.__name__, errors)
        return built

    @classmethod
    def model_validate_json(cls: type[M], text: str | bytes) -> M:
        """``model_validate`` of a JSON document (json's own errors are ValueErrors too)."""
        return cls.model_validate(json.loads(text))

    @classmethod
    def _build(cls: type[M], data: dict[str, Any], errors: list[dict[str, Any]]) -> M:
        self = cls.__new__(cls)
        self._fill(data, errors)
        return self

    def _fill(self, data: dict[str, Any], errors: list[dict[str, Any]]) -> None:
        cls = type(self)
        try:
            data = cls._prepare(data)
        except ValueError as exc:
            _error(errors, (), "value_error", f"Value error, {exc}")
            return
        spec = cls._checks()
        before, after = cls._field_before, cls._field_after
        setter = object.__setattr__
        for name, check, default, factory in spec:
            value = data.get(name, _MISSING)
            if value is _MISSING:
                if default is _MISSING and factory is None:
                    _error(errors, (name,), "missing", "Field required")
                    continue
                setter(self, name, factory() if factory is not None else default)
                continue
            try:
                if name in before:
                    value = before[name](value)
                value = check(value, (name,), errors)
                if value is not _BAD and name in after:
                    value = after[name](value)
            except ValueError as exc:
                value = _error(errors, (name,), "value_error", f"Value error, {exc}")
            if value is not _BAD:
                setter(self, name, value)
        extra = {k: v for k, v in data.items() if k not in cls._names()}
        if extra and not cls._allow_extra:
            for key in extra:
                _error(errors, (key,), "extra_forbidden", "Extra inputs are not permitted")
        setter(self, "_extra", extra or None)
        keys = frozenset(data)
        setter(self, "_set", keys if extra else _shared_keys(keys))  # unknown keys: its own set
        if not errors:
            try:
                self._validate()
            except ValueError as exc:
                _error(errors, (), "value_error", f"Value error, {exc}")

    @classmethod
    def _prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The raw dict before any field is checked (a legacy key renamed, say)."""
        return data

    def _validate(self) -> None:
        """Rules across fields, on the built instance; raise ValueError to reject."""

    @classmethod
    def _checks(cls) -> tuple[tuple[str, Check, Any, Any], ...]:
        """The class's own compiled checks (a subclass never reads its base's)."""
        spec: tuple[tuple[str, Check, Any, Any], ...] | None = cls.__dict__.get("_spec")
        return spec if spec is not None else cls._compile_spec()

    @classmethod
    def _compile_spec(cls) -> tuple[tuple[str, Check, Any, Any], ...]:
        module = sys.modules[cls.__module__].__dict__
        spec: list[tuple[str, Check, Any, Any]] = []
        for klass in reversed(cls.__mro__):
            own = klass.__dict__.get("_own")
            if own is None:
                continue
            names, defaults = own
            notes = klass.__dict__.get("__annotations__", {})
            for name in names:
                note = notes[name]
                kind = eval(note, module) if isinstance(note, str) else note  # noqa: S307 - our own annotations
                default = defaults.get(name, _MISSING)
                factory = None
                if isinstance(default, _Field):
                    default, factory = default.default, default.factory
                spec[:] = [s for s in spec if s[0] != name]
                spec.append((name, _compile(kind), default, factory))
        done = tuple(spec)
        cls._spec = done
        return done

    @classmethod
    def _names(cls) -> frozenset[str]:
        found = cls.__dict__.get("_name_set")
        if found is None:
            spec = cls._checks()
            found = frozenset(s[0] for s in spec)
            cls._name_set = found  # type: ignore[attr-defined]
        return found

    # ------------------------------------------------------------------ pydantic's names

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The declared fields, in order."""
        spec = cls._checks()
        return tuple(s[0] for s in spec)

    @property
    def model_fields_set(self) -> frozenset[str]:
        """The keys the instance was read or built with (a default is not among them)."""
        found: frozenset[str] = object.__getattribute__(self, "_set")
        return found

    @property
    def model_extra(self) -> dict[str, Any]:
        """The unknown keys it was read with, kept for the round trip (a new empty dict when none:
        a 1000-round load holds ~3000 models)."""
        found: dict[str, Any] | None = object.__getattribute__(self, "_extra")
        return found if found is not None else {}

    def model_dump(self, *, mode: str = "python", exclude_none: bool = False) -> dict[str, Any]:
        """Declared fields in order (models and lists copied), then the unknown keys; ``mode="json"``
        writes an unknown key's NaN or infinity as None, as pydantic's JSON mode does."""
        out: dict[str, Any] = {}
        for name in self.field_names():
            value = _dumped(getattr(self, name, None), mode)
            if value is None and exclude_none:
                continue
            out[name] = value
        for key, value in self.model_extra.items():
            if value is None and exclude_none:
                continue
            out[key] = _json_safe(value) if mode == "json" else value
        return out

    def model_dump_json(self, *, indent: int | None = None) -> str:
        """``model_dump`` as JSON text: compact, or indented by ``indent``, every NaN or infinity as
        null (strict JSON; as pydantic writes it)."""
        separators = (",", ":") if indent is None else (",", ": ")
        return json.dumps(_json_safe(self.model_dump(mode="json")), indent=indent, separators=separators,
                          ensure_ascii=False)

    def model_copy(self: M, *, update: dict[str, Any] | None = None) -> M:
        """A shallow copy with ``update`` set as given (not checked, as pydantic's)."""
        new = type(self).__new__(type(self))
        setter = object.__setattr__
        for name in self.field_names():
            setter(new, name, getattr(self, name, None))
        extra = dict(self.model_extra)
        for key, value in (update or {}).items():
            if key in self._names():
                setter(new, key, value)
            else:
                extra[key] = value
        setter(new, "_extra", extra or None)
        keys = self.model_fields_set | frozenset(update or ())
        setter(new, "_set", keys if extra else _shared_keys(keys))
        return new

    def _fields(self) -> Iterator[tuple[str, Any]]:
        for name in self.field_names():
            yield name, getattr(self, name, None)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, FileModel)
        return list(self._fields()) == list(other._fields()) and self.model_extra == other.model_extra

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models

    def __repr__(self) -> str:
        shown = [f"{k}={v!r}" for k, v in self._fields()] + [f"{k}={v!r}" for k, v in self.model_extra.items()]
        return f"{type(self).__name__}({', '.join(shown)})"


_KEY_SETS: dict[frozenset[str], frozenset[str]] = {}


def _shared_keys(keys: frozenset[str]) -> frozenset[str]:
    """One object for every equal set of declared keys: the models of one file kind are read with
    the same keys, and a set of a dozen names is ~700 bytes (2 MiB at 1000 rounds' states and
    entries; pickled once per distinct set). Only declared names come here (a set with unknown keys
    keeps its own: a workspace cannot fill this table)."""
    if len(_KEY_SETS) > 4096:
        return keys
    return _KEY_SETS.setdefault(keys, keys)


def _json_safe(value: Any) -> Any:
    """An unknown key's value as pydantic's JSON mode dumps an untyped one: NaN and infinities
    as None (strict JSON has no such number), lists and dicts copied."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


def _dumped(value: Any, mode: str = "python") -> Any:
    if isinstance(value, FileModel):
        return value.model_dump(mode=mode)
    if isinstance(value, list):
        return [_dumped(v, mode) for v in value]
    if isinstance(value, dict):
        return {k: _dumped(v, mode) for k, v in value.items()}
    return value
