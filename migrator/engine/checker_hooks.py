"""What the Python checker asks of the rule units' modules: their detectors, gates and the names and words they
declare, the same for every module of a catalogue, so found once per catalogue (not per file)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from migrator.catalogue import units
from migrator.catalogue.loader import Catalogue
from migrator.engine import extension_builds
from migrator.engine.string_words import string_gate

if TYPE_CHECKING:
    from migrator.catalogue.protocols import AttributeDetector, CallDetector, CompareDetector, StringDetector


class CatalogueHooks(NamedTuple):
    """What the checker asks of the rule units, the same for every module of a catalogue (found once per catalogue)."""

    detect_call: tuple[CallDetector, ...]
    unnamed_triggers: tuple[frozenset[str], frozenset[str]] | None  # when a callee no import names needs them
    named_triggers: tuple[frozenset[str], frozenset[str], frozenset[str]] | None  # ... and one an import names
    detected_names: frozenset[str] | None  # `_callee`: whether the detectors act on a callee by its name
    detect_string: tuple[StringDetector, ...]
    string_gate: Callable[[str], object] | None
    detect_compare: tuple[CompareDetector, ...]
    detect_attribute: tuple[AttributeDetector, ...]
    attribute_names: frozenset[str] | None  # None: every attribute is shown to the detectors


_HOOKS: dict[str, CatalogueHooks] = {}  # by the catalogue's digest, as `units` keeps what they are made of


def catalogue_hooks(catalogue: Catalogue) -> CatalogueHooks:
    """The catalogue's hooks, found at its first module."""
    hooks = _HOOKS.get(catalogue.digest)
    if hooks is not None:
        return hooks
    named = units.named_callee_triggers(catalogue)
    hooks = _HOOKS[catalogue.digest] = CatalogueHooks(
        units.detectors(catalogue, "call"), units.unnamed_callee_triggers(catalogue), named,
        None if named is None else named[0] | extension_builds.CALLEE_NAMES, units.detectors(catalogue, "string"),
        string_gate(catalogue), units.detectors(catalogue, "compare"), units.detectors(catalogue, "attribute"),
        units.attribute_names(catalogue))
    return hooks
