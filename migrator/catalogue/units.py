"""The registry of rule units: a rule's Python module, found by a name derived from the rule itself,
and the one `precheck` scan and fix both call.

A rule with `fix: unit` in family F named N (`rules/F.yaml`) is `migrator/rules/F/<N with _ for ->.py`
(DEV012 `cuda-device-string` is `migrator/rules/device/cuda_device_string.py`); `fix: rename` is the
shared `migrator/rules/rename.py`; `fix: none` has no module. The module implements
`migrator.catalogue.protocols.RuleUnit`. Units sit above engine/ and fix/, which reach them only through
this registry (importlib by the derived name), so no static import runs up from a lower floor.

A `fix: unit` whose module does not exist is a catalogue error when the catalogue is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from typing import Literal, cast, overload

from migrator.catalogue.protocols import (
    DETECTOR_KINDS,
    AttributeDetector,
    CallDetector,
    CompareDetector,
    Detector,
    RuleRef,
    RulesRef,
    RuleUnit,
    StringDetector,
)
from migrator.catalogue.site import FIXABLE, PATTERN_REASON, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

UNITS_PACKAGE = "migrator.rules"
RENAME_UNIT = f"{UNITS_PACKAGE}.rename"
FIX_VALUES = ("none", "rename", "unit")

# the text and config fixers rewrite for the npu target only
CONFIG_PORTABLE = "configs are rewritten for the npu target only"
TEXT_PORTABLE = "launch scripts are rewritten for the npu target only"


def unit_module(family: str, name: str) -> str:
    """The dotted module of the unit of rule `name` in `family` (`fix: unit`)."""
    return f"{UNITS_PACKAGE}.{family}.{name.replace('-', '_')}"


def module_name(family: str, name: str, fix: str) -> str | None:
    """The dotted module a rule's `fix:` leads to (None for `none`)."""
    if fix == "rename":
        return RENAME_UNIT
    if fix == "unit":
        return unit_module(family, name)
    return None


def module_path(dotted: str) -> str:
    """`migrator.rules.device.cuda_device_string` -> `migrator/rules/device/cuda_device_string.py`."""
    return dotted.replace(".", "/") + ".py"


def exists(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:
        return False


@cache
def _load(dotted: str) -> RuleUnit:
    return cast(RuleUnit, importlib.import_module(dotted))


def unit(rule: RuleRef) -> RuleUnit | None:
    name = module_name(rule.family, rule.name, rule.fix)
    return _load(name) if name else None


def level(rule: RuleRef) -> str:
    mod = unit(rule)
    return getattr(mod, "LEVEL", "node") if mod is not None else "node"


def detector_of(rule: RuleRef, kind: str) -> Detector | None:
    """The unit's `detect_<kind>` hook, if the rule is a pattern rule whose unit has one."""
    mod = unit(rule) if rule.impl else None
    return cast("Detector | None", getattr(mod, f"detect_{kind}", None))


_DETECTORS: dict[tuple[str, str], tuple[Detector, ...]] = {}


@overload
def detectors(catalogue: RulesRef, kind: Literal["call"]) -> tuple[CallDetector, ...]: ...
@overload
def detectors(catalogue: RulesRef, kind: Literal["string"]) -> tuple[StringDetector, ...]: ...
@overload
def detectors(catalogue: RulesRef, kind: Literal["compare"]) -> tuple[CompareDetector, ...]: ...
@overload
def detectors(catalogue: RulesRef, kind: Literal["attribute"]) -> tuple[AttributeDetector, ...]: ...


def detectors(catalogue: RulesRef, kind: str) -> tuple[Detector, ...]:
    """The `detect_<kind>` functions (`DETECTOR_KINDS`) of the catalogue's pattern rules whose unit has
    one, each once (units of one family may share a detector): the scanner calls them from its single
    `ast` traversal."""
    if kind not in DETECTOR_KINDS:
        raise ValueError(f"no detector kind {kind!r} (one of {', '.join(DETECTOR_KINDS)})")
    key = (catalogue.digest, kind)
    if key not in _DETECTORS:
        found: dict[str, Detector] = {}
        for rule in catalogue.rules.values():
            hook = detector_of(rule, kind)
            if hook is not None and hook not in found.values():
                found[f"{hook.__module__}.{hook.__qualname__}"] = hook
        _DETECTORS[key] = tuple(found[n] for n in sorted(found))
    return _DETECTORS[key]


_UNNAMED: dict[str, tuple[frozenset[str], frozenset[str]] | None] = {}


def unnamed_callee_triggers(catalogue: RulesRef) -> tuple[frozenset[str], frozenset[str]] | None:
    """(method names, keywords): where a call's callee no import names, the call detectors act only on a method
    call of one of these names or on a call passing one of these keywords (each unit's `UNNAMED_CALLEE`), so the
    scanner need not call them on other such calls; None when a unit with `detect_call` does not say."""
    if catalogue.digest not in _UNNAMED:
        methods: set[str] = set()
        keywords: set[str] = set()
        found: tuple[frozenset[str], frozenset[str]] | None = None
        for hook in detectors(catalogue, "call"):
            declared = getattr(importlib.import_module(hook.__module__), "UNNAMED_CALLEE", None)
            if declared is None:
                break
            methods.update(declared[0])
            keywords.update(declared[1])
        else:
            found = (frozenset(methods), frozenset(keywords))
        _UNNAMED[catalogue.digest] = found
    return _UNNAMED[catalogue.digest]


_NAMED: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]] | None] = {}


