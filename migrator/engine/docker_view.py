"""A Dockerfile as the shell checker reads it: each shell-run instruction's body at its columns,
an exec-form JSON array as the words it runs, every other line blank."""

from __future__ import annotations

import json
import re

DOCKER_ESCAPE = re.compile(r"^#\s*escape\s*=\s*(\S)", re.IGNORECASE)


def docker_escape(lines: tuple[str, ...]) -> str:
    """The line-continuation character: `\\`, or the `# escape=` parser directive's."""
    escape = "\\"
    for raw in lines[:5]:
        m = DOCKER_ESCAPE.match(raw)
        if m:
            escape = m.group(1)
    return escape


class DockerShellView:
    """The Dockerfile as the shell checker reads it: shell bodies in their columns, other lines blank."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.exec_lines: list[int] = []  # the view lines of the current shell-run instruction
        self.exec_text = ""  # its body, continuations joined

    def add(self, line: str, body: str, continuing: bool) -> None:
        self.lines.append(line)
        self.exec_lines.append(len(self.lines) - 1)
        self.exec_text += body.rstrip()[:-1] if continuing else body
        if not continuing:
            _exec_form_as_words(self.lines, self.exec_lines, self.exec_text)
            self.exec_lines, self.exec_text = [], ""


JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _exec_form_as_words(view: list[str], indexes: list[int], body: str) -> None:
    """`RUN ["pip", "install", "x"]` (a JSON array, possibly over continued lines) becomes the words
    `pip install x` at the columns they are written, for the shell checker."""
    try:
        argv = json.loads(body)
    except ValueError:
        return  # shell form
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return
    for i in indexes:
        line, blanked, end = view[i], [], 0
        for m in JSON_STRING.finditer(line):
            inner = m.group(0)[1:-1]
            blanked.append(" " * (m.start() - end + 1) + (inner if "\\" not in inner else " " * len(inner)) + " ")
            end = m.end()
        continued = i != indexes[-1]
        view[i] = "".join(blanked) + (" \\" if continued else "")
