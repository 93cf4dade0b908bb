"""Checks one Python module: the checker's one traversal (`engine/python_checker.py`), then the passes over
the whole module: the advice families (fusion, perf), which match whole functions, Triton's kernels and
launches construct by construct, and each fixable hit's precheck."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from migrator.catalogue.loader import Catalogue, Rule
from migrator.engine.python_checker import PythonChecker
from migrator.engine.source import SourceText

if TYPE_CHECKING:
    from migrator.engine.text_words import WordsPresent


def check_module(
    tree: ast.AST, source: SourceText, catalogue: Catalogue, enabled: Callable[[Rule], bool], target: str = "npu",
    build_file: bool = False, package_init: bool = False,
) -> PythonChecker:
    """Every rule's hits in the module; a hit its rule's precheck declines carries the reason."""
    from migrator.engine.sites import precheck_hits

    checker = PythonChecker(catalogue, enabled, tree, build_file, package_init)
    checker.visit(tree)
    advise(tree, source.text, checker, lambda: source.lines)  # lines split only where a hot region is
    triton(tree, checker)
    precheck_hits(checker, source, tree, target)
    checker.finish()
    return checker


# a hand-written pattern a fused op replaces names one of these (the eager attention its softmax)
FUSION_WORDS = ("rsqrt", "silu", "rotate_half", "softmax")
MATMUL_WORDS = ("@", "matmul", "bmm")  # how eager attention's matmuls are spelled (`fusion_checker.MATMUL`, `@`)
TRANSPOSE_WORDS = ("transpose", "mT")  # eager attention's key, transposed (`fusion_attention._transposed`)


def advise(tree: ast.AST, text: str, checker: PythonChecker, lines: Callable[[], Sequence[str]] | None = None,
           ) -> None:
    """The advice families (fusion, perf): whole-function patterns, so a pass of their own over the tree,
    skipped where the module's text cannot hold them (they cost more than the rest of the scan otherwise)."""
    from migrator.engine import perf_checker

    def on(family: str) -> bool:
        return any(checker.enabled(r) for r in checker.catalogue.by_family(family))

    def emit(impl: str, node: ast.AST, symbol: str, replacement: str) -> None:
        checker.emit_impl(impl, node, symbol, replacement)

    present = advice_words()(text)  # every word a gate below asks about, in one pass over the text
    if on("fusion") and not present.isdisjoint(FUSION_WORDS):
        _fusion(text, checker, emit, present, lines)
    if on("perf"):
        perf_checker.check(tree, text, checker.qualnames, emit,
                           perf_checker.Structure(checker.functions, checker.loops, checker.backward_lines,
                                                  checker.mask_lines),
                           lines, checker.aliases, present)


def _fusion(text: str, checker: PythonChecker, emit: Callable[[str, ast.AST, str, str], None],
            present: AbstractSet[str], lines: Callable[[], Sequence[str]] | None) -> None:
    """The fusion detectors on each function whose lines name a pattern's word (`_FusionGate`)."""
    from migrator.engine import fusion_attention, fusion_checker

    gate = _FusionGate(text, checker.aliases, present, lines)
    mentions = gate.mentions
    for func in checker.functions:
        last = func.end_lineno or func.lineno
        if not mentions.within(func.lineno, last):
            continue  # no word of a pattern in this function's lines: nothing to build a Body for
        first = min([func.lineno, *(d.lineno for d in func.decorator_list)])  # its decorators' nodes are its own

        def named(word: str, first: int = first, last: int = last) -> bool:
            return mentions.naming(word).within(first, last)

        if gate.by_word and not gate.may_match(named, first, last):
            continue
        fusion_checker.detect_all(fusion_checker.Body(func, checker.qualnames), emit, fusion_attention.attention,
                                  named if gate.by_word else None)


