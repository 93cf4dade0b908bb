"""The contracts between the floors: what a rule unit module provides (`RuleUnit`, read by the
registry in `units`), and the checker facade its detectors talk to (`Checker`, implemented by the
scanner's `engine/python_checker.py`). Typed here, on the ground floor, so engine/ and fix/ depend on
the contract and never import a unit.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from migrator.catalogue.site import CallSite, Verdict

if TYPE_CHECKING:
    from migrator.ground.model import Finding


class RuleRef(Protocol):
    """What the registry reads of a rule (`migrator.catalogue.loader.Rule`) to find its unit."""

    @property
    def code(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def fix(self) -> str: ...
    @property
    def impl(self) -> str | None: ...


class RulesRef(Protocol):
    """What the registry reads of a catalogue (`migrator.catalogue.loader.Catalogue`)."""

    @property
    def digest(self) -> str: ...
    @property
    def rules(self) -> Mapping[str, RuleRef]: ...


class Checker(Protocol):
    """What a detector may do with the scanner: report a finding of a pattern rule (by its `impl:` name),
    claim a node so no other check reports it, and ask what qualified names a node spells."""

    def emit(self, impl: str, node: ast.AST, symbol: str, replacement: str | None = None) -> None: ...

    def claim(self, node: ast.AST) -> None: ...

    def qualnames(self, node: ast.AST) -> set[str]: ...

    def built_by(self, node: ast.AST) -> set[str]:
        """Qualified names of the calls assigned to this expression's text in its function (or module)."""
        ...

    def module_calls(self) -> set[str]:
        """Qualified names of every call assigned to something in the module."""
        ...


CallDetector = Callable[[Checker, ast.Call, set[str], dict[str, ast.expr]], None]
StringDetector = Callable[[Checker, ast.AST, str], None]
CompareDetector = Callable[[Checker, ast.Compare], None]
AttributeDetector = Callable[[Checker, ast.Attribute], None]
Detector = CallDetector | StringDetector | CompareDetector | AttributeDetector
DETECTOR_KINDS = ("call", "string", "compare", "attribute")  # `detect_<kind>` hooks of a unit


class RuleUnit(Protocol):
    """A rule's module, `migrator/rules/<family>/<name>.py` (`migrator/rules/rename.py` for `fix: rename`).

    `LEVEL`: "node" (the finding's own node is rewritten), "call" (the whole call whose callee is the
    finding), "either" (the call when called, the bare name otherwise), "argument" (the finding is a
    keyword's value: `fix` gets the whole `cst.Arg` and may drop it) or "module" (`fix_module(ctx, module,
    tree, finding)` instead of `fix`: rewrites the whole module, finding what it changes by name;
    `migrator/fix/module_fixes.py`). `precheck` is pure Python on
    the parser-neutral site; `fix` is the libcst rewrite (libcst imported inside it), run only where
    `precheck` said Fixable, returning the new node or a `Declined`. Optional hooks, looked up by name:
    `precheck_text(site)` for sites with no syntax tree and `detect_<kind>` (`DETECTOR_KINDS`) for a
    pattern rule's detection in the scanner's one `ast` traversal.
    """

    LEVEL: str

    def precheck(self, site: CallSite) -> Verdict: ...

    def fix(self, ctx: Any, node: Any, finding: Finding, rule: Any) -> Any: ...
