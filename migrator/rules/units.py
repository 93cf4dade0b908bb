"""A rule's Python: the module its YAML `fix:` names, and the one `precheck` scan and fix both call.

`fix: rename` is `migrator/rules/rename.py`; `fix: "transform:<name>"` in family F is
`migrator/rules/F/<name with _ for ->.py`. Such a module holds

- `LEVEL`: "node" (the finding's own node is rewritten), "call" (the whole call whose callee is the
  finding) or "either" (the call when called, the bare name otherwise);
- `detect_call/string/compare/attribute(checker, node, ...)` for a pattern rule (`impl:`): what the
  scanner's one `ast` traversal reports, beyond the YAML's symbol names;
- `precheck(site) -> Fixable | Declined(reason)`: pure Python on a `migrator.rules.site.CallSite`,
  no parser; `migrate scan` and `migrate fix` both call it (`precheck_text` for launch scripts,
  configs and requirements files, which otherwise are rewritten for the npu target only);
- `fix(ctx, node, finding, rule)`: the libcst rewrite (libcst imported inside it), run only where
  `precheck` said Fixable; it returns the new node, or a `Declined` for a site it cannot rewrite.

A name with no module is a catalogue error when the catalogue is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from types import ModuleType
from typing import Any

from migrator.rules.site import FIXABLE, PATTERN_REASON, CallSite, Declined, Verdict

Rule = Any  # migrator.rules.catalogue.Rule (which imports this module to check `fix:` names)

# the text and config fixers rewrite for the npu target only
CONFIG_PORTABLE = "configs are rewritten for the npu target only"
TEXT_PORTABLE = "launch scripts are rewritten for the npu target only"


def module_name(family: str, fix: str) -> str | None:
    """The dotted module a `fix:` value names (None for `none`)."""
    if fix == "rename":
        return "migrator.rules.rename"
    if fix.startswith("transform:"):
        return f"migrator.rules.{family}.{fix.split(':', 1)[1].replace('-', '_')}"
    return None


def exists(family: str, fix: str) -> bool:
    name = module_name(family, fix)
    if name is None:
        return fix == "none"
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@cache
def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def unit(rule: Rule) -> ModuleType | None:
    name = module_name(rule.family, rule.fix)
    return _module(name) if name else None


def level(rule: Rule) -> str:
    mod = unit(rule)
    return getattr(mod, "LEVEL", "node") if mod is not None else "node"


_DETECTORS: dict[tuple[str, str], tuple] = {}


def detectors(catalogue: Any, kind: str) -> tuple:
    """The `detect_<kind>` functions (call, string, compare, attribute) of the catalogue's pattern rules
    (`impl:`) whose unit has one: the scanner calls them from its single `ast` traversal."""
    key = (catalogue.digest, kind)
    if key not in _DETECTORS:
        found: dict[str, Any] = {}
        for rule in catalogue.rules.values():
            name = module_name(rule.family, rule.fix) if rule.impl else None
            if name and name not in found and hasattr(mod := _module(name), f"detect_{kind}"):
                found[name] = getattr(mod, f"detect_{kind}")
        _DETECTORS[key] = tuple(found[n] for n in sorted(found))
    return _DETECTORS[key]


def text_reason(rule: Rule, symbol: str, target: str, file_kind: str) -> str | None:
    """Why a site with no syntax tree (a launch script line, a config scalar) is not fixed, or None."""
    verdict = precheck(rule, CallSite(rule.code, symbol, target, file_kind))
    return verdict.reason if isinstance(verdict, Declined) else None


BUILD_FILE_REASON = ("a build file (setup.py) names CUDA libraries and flags: port the build by hand (HCCL and the"
                     " CANN libraries, torch_npu.utils.cpp_extension.NpuExtension), not by renaming the string")


def precheck(rule: Rule, site: CallSite) -> Verdict:
    """Can the fixer rewrite this site? The one answer for `scan` and `fix`."""
    mod = unit(rule)
    if site.file_kind != "python":  # a config, launch script, Dockerfile, requirements file ...
        check = getattr(mod, "precheck_text", None) if mod is not None else None
        if check is None:
            return FIXABLE if site.target == "npu" else Declined(CONFIG_PORTABLE if site.file_kind == "config" else TEXT_PORTABLE)
        return check(site)
    if site.in_pattern and site.target != "npu":  # portable rewrites are calls, which no pattern takes
        return Declined(PATTERN_REASON)
    if site.build_file and site.string:  # `libraries.append("nccl")`: a token swap would not port the build
        return Declined(BUILD_FILE_REASON)
    check = getattr(mod, "precheck", None) if mod is not None else None
    if check is None:
        return FIXABLE
    return check(site)
