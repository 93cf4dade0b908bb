"""The one serialiser between our frozen dataclasses and JSON data: a `cattrs` converter per mode.

`to_data(obj)` turns a dataclass (findings, run results, the fix record) into JSON-ready lists and
dicts; `from_data(data, cls, source)` reads one back strictly: an unknown key, a missing field or a
wrong type is a `SerialiseError` naming the source and the field (`$.files[0].edits[2].code: ...`).
How each class is written (renamed keys, fields left out when absent) is registered by the module
that owns the class, through `register` — this module knows no class of its own.

`cattrs` is imported on first use: `migrate --help` and a cached scan never load it.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

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
    """Decorator: `hooks(converter)` is run on every converter made from now on (and the cache cleared)."""
    _REGISTRATIONS.append(hooks)
    converter.cache_clear()
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
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    renames, writers = rename or {}, write or {}
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
    """JSON-ready data (dicts, lists, strings, numbers) for a registered dataclass."""
    return converter().unstructure(obj)


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
