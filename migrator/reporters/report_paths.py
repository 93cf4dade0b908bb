"""Paths as the report shows them: relative to the scanned repository's root, never an absolute path of the
machine that wrote it (a report is shared: a PR comment, a page attached to an issue). And paths and code
names as HTML a browser wraps only between their parts, never inside a name or a line number."""

from __future__ import annotations

import re
from pathlib import Path

from markupsafe import Markup

from migrator.ground.safe_text import visible


def shown_path(path: str | None, root: str) -> str | None:
    """`path` relative to `root` (`.` for the root itself); a path outside the root by its name only;
    a relative path as given."""
    if path is None:
        return None
    given = Path(path)
    if not given.is_absolute():
        return given.as_posix()
    for base in _bases(root):
        for candidate in (given, _resolved(given)):
            try:
                return candidate.relative_to(base).as_posix() or "."
            except ValueError:
                continue
    return given.name or "."


def root_label(root: str, git_top: str | None) -> str:
    """The scan root as the page names it: the repository's folder name, plus the path inside it when
    the scan root is a sub-folder of the git work tree."""
    here = Path(root)
    if git_top:
        inside = shown_path(root, git_top)
        if inside and inside != "." and not Path(inside).is_absolute() and inside != here.name:
            return f"{Path(git_top).name}/{inside}"
    return here.name or "."


def scrub_root(text: str, root: str) -> str:
    """The rendered page without the root's absolute path (a message or a foreign validation file may
    quote it): `ROOT/x` becomes `x`, `ROOT` alone `.`. Never for `/` itself."""
    for base in sorted({b.as_posix() for b in _bases(root)}, key=len, reverse=True):
        if base == "/":
            continue
        text = text.replace(base + "/", "")
        text = re.sub(re.escape(base) + r"(?![\w.-])", ".", text)
    return text


def breakable(text: object, separators: str = "/") -> Markup:
    """HTML for a path or a dotted name that wraps only after a separator: each part a no-wrap span,
    a <wbr> between them (`a/b/c.py:12` may break after `a/` or `b/`, never inside `c.py:12`)."""
    shown = visible(str(text))
    parts = [p for p in re.split(f"(?<=[{re.escape(separators)}])", shown) if p]
    return Markup("<wbr>").join(Markup('<span class="nb">{}</span>').format(p) for p in parts)


def _bases(root: str) -> list[Path]:
    bases = [Path(root)]
    resolved = _resolved(Path(root))
    if resolved != bases[0]:
        bases.append(resolved)
    return [b for b in bases if b.is_absolute()]


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


