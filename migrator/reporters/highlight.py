"""Syntax highlighting for the HTML report with pygments' lexers (no external assets).

Everything that comes from a user's file passes through `migrator.ground.safe_text.visible()` (control
characters, ANSI escapes, bidi overrides and undecodable bytes become visible placeholders) and is
HTML-escaped here; the result is `markupsafe.Markup` of `<span class="tk-...">` runs and nothing
else. Classes, not pygments' inline styles: the page's stylesheet colours them, and its
Content-Security-Policy needs no style attribute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pygments.lexer import Lexer

from collections.abc import Sequence
from functools import cache, lru_cache

from markupsafe import Markup, escape

from migrator.ground.safe_text import visible

__all__ = ["highlight", "highlight_block", "highlight_spans", "language", "visible"]

# our language names -> pygments lexer aliases
LEXERS = {"python": "python", "shell": "bash", "c": "cuda", "toml": "toml", "text": "text"}
FENCE_LANGUAGES = {"py": "python", "python": "python", "bash": "shell", "sh": "shell", "shell": "shell",
                   "toml": "toml", "cuda": "c", "cpp": "c", "c": "c"}


@cache
def _lexer(lang: str) -> Lexer:
    from pygments.lexers import get_lexer_by_name

    # keep the text as given: no stripped or added newlines, tabs untouched
    return get_lexer_by_name(LEXERS.get(lang, "text"), stripnl=False, ensurenl=False, stripall=False)


@lru_cache(maxsize=256)
def _css_class(ttype: Any, lang: str) -> str | None:  # ttype: a pygments _TokenType
    """The report's class for a pygments token type (its nearest listed ancestor), or None."""
    from pygments import token as t

    table: tuple[tuple[t._TokenType, str], ...] = (
        (t.Comment.Preproc, "tk-d"), (t.Comment.PreprocFile, "tk-s"), (t.Comment, "tk-c"),
        (t.String, "tk-s"), (t.Number, "tk-n"), (t.Keyword, "tk-k"), (t.Operator.Word, "tk-k"),
        (t.Name.Decorator, "tk-d"), (t.Name.Variable, "tk-v"),
    )
    if lang == "shell":  # export, source, set ...: the shell's words, coloured as keywords
        table += ((t.Name.Builtin, "tk-k"),)
    for kind, css in table:
        if ttype in kind:
            return css
    return None


def language(path: str) -> str:
    name = path.rsplit("/", 1)[-1].lower()
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix in ("py", "pyi"):
        return "python"
    if suffix in ("sh", "bash", "zsh"):
        return "shell"
    if suffix in ("cu", "cuh", "c", "cc", "cpp", "h", "hpp"):
        return "c"
    if suffix == "toml":
        return "toml"
    return "text"


@lru_cache(maxsize=1 << 16)  # diffs and excerpts repeat lines (context, imports); lexing is the cost
def _tokens(line: str, lang: str) -> tuple[tuple[str | None, str], ...]:
    """(class, text) runs whose texts add up to `line` exactly (the raw text, made visible later)."""
    if not line:
        return ()
    out: list[tuple[str | None, str]] = []
    # lexed with its line end, as in the file (some lexers' comment rules need one), then dropped
    for ttype, value in _lexer(lang).get_tokens(line + "\n"):
        css = _css_class(ttype, lang)
        if out and out[-1][0] == css:
            out[-1] = (css, out[-1][1] + value)
        elif value:
            out.append((css, value))
    css, last = out[-1]
    out[-1] = (css, last[:-1])
    return tuple(out if out[-1][1] else out[:-1])


def _html(runs: Sequence[tuple[str | None, str]]) -> str:
    """Each run made visible and escaped; control characters never reach the page."""
    return "".join(f'<span class="{css}">{escape(visible(text))}</span>' if css else str(escape(visible(text)))
                   for css, text in runs)


def highlight(text: str, lang: str = "python") -> Markup:
    """One line (or a block, line by line) of source as escaped HTML with token spans."""
    return Markup("\n".join(_html(_tokens(line, lang)) for line in text.split("\n")))


def _cut(runs: Sequence[tuple[str | None, str]], start: int, end: int) -> list[tuple[str | None, str]]:
    """The part of the runs between character offsets start and end."""
    out, pos = [], 0
    for css, text in runs:
        a, b = max(start, pos), min(end, pos + len(text))
        if a < b:
            out.append((css, text[a - pos : b - pos]))
        pos += len(text)
    return out


def highlight_spans(line: str, spans: list[tuple[int, int]], lang: str) -> Markup:
    """A source line with the 0-based [start, end) character ranges wrapped in `<mark>`; the line is
    tokenised whole, so a mark inside a string or a name does not change how the rest is coloured."""
    cuts: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        start = max(0, min(start, len(line)))
        end = max(start, min(end, len(line)))
        if cuts and start < cuts[-1][1]:
            cuts[-1] = (cuts[-1][0], max(cuts[-1][1], end))
        elif end > start:
            cuts.append((start, end))
    runs = _tokens(line, lang)
    out, pos = [], 0
    for start, end in cuts:
        out.append(_html(_cut(runs, pos, start)))
        out.append('<mark class="hit">' + _html(_cut(runs, start, end)) + "</mark>")
        pos = end
    out.append(_html(_cut(runs, pos, len(line))))
    return Markup("".join(out))


def highlight_block(code: str, lang: str | None, attrs: object = None) -> str:
    """`markdown-it` highlight hook: a fenced block's code as escaped, highlighted HTML."""
    ours = FENCE_LANGUAGES.get((lang or "").lower(), "text")
    return f'<pre class="code"><code>{highlight(code.rstrip(chr(10)), ours)}</code></pre>\n'
