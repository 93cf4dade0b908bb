"""Shell text split into simple commands and words by `shlex` (POSIX quoting and escapes, the
control operators), each word with the offset of its first character in the text.

`shlex` returns words without positions; a word is placed by finding its value in the text from
where the previous word ended (for `"flash-attn"` that is the `f` inside the quotes). A word whose
value is not written verbatim (`'it'"'"'s'`) is placed at its first character. An unclosed quote
or a trailing backslash is closed at the end of the text, as the shell would ask for more input.
"""

from __future__ import annotations

import shlex
from typing import NamedTuple

# characters shlex splits operators from; a token made of them separates commands or redirects
OPERATOR_CHARS = "();<>|&`"
_CLOSERS = ("", " ", '"', "'")


class Word(NamedTuple):
    text: str  # the value, quotes and escapes removed
    offset: int  # where its first character is written


def _tokens(text: str) -> list[str]:
    for closer in _CLOSERS:
        lexer = shlex.shlex(text + closer, posix=True, punctuation_chars=OPERATOR_CHARS)
        lexer.whitespace_split = True
        lexer.commenters = ""  # the caller removed comments; `#` inside a word (`#egg=`) stays
        try:
            return list(lexer)
        except ValueError:  # "No closing quotation", "No escaped character"
            continue
    return text.split()


def words(text: str) -> list[Word]:
    """Every token of `text`, operators included, with its offset."""
    out: list[Word] = []
    cursor = 0
    for token in _tokens(text):
        while cursor < len(text) and text[cursor].isspace():
            cursor += 1
        at = text.find(token, cursor) if token else -1
        if at < 0:
            at = cursor
        out.append(Word(token, at))
        cursor = min(len(text), at + len(token))
        while cursor < len(text) and text[cursor] in "\"'":  # the closing quote of a quoted word
            cursor += 1
    return out


def _is_operator(token: str) -> bool:
    return bool(token) and all(c in OPERATOR_CHARS for c in token)


def commands(text: str) -> list[list[Word]]:
    """The simple commands of `text`, split at `;`, `&`, `&&`, `|`, `||`, `(`, `)` and backquotes;
    redirections (`> file`, `2>&1`) and their targets are left out."""
    out: list[list[Word]] = [[]]
    redirect_target = False
    for word in words(text):
        if _is_operator(word.text):
            if "<" in word.text or ">" in word.text:
                current = out[-1]
                if current and current[-1].text.isdigit() and current[-1].offset + len(current[-1].text) == word.offset:
                    current.pop()  # the descriptor of `2>`
                redirect_target = True
            else:
                out.append([])
                redirect_target = False
            continue
        if redirect_target:
            redirect_target = False
            continue
        out[-1].append(word)
    return [c for c in out if c]
