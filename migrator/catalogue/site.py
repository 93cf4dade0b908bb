"""The parser-neutral record of one finding's site, and a rule's verdict on it.

`scan` builds a `CallSite` from the `ast` tree, `fix` from the libcst tree; a rule's `precheck`
sees only this record, so both ask the same question and get the same answer: a site is fixable
in the scan exactly when the fixer rewrites it, and a declined site carries the same reason in both.
Kept free of libcst and torch (the scanner imports it).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class _NotLiteral:
    def __repr__(self) -> str:
        return "<expression>"


NOT_LITERAL: Any = _NotLiteral()  # an argument whose value is not a Python literal


@dataclass(frozen=True)
class Arg:
    keyword: str | None  # None: positional
    value: Any  # the literal value, or NOT_LITERAL
    text: str  # its source text
    star: str = ""  # "*" or "**"


@dataclass(frozen=True)
class CallSite:
    code: str  # the rule
    symbol: str  # the finding's symbol (a qualified name, a string, `.cuda()`, ...)
    target: str = "npu"  # npu | portable
    file_kind: str = "python"  # python | shell | config | dockerfile | requirements | ...
    text: str = ""  # the source text of the finding's node
    string: str = ""  # a string literal node: "plain", "fstring", "concat" (implicit concatenation) or "bytes"
    pieces: tuple[tuple[str, str], ...] = ()  # an f-string: ("text", source) / ("expr", "plain" | "formatted")
    called: bool = False  # the node is called (it is a call's callee, or the call itself)
    args: tuple[Arg, ...] = ()  # the call's arguments
    replacement: str | None = None  # the catalogue's replacement name
    is_import: bool = False  # the site is an import alias
    root: tuple[str, ...] = ()  # a dotted use: its parts (`t.cuda.x` -> ("t", "cuda", "x"))
    root_names: frozenset[str] = field(default_factory=frozenset)  # what its first part is bound to
    operands: tuple[str, ...] = ()  # a comparison: the source text of each operand
    in_pattern: bool = False  # inside a `case` pattern (only literals and dotted names fit there)
    build_file: bool = False  # the file builds the package (`setup.py`): its strings name libraries and flags
    default_of_choices: bool = False  # the `default=` of a call that also passes `choices=` (argparse)
    guards: str = ""  # an availability check: the CUDA-only call it guards that stays manual (engine/guards.py)
    # an uncalled value: the call it is the first positional argument of (`getattr`, `functools.partial`,
    # resolved by `callee_name`) and that call's arguments; `assigned`: it is an assignment's whole value
    passed_to: str = ""
    passed_args: tuple[Arg, ...] = ()
    assigned: bool = False

    @property
    def star(self) -> bool:
        return any(a.star for a in self.args)

    @property
    def name(self) -> str:
        """The last part of the symbol: `apex.amp.initialize` -> `initialize`."""
        return self.symbol.rsplit(".", 1)[-1]

    def bind(self, params: list[str]) -> dict[str, Arg] | None:
        """Each argument by its parameter name; None for *args/**kwargs, unknown or repeated keywords."""
        places = bind_places([(a.keyword, bool(a.star)) for a in self.args], params)
        return None if places is None else {name: self.args[i] for name, i in places.items()}


def bind_places(args: list[tuple[str | None, bool]], params: list[str]) -> dict[str, int] | None:
    """Which argument (its place) each parameter gets, for arguments given as (keyword or None, starred);
    None for a starred argument, a positional one past ``params``, an unknown or repeated keyword. The
    scan's `CallSite.bind` and the fixer's libcst `bind` both ask this."""
    bound: dict[str, int] = {}
    for i, (keyword, star) in enumerate(args):
        if star:
            return None
        if keyword is None:
            if i >= len(params):
                return None
            bound[params[i]] = i
        elif keyword not in params or keyword in bound:
            return None
        else:
            bound[keyword] = i
    return bound


@dataclass(frozen=True)
class Fixable:
    pass


@dataclass(frozen=True)
class Declined:
    reason: str


Verdict = Fixable | Declined
FIXABLE = Fixable()

PATTERN_REASON = "a `case` pattern takes only literals and dotted names: match the device type in a guard instead"
STAR_IMPORT = "a star import binds names that cannot be renamed: import them by name"
VALUE_USE = "used as a value (a base class or a variable), not called: port it by hand"
STAR_ARGS = "called with *args/**kwargs, so the arguments cannot be mapped: port it by hand"


def needs_call(site: CallSite) -> Declined | None:
    """A fix that rewrites the whole call: the name alone, or arguments it cannot see, are manual."""
    if not site.called:
        return Declined(VALUE_USE)
    if site.star:
        return Declined(STAR_ARGS)
    return None


BUILTIN_CALLEES = frozenset({"getattr"})  # builtins a value-use rule asks about, when the module does not rebind them


def callee_name(parts: Sequence[str], aliases: Mapping[str, set[str]]) -> str:
    """The one qualified name a callee's dotted parts spell (`functools.partial`, `partial` after `from
    functools import partial`, the builtin `getattr`), or "" (unknown, or names that disagree). The scan
    passes `ast` parts, the fixer libcst's, so both name the call the same way."""
    if not parts:
        return ""
    if parts[0] in aliases:
        rest = "".join("." + p for p in parts[1:])
        names = {base + rest for base in aliases[parts[0]]}
        return names.pop() if len(names) == 1 else ""
    return parts[0] if len(parts) == 1 and parts[0] in BUILTIN_CALLEES else ""


def literal_of(text: str) -> Any:
    """The value of a literal's source text (`1e-3`, `(0.9, 0.999)`, `"O1"`), else NOT_LITERAL."""
    import ast

    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return NOT_LITERAL


def string_shape(text: str) -> str:
    """"plain", "fstring", "concat" (implicit concatenation) or "bytes" for a string literal's source text
    ("" if it is not one)."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text.strip()).readline)
                  if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT)]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return ""
    if not tokens or any(t.type != tokenize.STRING for t in tokens):
        return ""
    if len(tokens) > 1:
        return "concat"
    prefix = (m.group(0).lower() if (m := re.match(r"[A-Za-z]*", tokens[0].string)) else "")
    return "bytes" if "b" in prefix else "fstring" if "f" in prefix else "plain"


def unparenthesised(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and literal_of(text) is NOT_LITERAL:
        inner = text[1:-1].strip()
        if not inner or "," in inner:
            break
        text = inner
    return text


BUILD_FILES = frozenset({"setup.py"})


def is_build_file(path: str) -> bool:
    """`setup.py` (any folder): "nccl", "cuda" there name libraries, flags and paths of a build, not devices."""
    return path.rsplit("/", 1)[-1] in BUILD_FILES


def is_package_init(path: str) -> bool:
    """A package's `__init__.py`: its module-level imports are what `from pkg import name` gives importers."""
    return path.rsplit("/", 1)[-1] == "__init__.py"
