"""Fusion sites from both sources: the advisor's patterns on the census's data flow and the AST's FUS
findings (`engine/fusion_checker.py`) of the files the traced step ran. One site per place and fused
API; where only one source found it, `detail` says which and what the other saw."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .fusion_match import FlowMatch
from .model import FusionSite

AST_FUSED_API = {"FUS001": "torch_npu.npu_rms_norm", "FUS002": "torch_npu.npu_swiglu",
                 "FUS003": "torch_npu.npu_rotary_mul", "FUS004": "torch_npu.npu_fusion_attention"}


def ast_findings(root: Path, paths: Iterable[str]) -> list[tuple[str, int, str]]:
    """(path, line, code) of each FUS finding in these files (relative to the root)."""
    from migrator.engine.scan_file import ScanOptions, scan_file

    out: list[tuple[str, int, str]] = []
    for rel in sorted(set(paths)):
        path = root / rel
        if not rel.endswith(".py") or not path.is_file():
            continue
        result = scan_file(path, rel, "python", ScanOptions(select=("FUS",)))
        out.extend((f.path, f.line, f.code) for f in result.findings if f.code in AST_FUSED_API)
    return out


def _census_site(match: FlowMatch, ast_code: str | None, ast_line: int | None) -> FusionSite:
    if ast_code is not None:
        found_by, detail = "census+ast", f"the census and the AST ({ast_code}) agree"
    else:
        found_by = "census"
        detail = ("census only: the advisor pattern matched the traced ops; the AST checker has no "
                  f"pattern for {match.rule.fused_api}" if match.rule.fused_api not in AST_FUSED_API.values() else
                  "census only: the traced ops match, but the AST checker did not recognise the source "
                  "(the ops come from calls it cannot follow)")
    return FusionSite(match.rule.fused_api, match.path, match.line, match.function, found_by, match.rule.name,
                      match.ops, ast_code, ast_line, detail)


def agree(matches: Sequence[FlowMatch], ast: Sequence[tuple[str, int, str]]) -> tuple[FusionSite, ...]:
    """Join the two: an AST finding agrees with a census match of the same fused API whose chain
    holds the finding's line (the AST reports one node of the pattern, the census its last op)."""
    used: set[int] = set()
    sites = []
    for match in matches:
        partner = next((i for i, (path, line, code) in enumerate(ast)
                        if i not in used and AST_FUSED_API[code] == match.rule.fused_api
                        and ((path, line) in match.lines or (path, line) == (match.path, match.line))), None)
        if partner is not None:
            used.add(partner)
        code, line = (ast[partner][2], ast[partner][1]) if partner is not None else (None, None)
        sites.append(_census_site(match, code, line))
    for i, (path, line, code) in enumerate(ast):
        if i in used:
            continue
        sites.append(FusionSite(AST_FUSED_API[code], path, line, "", "ast", None, (), code, line,
                                "AST only: no advisor pattern matched the ops this line ran in the traced step "
                                "(the line did not run, or its ops do not form the pattern's chain)"))
    return tuple(sorted(sites, key=lambda s: (s.path, s.line, s.fused_api)))


def fusion_sites(flow: Sequence[object], ran: Iterable[str], root: Path) -> tuple[FusionSite, ...]:
    """The census's fusion sites: the pinned advisor rules on the traced flow, joined with the AST's
    findings in the files that ran (`ran`: user paths relative to `root`)."""
    from .advisor_rules import load_rules
    from .fusion_match import match_flow

    nodes = [node for node in flow if isinstance(node, Mapping)]
    return agree(match_flow(nodes, load_rules()), ast_findings(root, ran))