def named_callee_triggers(catalogue: RulesRef) -> tuple[frozenset[str], frozenset[str], frozenset[str]] | None:
    """(qualified names, method names, keywords): where an import names a call's callee, the call detectors act only
    on a callee of one of these names, a method call of one of these methods or a call passing one of these keywords
    (each unit's `NAMED_CALLEE`); None when a unit with `detect_call` does not say."""
    if catalogue.digest not in _NAMED:
        declared = [getattr(importlib.import_module(hook.__module__), "NAMED_CALLEE", None)
                    for hook in detectors(catalogue, "call")]
        found = [d for d in declared if d is not None]
        _NAMED[catalogue.digest] = None if len(found) < len(declared) else (
            frozenset().union(*(d[0] for d in found)), frozenset().union(*(d[1] for d in found)),
            frozenset().union(*(d[2] for d in found)))
    return _NAMED[catalogue.digest]


_DECLARED: dict[tuple[str, str], frozenset[str] | None] = {}


def _declared(catalogue: RulesRef, kind: Literal["string", "attribute"], name: str) -> frozenset[str] | None:
    """The union of what the units with a `detect_<kind>` declare as `name`; None when one does not say."""
    key = (catalogue.digest, name)
    if key not in _DECLARED:
        words: set[str] = set()
        found: frozenset[str] | None = None
        for hook in detectors(catalogue, kind):
            declared = getattr(importlib.import_module(hook.__module__), name, None)
            if declared is None:
                break
            words.update(declared)
        else:
            found = frozenset(words)
        _DECLARED[key] = found
    return _DECLARED[key]


def string_words(catalogue: RulesRef) -> frozenset[str] | None:
    """Words (lower case) one of which a string's lowered text must hold for a string detector to act on it (each
    unit's `STRING_WORDS`), so the scanner need not call the detectors on other strings; None when a unit with
    `detect_string` does not say."""
    return _declared(catalogue, "string", "STRING_WORDS")


def attribute_names(catalogue: RulesRef) -> frozenset[str] | None:
    """The attribute names (`x.is_cuda`: "is_cuda") an attribute detector acts on (each unit's `ATTRIBUTE_NAMES`),
    so the scanner need not call the detectors on other attributes; None when a unit with `detect_attribute` does
    not say."""
    return _declared(catalogue, "attribute", "ATTRIBUTE_NAMES")


def text_reason(rule: RuleRef, symbol: str, target: str, file_kind: str) -> str | None:
    """Why a site with no syntax tree (a launch script line, a config scalar) is not fixed, or None."""
    verdict = precheck(rule, CallSite(rule.code, symbol, target, file_kind))
    return verdict.reason if isinstance(verdict, Declined) else None


BUILD_FILE_REASON = ("a build file (setup.py) names CUDA libraries and flags: port the build by hand (HCCL and the"
                     " CANN libraries, torch_npu.utils.cpp_extension.NpuExtension), not by renaming the string")


BYTES_REASON = ("a bytes literal (a pickled or binary buffer): the code around it counts on its length and bytes"
                " (`b\"npu:0\"` is one byte shorter than `b\"cuda:0\"`); port the buffer handling by hand")


def precheck(rule: RuleRef, site: CallSite) -> Verdict:
    """Can the fixer rewrite this site? The one answer for `scan` and `fix`."""
    mod = unit(rule)
    if site.file_kind != "python":  # a config, launch script, Dockerfile, requirements file ...
        check = getattr(mod, "precheck_text", None) if mod is not None else None
        if check is None:
            if site.target == Target.NPU:
                return FIXABLE
            return Declined(CONFIG_PORTABLE if site.file_kind == "config" else TEXT_PORTABLE)
        return cast(Verdict, check(site))
    if site.in_pattern and site.target != Target.NPU:  # portable rewrites are calls, which no pattern takes
        return Declined(PATTERN_REASON)
    if site.build_file and site.string:  # `libraries.append("nccl")`: a token swap would not port the build
        return Declined(BUILD_FILE_REASON)
    if site.string == "bytes":  # `buf.find(b"cuda") + 5`: offsets into a pickled device name
        return Declined(BYTES_REASON)
    if mod is None:
        return FIXABLE
    return mod.precheck(site)
