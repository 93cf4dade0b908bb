"""`migrate ops NAME` for an API outside torch: the catalogue rules that cover it, as JSON-ready dicts."""

from __future__ import annotations

from migrator.catalogue.loader import Catalogue


def _first_sentence(text: str) -> str:
    # "use instead" runs to a paragraph; the lookup shows its opening, `migrate rule` the rest
    head = " ".join(text.split())
    cut = head.find(". ")
    return head if cut < 0 else head[:cut + 1]


def covering_rules(name: str, catalogue: Catalogue) -> list[dict]:
    """One record per rule naming `name` (bare or dotted): code, name, the symbol matched, the
    replacement (the rename, else the rule's "use instead") and the command that says more."""
    out = []
    for match in catalogue.covering(name):
        rule = match.rule
        out.append({
            "code": rule.code,
            "name": rule.name,
            "symbol": match.pattern,
            "fix": rule.fix_kind,
            "replacement": match.replacement or _first_sentence(rule.docs.use_instead) or None,
            "see": f"migrate rule {rule.code}",
        })
    return out
