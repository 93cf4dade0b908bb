"""What one file's scan collects: the options it runs with and `FileScan`, which turns raw hits into
positioned findings (a rule's verdict for sites without a syntax tree included)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from migrator.catalogue import units
from migrator.catalogue.loader import Catalogue, Rule
from migrator.engine.census_perf import TracedPerf
from migrator.engine.extension_facts import ExtensionFacts
from migrator.ground.config import RuleSelector
from migrator.ground.globs import compile_globs
from migrator.ground.kinds import FixKind
from migrator.ground.model import CoverageInfo, EffortNote, Finding, ImportInfo

if TYPE_CHECKING:
    import pathspec


@dataclass(frozen=True)
class ScanOptions:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    soc: str = "A2"
    torch_npu_version: str | None = None
    traced: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (API, dtypes) from .migrate/op-trace.json
    target: str = "npu"  # what fixability is judged for (a rule's precheck depends on it)
    training_dtypes: tuple[str, ...] = ()  # bf16 / fp16 when the scanned tree trains in them (op verdicts)
    extensions: ExtensionFacts = ExtensionFacts()  # the tree's own CUDA extensions (engine/extension_inventory.py)
    census_perf: tuple[TracedPerf, ...] = ()  # the perf lint's census sites from .migrate/op-trace.json

    def selector_for(self, rel: str) -> RuleSelector:
        extra: list[str] = []
        for glob, codes in self.per_file_ignores:
            if _glob(glob).match_file(rel):
                extra.extend(codes)
        return RuleSelector(self.select, self.ignore + tuple(extra))


@lru_cache(maxsize=256)
def _glob(pattern: str) -> pathspec.PathSpec:
    return compile_globs([pattern])[0]


class FileScan:
    """Collects findings for one file and turns raw hits into positioned Findings."""

    def __init__(self, rel: str, catalogue: Catalogue, selector: RuleSelector, options: ScanOptions | None = None,
                 kind: str = "python"):
        self.rel = rel
        self.kind = kind
        self.options = options or ScanOptions()
        self.catalogue = catalogue
        self.selector = selector
        self.findings: list[Finding] = []
        self.training_sensitive = False  # an op verdict here depends on the tree's training dtypes

    def enabled(self, rule: Rule) -> bool:
        return self.selector.enabled(rule.code, rule.default_enabled)

    def add(
        self,
        rule: Rule | None,
        line: int,
        column: int,
        end_line: int,
        end_column: int,
        symbol: str,
        replacement: str | None = None,
        ambiguous: bool = False,
        message: str | None = None,
        coverage: CoverageInfo | None = None,
        manual_reason: str | None = None,
        prechecked: bool = False,
        imported: ImportInfo | None = None,
        effort: EffortNote | None = None,
    ) -> None:
        if rule is None or not self.enabled(rule):
            return
        text = message or rule.message_for(symbol, replacement)
        if not prechecked and not manual_reason and not ambiguous and rule.fix_info(symbol, replacement):
            manual_reason = self.precheck(rule, symbol)
        fix = None if ambiguous or manual_reason else rule.fix_info(symbol, replacement)
        if ambiguous:
            text += " (the name is bound by several imports, so no automatic fix)"
        elif manual_reason and rule.fix_kind != FixKind.MANUAL:
            text += f" ({manual_reason})"
        self.findings.append(
            Finding(
                code=rule.code,
                name=rule.name,
                family=rule.family,
                severity=rule.severity,
                path=self.rel,
                line=line,
                column=column,
                end_line=end_line,
                end_column=end_column,
                symbol=symbol,
                message=text,
                fix=fix,
                coverage=coverage,
                declined=manual_reason if manual_reason and not ambiguous and rule.fix_info(symbol, replacement) else None,
                imported=imported,
                effort=effort,
            )
        )

    def precheck(self, rule: Rule, symbol: str) -> str | None:
        """A site with no syntax tree (launch script, config, Dockerfile, requirements file, setup.py
        requirement string): the rule's verdict for this file kind and target."""
        return units.text_reason(rule, symbol, self.options.target, self.kind)

    def meta(self, impl: str, message: str, line: int = 1, column: int = 1) -> None:
        self.add(self.catalogue.impl_rule(impl), line, column, line, column, self.rel, message=message)

    def rule_for_key(self, key: str, replacement: str | None) -> tuple[Rule | None, str | None]:
        kind, _, name = key.partition(":")
        if kind == "impl":
            return self.catalogue.impl_rule(name), replacement
        hit = self.catalogue.match_symbol(name)
        return (hit.rule, hit.replacement) if hit else (None, None)