class _FusionGate:
    """Whether a detector could match in a function, from the words on its lines; only for an ASCII text
    (`by_word`: else an identifier may be spelled otherwise in the text (NFKC), and every detector runs)."""

    def __init__(self, text: str, aliases: Mapping[str, Iterable[str]], present: AbstractSet[str],
                 lines: Callable[[], Sequence[str]] | None) -> None:
        self.text, self.aliases, self.lines = text, aliases, lines
        self.mentions = _lines_naming(text, FUSION_WORDS, aliases, present)
        self.by_word = text.isascii()
        self.matmuls: _Mentions | None = None  # the lines naming a matmul, once a function names softmax alone
        self.transposes: _Mentions | None = None  # and those naming a transpose, once one names a matmul besides

    def may_match(self, named: Callable[[str], bool], first: int, last: int) -> bool:
        """Beside RMSNorm's and SwiGLU's own words: rotary matches a sum of products (`+`, `*`) with
        `rotate_half`, attention a matmul of the softmax and one of a transposed key (`fusion_attention`)."""
        if named("rsqrt") or named("silu"):
            return True
        if named("rotate_half") and (self.lines is None or _has_products(self.lines(), first, last)):
            return True
        if not named("softmax"):
            return False
        self.matmuls = self.matmuls or _lines_naming(self.text, MATMUL_WORDS, self.aliases)
        if not self.matmuls.within(first, last):
            return False
        self.transposes = self.transposes or _lines_naming(self.text, TRANSPOSE_WORDS, {})
        return self.transposes.within(first, last)


def _has_products(lines: Sequence[str], first: int, last: int) -> bool:
    """Whether the lines hold a `+` and a `*` (a `BinOp` is spelled with its operator)."""
    segment = "\n".join(lines[first - 1:last])
    return "+" in segment and "*" in segment


_ADVICE_WORDS: list[WordsPresent] = []


def advice_words() -> WordsPresent:
    """The words `advise`'s gates ask a module's text about: the fusion patterns' and the perf lint's."""
    if not _ADVICE_WORDS:
        from migrator.engine import perf_checker
        from migrator.engine.text_words import WordsPresent

        _ADVICE_WORDS.append(WordsPresent((*FUSION_WORDS, *perf_checker.TEXT_WORDS)))
    return _ADVICE_WORDS[0]


class _LineSet:
    """Sorted line numbers; whether any lies in a closed range (one bisect)."""

    def __init__(self, lines: list[int]) -> None:
        self.lines = lines

    def within(self, first: int, last: int) -> bool:
        i = bisect.bisect_left(self.lines, first)
        return i < len(self.lines) and self.lines[i] <= last


class _Mentions(_LineSet):
    """The lines naming any of the words (`within`), and those naming each one (`naming(word)`)."""

    def __init__(self, by_word: dict[str, _LineSet]) -> None:
        super().__init__(sorted(set().union(*(found.lines for found in by_word.values()))))
        self.by_word = by_word

    def naming(self, word: str) -> _LineSet:
        return self.by_word[word]


def _lines_naming(text: str, words: tuple[str, ...], aliases: Mapping[str, Iterable[str]],
                  present: AbstractSet[str] | None = None) -> _Mentions:
    """The lines holding one of `words`, or a local name imported as something that holds one
    (`from torch import rsqrt as r`); and, word by word, those holding it or such a name of it.
    `present`: the words the text holds, where known (the others are not searched for)."""
    by_word = {}
    for word in words:
        lines: set[int] = set()
        spelled = {word} if present is None or word in present else set()
        for name in spelled | {local for local, bound in aliases.items() if any(word in b for b in bound)}:
            lines.update(_lines_holding(text, name))
        by_word[word] = _LineSet(sorted(lines))
    return _Mentions(by_word)


def _lines_holding(text: str, name: str) -> list[int]:
    """The numbers of the lines (1 + the newlines before) where `name` occurs, each once, in order."""
    lines: list[int] = []
    line, start = 1, 0
    while (at := text.find(name, start)) != -1:
        line += text.count("\n", start, at)
        lines.append(line)
        end = text.find("\n", at)  # the line's other occurrences add nothing
        if end == -1:
            break
        start, line = end + 1, line + 1
    return lines


def triton(tree: ast.AST, checker: PythonChecker) -> None:
    """Triton kernels and their launches, construct by construct (KERN016-KERN020)."""
    if not checker.aliases.keys() or not any("triton" in b for bs in checker.aliases.values() for b in bs):
        return
    from migrator.engine import triton_kernels, triton_launch  # (and Triton-Ascend's table) where triton is imported
    from migrator.engine.node_walk import walk_nodes

    def emit(impl: str, node: ast.AST, symbol: str, replacement: str, /, **extra: Any) -> None:
        checker.emit_impl(impl, node, symbol, replacement, **{k: v for k, v in extra.items() if v is not None})

    nodes = walk_nodes(tree)  # one walk for the passes over every node (`ast.walk`'s, less contexts and operators)
    kernels = triton_kernels.check_module(tree, checker.qualnames, emit, nodes)
    triton_launch.check_configs(tree, checker.qualnames, emit, nodes)
    triton_launch.check_launches(tree, kernels, checker.qualnames, emit, nodes)
