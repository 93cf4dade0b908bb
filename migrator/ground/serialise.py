"""The one serialiser between our frozen dataclasses and JSON data: a `cattrs` converter per mode.

`to_data(obj)` turns a dataclass (findings, run results, the fix record) into JSON-ready lists and
dicts; `from_data(data, cls, source)` reads one back strictly: an unknown key, a missing field or a
wrong type is a `SerialiseError` naming the source and the field (`$.files[0].edits[2].code: ...`).
How each class is written (renamed keys, fields left out when absent) is registered by the module
that owns the class, through `register` — this module knows no class of its own.

Writing needs no `cattrs`: `to_data` follows the same registrations read as plain field plans (cattrs'
import and its generated code were a tenth of a short scan's CPU); a test holds it to the converter's
output. Reading (`from_data`) imports `cattrs` on first use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from migrator.ground.jsonfile import JsonObject

if TYPE_CHECKING:
    from cattrs import Converter

__all__ = ["SerialiseError", "bare_converter", "from_data", "register", "shape", "to_data", "to_object"]

T = TypeVar("T")

# (converter) -> None: each registers the hooks of one module's classes, in the order they were added
_REGISTRATIONS: list[Callable[[Converter], None]] = []


class SerialiseError(ValueError):
    """Data that does not fit its dataclass; the message names the source and the field."""


def register(hooks: Callable[[Converter], None]) -> Callable[[Converter], None]:
    """Decorator: `hooks(converter)` is run on every converter made from now on (and the caches cleared)."""
    _REGISTRATIONS.append(hooks)
    converter.cache_clear()
    _plans.cache_clear()
    return hooks


@cache
def converter(extra_keys: str = "refuse") -> Converter:
    """The converter: `extra_keys="refuse"` (strict, the default) or `"ignore"` (a reader that
    documents unknown keys as ignored, such as `migrate report` for the fix record)."""
    conv = bare_converter(extra_keys)
    for hooks in _REGISTRATIONS:
        hooks(conv)
    return conv


def bare_converter(extra_keys: str = "refuse") -> Converter:
    """A new converter with this module's rules (scalars never converted, tuples written as lists) and
    none of the registered classes: for a layer that registers its own (the validation records)."""
    from cattrs import Converter

    conv = Converter(forbid_extra_keys=extra_keys == "refuse", unstruct_collection_overrides={tuple: list})
    for kind in (str, int, float, bool):
        conv.register_structure_hook(kind, _exactly(kind))
    return conv


def _exactly(kind: type) -> Callable[[object, type], object]:
    """A scalar taken as it is, never converted (cattrs would turn "3" into 3 and 1 into True). A value of
    a subclass (`torch.__version__` is a `str`) is taken as its plain value; `bool` is never an `int`."""

    def structure(value: object, wanted: type) -> object:
        if isinstance(wanted, type) and issubclass(wanted, Enum):  # a `str` enum reaches the `str` hook
            return wanted(value)  # a member, or refused
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {kind.__name__}, found bool {value!r}")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {kind.__name__}, found {type(value).__name__} {value!r:.40}")
        return value if type(value) is kind else kind.__new__(kind, value)  # the plain value of a subclass

    return structure


def shape(conv: Converter, cls: type, *, rename: dict[str, str] | None = None, always: tuple[str, ...] = (),
          omit_absent: bool = True, write: dict[str, Callable[[Any], Any]] | None = None) -> None:
    """Register how `cls` is written and read: fields in declaration order, a field at its default left
    out (`omit_absent`) unless named in `always`, keys renamed by `rename` (field -> key), a field's
    value written by its own function in `write` (field -> function)."""
    renames, writers = rename or {}, write or {}
    if isinstance(conv, _Plans):
        conv[cls] = _plan(cls, renames, always, omit_absent, writers)
        return
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    out: dict[str, Any] = {name: override(rename=renames.get(name), omit_if_default=False if name in always else None,
                          unstruct_hook=writers.get(name))
           for name in {*renames, *always, *writers}}
    into: dict[str, Any] = {name: override(rename=key) for name, key in renames.items()}
    # factories: a class's code is generated on its first use, not for every class when the converter is made
    conv.register_unstructure_hook_factory(
        lambda t: t is cls, lambda t: make_dict_unstructure_fn(cls, conv, _cattrs_omit_if_default=omit_absent, **out))
    conv.register_structure_hook_factory(
        lambda t: t is cls,
        lambda t: make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=conv.forbid_extra_keys, **into))


def to_data(obj: object) -> Any:
    """JSON-ready data (dicts, lists, strings, numbers) for a registered dataclass: what the converter's
    `unstructure` gives, without cattrs."""
    return _plain(obj, _plans())


class _Field(NamedTuple):
    name: str
    key: str
    default: Any  # `_KEEP`: always written; a `_Factory`: compared with a fresh value; else the value
    writer: Callable[[Any], Any] | None


class _Factory(NamedTuple):
    make: Callable[[], Any]


_KEEP = object()


class _Plans(dict):
    """Stands in for a converter when the registrations are read as plain plans: `shape` fills it."""


@cache
def _plans() -> _Plans:
    plans = _Plans()
    for hooks in _REGISTRATIONS:
        hooks(plans)  # type: ignore[arg-type]  # `shape` is all the hooks call
    return plans


def _plan(cls: type, renames: dict[str, str], always: tuple[str, ...], omit_absent: bool,
          writers: dict[str, Callable[[Any], Any]]) -> tuple[_Field, ...]:
    """How `cls` is written, as cattrs' `make_dict_unstructure_fn` writes it: the fields always written
    first, then those left out at their default (a factory's fresh value) when `omit_absent` and not
    named in `always`, each group in declaration order; fields outside `__init__` never."""
    kept: list[_Field] = []
    optional: list[_Field] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default: Any = _KEEP
        if omit_absent and f.name not in always:
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = _Factory(f.default_factory)
        (kept if default is _KEEP else optional).append(_Field(f.name, renames.get(f.name, f.name), default,
                                                               writers.get(f.name)))
    return (*kept, *optional)


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _plain(value: Any, plans: _Plans) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    plan = plans.get(kind)
    if plan is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        plan = plans[kind] = _plan(kind, {}, (), False, {})  # an unregistered class: every field
    if plan is not None:
        out = {}
        for name, key, default, writer in plan:
            field_value = getattr(value, name)
            if default is not _KEEP and field_value == (default.make() if isinstance(default, _Factory) else default):
                continue
            if writer is not None:
                out[key] = writer(field_value)
            elif type(field_value) in _SCALARS:  # most fields: no call
                out[key] = field_value
            else:
                out[key] = _plain(field_value, plans)
        return out
    if isinstance(value, (list, tuple)):
        return [item if type(item) in _SCALARS else _plain(item, plans) for item in value]
    if isinstance(value, dict):
        return {_plain(k, plans): _plain(v, plans) for k, v in value.items()}
    if isinstance(value, Enum) and not isinstance(value, str):
        return value.value
    return value  # a `str` subclass (a `str` enum), as the converter leaves it


def to_object(obj: object) -> JsonObject:
    """`to_data` of a dataclass: always a JSON object."""
    data = to_data(obj)
    assert isinstance(data, dict), type(obj)
    return data


def from_data(data: object, cls: type[T], source: str, extra_keys: str = "refuse") -> T:
    """`data` read as `cls`; raises SerialiseError naming `source` and the first field that is wrong."""
    from cattrs import transform_error
    from cattrs.errors import BaseValidationError

    if not isinstance(data, dict):
        raise SerialiseError(f"{source}: expected a JSON object, found {type(data).__name__}")
    try:
        return converter(extra_keys).structure(data, cls)
    except BaseValidationError as exc:
        problems = [f"{where}: {what}" for what, _, where in (p.rpartition(" @ ") for p in transform_error(exc, path="$"))]
        raise SerialiseError(f"{source}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")) from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a hook refusing a value
        raise SerialiseError(f"{source}: {exc}") from None
