"""The advisor's fusion patterns matched on the census's data flow (parent side, standard library).

A pattern such as ``(chunk)-neg-cat-(mul){0,2}-add`` matches a chain of traced ops in which each op
consumed the one before it (`flow.Flow`: an op's inputs are the ops that made its tensors), so the ops
that build an operand beside the chain (a mask's `eq`, a slice of a buffer) do not break it. The
advisor lists some ops in their in-place form (`masked_fill_`): an op and its in-place form are taken
as one. A match is reported at the user line of its last op, once per (line, fused API); ops run
inside a CUDA library's CPU stand-in (apex FusedRMSNorm, flash_attn) are the library's, never a match.
`torch.addmm`'s `mul-mul-add` matches only where a matrix product feeds the chain: `beta * M + alpha *
(A @ B)`; on elementwise products (a rotary's `t * cos * scale + ...`, x-transformers) there is none to fuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .advisor_rules import AdvisorRule

Node = Mapping[str, Any]


@dataclass(frozen=True)
class FlowMatch:
    rule: AdvisorRule
    path: str
    line: int
    function: str
    ops: tuple[str, ...]  # the matched chain, first op first
    lines: tuple[tuple[str, int], ...] = ()  # each chain op's user (path, line), where it has one


def same_op(traced: str, listed: str) -> bool:
    return traced == listed or traced.rstrip("_") == listed.rstrip("_")


def _tokens(rule: AdvisorRule) -> list[tuple[str, bool]]:
    """(op, optional) per op slot: `(mul){0,2}` is two optional slots."""
    out: list[tuple[str, bool]] = []
    for step in rule.steps:
        out.extend((step.op, False) for _ in range(step.low))
        out.extend((step.op, True) for _ in range(step.high - step.low))
    return out


class _Matcher:
    def __init__(self, nodes: Sequence[Node], tokens: list[tuple[str, bool]]) -> None:
        self.nodes = nodes
        self.tokens = tokens
        self.memo: dict[tuple[int, int], tuple[int, ...] | None] = {}

    def skippable(self, first: int, last: int) -> bool:
        return all(optional for _, optional in self.tokens[first:last + 1])

    def ends_at(self, index: int, token: int) -> tuple[int, ...] | None:
        """A chain ending at node `index`, that node filling slot `token` and every slot before it
        filled by the chain or optional: the chain's node indexes, first first; None if there is none."""
        key = (index, token)
        if key not in self.memo:
            self.memo[key] = self._chain(index, token)
        return self.memo[key]

    def _chain(self, index: int, token: int) -> tuple[int, ...] | None:
        if not same_op(str(self.nodes[index].get("op", "")), self.tokens[token][0]):
            return None
        for producer in (int(p) for p in self.nodes[index].get("inputs", ())):
            if not 0 <= producer < index:
                continue
            for earlier in range(token - 1, -1, -1):  # the producer fills slot `earlier`; those between are skipped
                chain = self.ends_at(producer, earlier)
                if chain is not None:
                    return chain + (index,)
                if not self.tokens[earlier][1]:
                    break  # a required slot cannot be skipped
        return (index,) if self.skippable(0, token - 1) else None

    def match_at(self, index: int) -> tuple[int, ...] | None:
        """The chain of a match whose last op is node `index` (trailing optional slots may stay empty)."""
        last = len(self.tokens) - 1
        for token in range(last, -1, -1):
            chain = self.ends_at(index, token)
            if chain is not None:
                return chain
            if not self.tokens[token][1]:
                break
        return None


# fused APIs whose chain must be fed by one of these ops (the pattern alone also matches elementwise code)
FED_BY = {"torch.addmm": frozenset({"mm", "matmul", "bmm", "addmm", "linear"})}


def _fed(nodes: Sequence[Node], chain: tuple[int, ...], producers: frozenset[str]) -> bool:
    inputs = {int(p) for i in chain for p in nodes[i].get("inputs", ()) if 0 <= int(p) < len(nodes)}
    return any(str(nodes[p].get("op", "")) in producers for p in inputs)


def match_flow(nodes: Sequence[Node], rules: Sequence[AdvisorRule]) -> list[FlowMatch]:
    """Every rule's matches on the flow, one per (user line, fused API), in flow order."""
    seen: set[tuple[str, int, str]] = set()
    found: list[tuple[int, FlowMatch]] = []
    for rule in rules:
        matcher = _Matcher(nodes, _tokens(rule))
        for index, node in enumerate(nodes):
            if "path" not in node:
                continue  # no user frame: inside a library, not a line the user can change
            chain = matcher.match_at(index)
            if chain is None or any(nodes[i].get("reference") for i in chain):
                continue  # no match, or ops of a CUDA library's CPU stand-in (its NPU mapping is a rule's)
            if rule.fused_api in FED_BY and not _fed(nodes, chain, FED_BY[rule.fused_api]):
                continue
            key = (str(node["path"]), int(node["line"]), rule.fused_api)
            if key in seen:
                continue
            seen.add(key)
            ops = tuple(str(nodes[i].get("op", "")) for i in chain)
            lines = tuple(dict.fromkeys((str(nodes[i]["path"]), int(nodes[i]["line"])) for i in chain if "path" in nodes[i]))
            found.append((index, FlowMatch(rule, key[0], key[1], str(node.get("function", "")), ops, lines)))
    return [m for _, m in sorted(found, key=lambda pair: pair[0])]
