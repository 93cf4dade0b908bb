"""Tiny line-based syntax highlighting for the HTML report (no external assets, no pygments).

Everything that comes from a user's file passes through `migrator.safe_text.visible()` (control
characters, ANSI escapes, bidi overrides and undecodable bytes become visible placeholders) and is
HTML-escaped here; the result is `markupsafe.Markup` of `<span class="tk-...">` runs and nothing else.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from migrator.safe_text import visible

__all__ = ["highlight", "highlight_block", "highlight_spans", "language", "visible"]

PY_KEYWORDS = (
    "False None True and as assert async await break class continue def del elif else except finally "
    "for from global if import in is lambda nonlocal not or pass raise return try while with yield match case"
)
SH_KEYWORDS = "if then else elif fi for while until do done case esac in function export local return set unset source"
C_KEYWORDS = (
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "template typename namespace using class public private protected bool true false nullptr "
    "__global__ __device__ __host__ __shared__ __constant__"
)

_STRING = r"""(?P<string>[rRbBuUfF]{0,2}(?:\"\"\"|'''|"(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?))"""
_NUMBER = r"(?P<number>\b\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?[jJlLuUfF]?\b)"


def _lexer(comment: str, keywords: str, extra: str = "") -> re.Pattern:
    kw = "|".join(re.escape(k) for k in keywords.split())
    parts = [f"(?P<comment>{comment})", _STRING]
    if extra:
        parts.append(extra)
    parts += [_NUMBER, rf"(?P<keyword>(?<![\w.$])(?:{kw})(?![\w]))", r"(?P<name>[A-Za-z_]\w*)"]
    return re.compile("|".join(parts))


LEXERS = {
    "python": _lexer(r"#.*$", PY_KEYWORDS, r"(?P<decorator>@[\w.]+)"),
    "shell": _lexer(r"(?:(?<=\s)|^)#.*$", SH_KEYWORDS, r"(?P<variable>\$\{[^}]*\}|\$\w+)"),
    "c": _lexer(r"//.*$", C_KEYWORDS, r"(?P<decorator>^\s*#\s*\w+)"),
    "toml": re.compile(r"(?P<comment>#.*$)|" + _STRING + r"|(?P<keyword>^\s*\[[^\]]*\])|" + _NUMBER),
    "text": re.compile(r"(?P<comment>(?:(?<=\s)|^)#.*$)"),
}
CLASSES = {
    "comment": "tk-c",
    "string": "tk-s",
    "number": "tk-n",
    "keyword": "tk-k",
    "decorator": "tk-d",
    "variable": "tk-v",
}


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


def highlight(text: str, lang: str = "python") -> Markup:
    """One line (or a block) of source as escaped HTML with token spans."""
    lexer = LEXERS.get(lang, LEXERS["text"])
    out: list[str] = []
    for line_no, line in enumerate(text.split("\n")):
        if line_no:
            out.append("\n")
        line = visible(line)
        pos = 0
        for m in lexer.finditer(line):
            kind = m.lastgroup
            css = CLASSES.get(kind or "")
            if css is None:
                continue
            out.append(str(escape(line[pos : m.start()])))
            out.append(f'<span class="{css}">{escape(m.group())}</span>')
            pos = m.end()
        out.append(str(escape(line[pos:])))
    return Markup("".join(out))


def highlight_spans(line: str, spans: list[tuple[int, int]], lang: str) -> Markup:
    """A source line with the 0-based [start, end) character ranges wrapped in `<mark>`."""
    cuts: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        start = max(0, min(start, len(line)))
        end = max(start, min(end, len(line)))
        if cuts and start < cuts[-1][1]:
            cuts[-1] = (cuts[-1][0], max(cuts[-1][1], end))
        elif end > start:
            cuts.append((start, end))
    out, pos = [], 0
    for start, end in cuts:
        out.append(highlight(line[pos:start], lang))
        out.append(Markup('<mark class="hit">') + highlight(line[start:end], lang) + Markup("</mark>"))
        pos = end
    out.append(highlight(line[pos:], lang))
    return Markup("").join(out)


def highlight_block(code: str, lang: str | None, attrs=None) -> str:
    """`markdown-it` highlight hook: a fenced block's code as escaped, highlighted HTML."""
    lang = {"py": "python", "python": "python", "bash": "shell", "sh": "shell", "shell": "shell",
            "toml": "toml", "cuda": "c", "cpp": "c", "c": "c"}.get((lang or "").lower(), "text")
    return f'<pre class="code"><code>{highlight(code.rstrip(chr(10)), lang)}</code></pre>\n'
