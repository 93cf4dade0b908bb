"""The effort model of the report: what a person still has to do, and the minutes for each, with provenance.

    action   = one manual site of a rule: a finding without an automatic fix that no route covers,
               at warning or error level; except
                 - an import counts once per library and repository (its files listed:
                   `import triton` in ten files is one port of triton, not ten), and not at
                   all in a file whose use of the name is an action (one edit),
                 - an op-coverage finding counts once per distinct op in the run
                   (an unsupported op is worked around once, not per call site),
                 - a rule with `effort.per: file` counts once per file (CUDA graphs: a feature),
                   one with `effort.per: symbol` once per distinct symbol (an extension binding is
                   routed once, in its wrapper, whichever files call it)
    minutes  = the rule's `effort.minutes` in rules/<family>.yaml (the family default unless the rule
               sets its own), printed with its one-line `why` (`migrate rule CODE`, the report); a
               finding that carries its own `effort` (a CUDA file: its kernels by size and by what is
               left, engine/extension_facts.py) counts that instead
    optional = an import inside `try: ... except ImportError:` with a fallback: listed separately,
               OPTIONAL_MINUTES once per library (check that the fallback path runs on Ascend)
    no effort: automatic fixes (`migrate fix` applies them; numerics fixes are checked by
               `migrate validate`), findings a framework route covers (`--route`), info-level notes
               (partial / unverified ops, cuDNN flags, ...): grouped in the report, never actions;
               advice on speed (fusion, perf families): the report's "Performance on Ascend".
    role     = the file's path role (production, script, example, test, docs: `Finding.role`, from the
               packaging metadata, layout conventions and `[tool.migrate] path-roles`); the total counts
               all, production first, and the report and JSON say how much is which (`by_role`; `by_scope`
               groups the roles as production / tests / extensions, as before roles existed).

Op-coverage findings are actions only when actionable: unsupported (OPS002), CPU fallback (OPS003),
float64 (OPS001/OPS006) and, with an op census (`.migrate/op-trace.json`), a traced dtype outside the
documented set (reported as OPS002 by the coverage checker). Calibration against the samples' golden
ports: docs/effort.md. A planning aid for the order of magnitude, not a promise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migrator.catalogue.loader import Catalogue

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from migrator.ground.model import FAMILIES, Finding, is_advice
from migrator.ground.path_roles import ROLES, convention_role

OPTIONAL_MINUTES = 5.0
PER_DISTINCT_OP = "coverage"
DEFAULT_MINUTES = 15.0  # a finding whose code the catalogue does not know (an old record or baseline)


@dataclass(frozen=True)
class Action:
    """One thing a person does: a rule's site, a file's import of a library, or an op."""

    code: str
    unit: str  # "site" | "import" (a file's imports of one library) | "file" / "symbol" (rules with that `per`) | "op"
    minutes: float
    findings: tuple[Finding, ...]

    @property
    def first(self) -> Finding:
        return self.findings[0]


@lru_cache(maxsize=1)
def _catalogue() -> Catalogue:
    from migrator.catalogue.loader import load_catalogue

    return load_catalogue()


def rule_minutes(code: str) -> tuple[float, str]:
    """(minutes, why) for one action of `code`, from the catalogue."""
    rule = _catalogue().get(code)
    if rule is None:
        return DEFAULT_MINUTES, "not in this catalogue (a finding from an older record or baseline)"
    return rule.effort.minutes, rule.effort.why


def _per(code: str) -> str:
    rule = _catalogue().get(code)
    return rule.effort.per if rule is not None else "site"


def kind(f: Finding) -> str:
    """auto | covered | advice | note | optional | action. Advice on speed (fusion, perf) is no porting
    work: the report lists it under "Performance on Ascend", outside the manual effort (as the scan's
    summary and exit code already treat it)."""
    if f.fix is not None:
        return "auto"
    if f.route is not None and f.route.absorbs:
        return "covered"
    if is_advice(f):
        return "advice"
    if f.severity == "info":
        return "note"
    if f.imported is not None and f.imported.optional:
        return "optional"
    return "action"


# The coarser grouping of roles the JSON's `by_scope` has always had.
SCOPES = ("production", "tests", "extensions")
SCOPE_OF_ROLE = {"production": "production", "test": "tests", "script": "extensions", "example": "extensions",
                 "docs": "extensions"}


def role(f: Finding) -> str:
    """The finding's path role; from the path's conventions when the scan gave none (a result read back)."""
    return f.role or convention_role(f.path) or "production"


def scope(path: str) -> str:
    """production | tests | extensions, from the path alone (`tests/`, `test_*.py`; `examples/`, `tools/`...)."""
    return SCOPE_OF_ROLE[convention_role(path) or "production"]


def _unit_key(f: Finding) -> tuple[str, tuple]:
    if f.family == PER_DISTINCT_OP:
        return "op", (f.code, f.symbol)
    if f.imported is not None:  # a library is ported once per repository, whichever files import it
        return "import", (f.code, f.imported.library)
    per = _per(f.code)
    if per == "file":
        return "file", (f.code, f.path)
    if per == "symbol":
        return "symbol", (f.code, f.symbol)
    if _library_use(f):  # `pynvml.nvmlInit()`: part of porting the library, with its imports
        return "import", (f.code, use_library(f.symbol))
    return "site", (f.code, f.path, f.cell, f.line, f.symbol)  # the same name twice on a line: one edit


def _optionally_imported(findings: list[Finding]) -> set[tuple[str, str]]:
    """(file, library) pairs where every import of the library in that file is optional."""
    every: dict[tuple[str, str], bool] = {}
    for f in findings:
        if f.imported is not None:
            key = (f.path, f.imported.library)
            every[key] = every.get(key, True) and f.imported.optional
    return {key for key, optional in every.items() if optional}


def use_library(symbol: str) -> str:
    """The library a use belongs to, as its import counts it (`torch.ops.xformers.x` is xformers')."""
    parts = symbol.split(".")
    return parts[2] if parts[:2] == ["torch", "ops"] and len(parts) > 2 else parts[0]


def _library_use(f: Finding) -> bool:
    """A use (not the import) of a `scope: library` rule's name."""
    rule = _catalogue().get(f.code) if f.imported is None else None
    return rule is not None and rule.scope == "library"


def _guarded_member(f: Finding, optional: set[tuple[str, str]]) -> bool:
    """A `scope: library` use (`te.pytorch.fp8_autocast`) in a file that imports its library only optionally:
    it runs only where that import succeeded, so it goes with the optional import (the fallback is what runs
    on Ascend), not with an edit of its own."""
    return bool(optional) and _library_use(f) and (f.path, use_library(f.symbol)) in optional


def actions(findings: Iterable[Finding]) -> list[Action]:
    """The actions in `findings`, in the order of their first finding. A file's import of a name whose
    use in the same file is an action too is part of that edit (the import line goes with the use)."""
    findings = list(findings)
    fixed_uses = _fixed_uses(findings)
    optional = _optionally_imported(findings)
    grouped: dict[tuple, list[Finding]] = {}
    units: dict[tuple, str] = {}
    for f in findings:
        if kind(f) != "action" or _goes_with_fixes(f, fixed_uses) or _guarded_member(f, optional):
            continue
        unit, key = _unit_key(f)
        grouped.setdefault(key, []).append(f)
        units[key] = unit
    used: dict[tuple[str, str], tuple] = {}
    for key, fs in grouped.items():
        if units[key] in ("site", "file", "symbol"):
            used.setdefault((fs[0].code, fs[0].path), key)
    for key in [k for k in grouped if units[k] == "import"]:
        rest: list[Finding] = []
        for f in grouped[key]:  # a file whose use of the library is an edit: its import goes with that edit
            owner = used.get((f.code, f.path))
            (grouped[owner] if owner is not None else rest).append(f)
        if rest:
            grouped[key] = rest
        else:
            del grouped[key]
    return [Action(fs[0].code, units[key], _minutes(fs), tuple(fs)) for key, fs in grouped.items()]


def _minutes(findings: list[Finding]) -> float:
    """An action's minutes: its finding's own figure where it carries one, else the rule's."""
    own = findings[0].effort
    return own.minutes if own is not None else rule_minutes(findings[0].code)[0]


def action_role(action: Action) -> str:
    """The role an action is charged to: the first of ROLES (production first) among its files."""
    found = {role(f) for f in action.findings}
    return next(r for r in ROLES if r in found)


def action_scope(action: Action) -> str:
    return SCOPE_OF_ROLE[action_role(action)]


def _split(findings: Iterable[Finding], names: tuple[str, ...], of: Callable[[Action], str]) -> dict[str, dict]:
    count = dict.fromkeys(names, 0)
    minutes = dict.fromkeys(names, 0.0)
    files: dict[str, set[str]] = {s: set() for s in names}
    for a in actions(findings):
        where = of(a)
        count[where] += 1
        minutes[where] += a.minutes
        files[where].update(f.path for f in a.findings)
    return {s: {"actions": count[s], "minutes": minutes[s], "files": sorted(files[s])} for s in names}


def by_role(findings: Iterable[Finding]) -> dict[str, dict]:
    """Per role, production first: actions, minutes and the files they touch."""
    return _split(findings, ROLES, action_role)


def by_scope(findings: Iterable[Finding]) -> dict[str, dict]:
    """`by_role` grouped as production / tests / extensions."""
    return _split(findings, SCOPES, action_scope)


def scope_line(findings: Iterable[Finding]) -> str:
    """`production 2.5 h (12 actions) · script 1 h (2) · example 1 h (4) · test 30 min (3)`; empty roles left out."""
    parts = [f"{r} {human(row['minutes'])} ({row['actions']})" for r, row in by_role(findings).items() if row["actions"]]
    return " · ".join(parts)


def _fixed_uses(findings: list[Finding]) -> dict[str, set[str]]:
    """path -> symbols used there that `migrate fix` rewrites (not imports)."""
    out: dict[str, set[str]] = {}
    for f in findings:
        if f.fix is not None and f.imported is None:
            out.setdefault(f.path, set()).add(f.symbol)
    return out


def _goes_with_fixes(f: Finding, fixed_uses: dict[str, set[str]]) -> bool:
    """A manual import (`from apex import amp`) in a file whose uses of that name the fixer rewrites
    (`amp.initialize`, `amp.scale_loss`): the fixer drops the import with them (the golden ports show it)."""
    if f.imported is None:
        return False
    return any(sym == f.symbol or sym.startswith(f.symbol + ".") for sym in fixed_uses.get(f.path, ()))


def optional_imports(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if kind(f) == "optional"]


def notes(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if kind(f) == "note"]


def advice(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if kind(f) == "advice"]


def optional_minutes(findings: Iterable[Finding]) -> float:
    libraries = {f.imported.library for f in optional_imports(findings) if f.imported}
    return OPTIONAL_MINUTES * len(libraries)


def total(findings: Iterable[Finding]) -> float:
    findings = list(findings)
    return sum(a.minutes for a in actions(findings)) + optional_minutes(findings)


def human(mins: float) -> str:
    """`45 min`, `2.5 h`, `3 d` (8-hour days) - rounded, for a planning figure."""
    if mins <= 0:
        return "0 min"
    if mins < 60:
        return f"{round(mins)} min"
    hours = mins / 60
    if hours < 16:
        return f"{round(hours * 2) / 2:g} h"
    return f"{round(hours / 8 * 2) / 2:g} d"


def model_rows(codes: Iterable[str] | None = None) -> list[dict]:
    """The model as table rows (family defaults, then the rules of `codes` that set their own figure),
    for the report's "how this is estimated" section and the JSON."""
    catalogue = _catalogue()
    rows = []
    for fam in FAMILIES:
        rules = catalogue.by_family(fam)
        default = next((r.effort for r in rules if r.effort.source == "family"), None)
        if default is not None:
            rows.append({"scope": fam, "minutes": default.minutes, "why": default.why, "source": f"rules/{fam}.yaml"})
    for code in sorted(set(codes or ())):
        rule = catalogue.get(code)
        if rule is not None and rule.effort.source == "rule":
            rows.append({"scope": code, "minutes": rule.effort.minutes, "why": rule.effort.why,
                         "source": f"rules/{rule.family}.yaml"})
    return rows


MODEL_TEXT = (
    "Effort counts actions only: manual findings (no automatic fix, not covered by a framework route) at warning "
    "or error level. An import counts once per library in the repository (its files listed), an op-coverage "
    "finding once per distinct op (unsupported, CPU fallback, float64, or a traced dtype outside the documented set). Each action costs its "
    "rule's minutes from the catalogue (rules/<family>.yaml: the family default unless the rule sets its own, "
    "each with a one-line reason; `migrate rule CODE` shows it). Optional imports (inside `try/except ImportError` "
    f"with a fallback) are listed separately at {OPTIONAL_MINUTES:g} min per library, to check the fallback runs. "
    "Automatic fixes, covered findings, info-level notes and advice on speed (fusion, perf) cost nothing here. "
    "Calibrated on the samples' golden "
    "ports (docs/effort.md); the total is split by the files' roles, production code first, then scripts "
    "(benchmarks, tools), examples, tests and docs (from the packaging metadata and the layout; `[tool.migrate] "
    "path-roles` overrides); h = hours, d = 8-hour days; an order of magnitude, not a promise."
)


def to_json(findings: Iterable[Finding]) -> dict:
    """The `effort` block of `scan --format json`: total, actions per rule, optional imports, the model."""
    findings = list(findings)
    acts = actions(findings)
    per_code: dict[str, list[Action]] = {}
    for a in acts:
        per_code.setdefault(a.code, []).append(a)
    optional = optional_imports(findings)
    return {
        "minutes": total(findings),
        "actions": len(acts),
        "by_rule": [
            {"code": code, "actions": len(items), "minutes_each": items[0].minutes,
             "minutes": sum(a.minutes for a in items), "unit": items[0].unit, "why": rule_minutes(code)[1]}
            for code, items in sorted(per_code.items())
        ],
        "by_scope": by_scope(findings),
        "by_role": by_role(findings),
        "imports": [
            {"code": a.code, "library": a.first.imported.library if a.first.imported else None,
             "minutes": a.minutes, "scope": action_scope(a), "role": action_role(a),
             "files": sorted({f.path for f in a.findings})}
            for a in acts if a.unit == "import"
        ],
        "optional_imports": {
            "findings": len(optional),
            "libraries": sorted({f.imported.library for f in optional if f.imported}),
            "minutes": optional_minutes(findings),
        },
        "notes": len(notes(findings)),
        "model": MODEL_TEXT,
    }
