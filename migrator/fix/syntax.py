"""Where a rewrite may stand: the syntax rules a fix result must obey in its context.

An expression that is fine on its own is not always valid where it lands: a `case` pattern takes
only literals and dotted names, an f-string replacement field (before Python 3.12) cannot hold its
own quote or a backslash, an assignment target cannot be a comparison. The fixer declines such a
site with the reason from here instead of writing code that would not parse. Form feeds in
indentation, which libcst does not round-trip, are normalised before parsing.
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import cast

import libcst as cst

from migrator.catalogue.site import PATTERN_REASON  # noqa: F401  (re-exported: the rule prechecks decline with it too)

PATTERN_LITERALS = (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float, cst.Imaginary)
FSTRING_REASON = "the rewrite needs a quote or backslash the enclosing f-string cannot hold before Python 3.12"
STATEMENT_REASON = "the rewrite is not valid Python at this site (e.g. an assignment target): rewrite it by hand"


def code_of(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _dotted(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def fits_pattern(original: cst.CSTNode, new: cst.CSTNode) -> bool:
    """Whether `new` may replace the value `original` in a `case` pattern, with the same meaning.

    A bare name there captures instead of comparing, so a dotted name may not become one."""
    if isinstance(new, PATTERN_LITERALS):
        return True
    if isinstance(new, cst.Attribute):
        return _dotted(new)
    if isinstance(new, cst.Name):
        return isinstance(original, cst.Name)
    if isinstance(new, cst.UnaryOperation) and isinstance(new.operator, cst.Minus):
        return isinstance(new.expression, (cst.Integer, cst.Float, cst.Imaginary))
    return False


def fstring_quote(node: cst.FormattedString) -> str:
    """The closing quote of an f-string: `"`, `'`, `\"\"\"` or `'''`."""
    return node.end


def fits_fstring(original: cst.CSTNode, new: cst.CSTNode, quotes: list[str]) -> bool:
    """Whether `new` can sit in the replacement fields of f-strings closed by `quotes` before 3.12
    (unless the original already needed 3.12 there)."""
    old_code, new_code = code_of(original), code_of(new)
    for bad in [*quotes, "\\"]:
        if bad in new_code and bad not in old_code:
            return False
    return True


class _Requote(cst.CSTTransformer):
    def __init__(self, avoid: set[str]):
        super().__init__()
        self.avoid = avoid

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        value = updated.value
        start = len(value) - len(value.lstrip("rRbBuU"))
        prefix, quoted = value[:start], value[start:]
        quote, body = quoted[0], quoted[1:-1]
        other = "'" if quote == '"' else '"'
        if quoted[:3] == quote * 3 or quote not in self.avoid or other in self.avoid or other in body or "\\" in body:
            return updated
        return updated.with_changes(value=f"{prefix}{other}{body}{other}")


def requote(node: cst.CSTNode, quotes: list[str]) -> cst.CSTNode:
    """`node` with its single-quoted strings in the quote character the enclosing f-strings do not use."""
    new = node.visit(_Requote({q[0] for q in quotes}))
    return new if isinstance(new, cst.CSTNode) else node


class _EmptyBlocks(cst.CSTTransformer):
    """Every indented block becomes `pass`: what is left of a compound statement is its headers."""

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return False

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])], footer=[])


def parses_alone(statement: cst.CSTNode, module: cst.Module) -> bool:
    """Whether `statement` is valid Python on its own. A compound statement is judged by its
    headers only (decorators, tests, `with` items, `except` types, ...): the statements in its
    blocks are judged on their own, and rendering a 2 000-line class per rewrite was the largest
    cost of `fix` on megatron-core."""
    if isinstance(statement, cst.BaseCompoundStatement):
        statement = cast(cst.CSTNode, statement.visit(_EmptyBlocks()))  # blocks emptied, never removed
    try:
        ast.parse(module.code_for_node(statement))
    except (SyntaxError, ValueError):
        return False
    return True


def normalise_form_feeds(text: str) -> tuple[str, dict[int, int]]:
    """Drop form feeds from the indentation of lines that hold code, where libcst loses or
    misplaces them (it folds the first one into the module's indent unit, so inserted code would
    inherit it). Python ignores what precedes the last form feed in an indentation, so the
    meaning is unchanged. Returns the text and, per changed line (1-based), how many leading
    characters were removed. Blank form-feed lines (page breaks) are kept."""
    if "\x0c" not in text:
        return text, {}
    lines = io.StringIO(text).readlines()  # not str.splitlines: it splits at form feeds too
    removed: dict[int, int] = {}
    try:
        tokens = list(tokenize.generate_tokens(iter(lines).__next__))
    except (tokenize.TokenError, SyntaxError):
        return text, {}
    seen: set[int] = set()
    for tok in tokens:
        line_no, col = tok.start
        if line_no in seen or tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        seen.add(line_no)
        if line_no > len(lines):
            continue
        prefix = lines[line_no - 1][:col]
        if "\x0c" in prefix and not prefix.strip(" \t\x0c"):
            kept = prefix.rsplit("\x0c", 1)[1]
            removed[line_no] = len(prefix) - len(kept)
            lines[line_no - 1] = kept + lines[line_no - 1][col:]
    return "".join(lines), removed


def keep_final_cr(before: str, after: str) -> str:
    """`after` ending with the lone `\\r` that ended `before`: libcst drops a file's final lone CR (after the
    last line, or as the last line's only ending), and the fix changes no byte it did not mean to."""
    if before.endswith("\r") and not after.endswith("\r"):
        return after + "\r"
    return after
