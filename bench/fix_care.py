"""What a careful engineer's edit keeps, checked on each file `migrate fix` changed (issue 39's acceptance),
for `bench/real_repos.py`:

- comments lost: every comment token of the input is in the output (a multiset: a comment the fix
  dropped is one lost, wherever the rest moved);
- new unused imports: ruff's F401 (`--isolated`, the same rules for both sides) on the file before and
  after; a message the output has more often than the input is one new unused import;
- guard inversions: an availability check the fix rewrote (`torch.cuda.is_available()` -> the NPU's) that
  still guards a `torch.cuda.*` use left in the output — true on the Ascend host, it reaches a CUDA call
  the original never reached there. The guard regions are the scanner's own (`engine/guards.py`); the
  calls are read from the output's text, not from a scan, so a call the scanner missed counts too.
"""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import tempfile
import tokenize
from collections import Counter
from pathlib import Path

AVAILABILITY = "torch.cuda.is_available"


def comments(text: str) -> Counter[str]:
    try:
        return Counter(t.string.strip() for t in tokenize.generate_tokens(io.StringIO(text).readline)
                       if t.type == tokenize.COMMENT)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return Counter()


def comments_lost(path: str, before: str, after: str) -> list[str]:
    """`path: # comment` for each comment of `before` that `after` no longer holds."""
    return [f"{path}: {c}" for c in sorted((comments(before) - comments(after)).elements())]


def unused_imports(files: dict[str, str]) -> Counter[tuple[str, str]]:
    """(path, F401 message) -> count, from ruff over the texts laid out under their relative paths."""
    if not files:
        return Counter()
    with tempfile.TemporaryDirectory(prefix="fix-care-") as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F401",
                               "--output-format", "json", "--exit-zero", "."], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"ruff failed: {proc.stderr[-500:]}")
        return Counter((Path(d["filename"]).resolve().relative_to(root.resolve()).as_posix(), d["message"])
                       for d in json.loads(proc.stdout or "[]"))


def new_unused_imports(changes: list[tuple[str, str, str]]) -> list[str]:
    """`path: message` for each F401 the fixed files have beyond their originals; changes are (path, before, after)."""
    before = unused_imports({p: b for p, b, _ in changes})
    after = unused_imports({p: a for p, _, a in changes})
    return [f"{p}: {m}" for p, m in sorted((after - before).elements())]


def _cuda_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of each `torch.cuda.*` attribute chain in the module but the availability check."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            text = ast.unparse(node)
            if text.startswith("torch.cuda.") and text.count(".") == 2 and text != AVAILABILITY:
                out.append((node.lineno, text))
    return out


def guard_inversions(path: str, after: str, rewritten_checks: list[int]) -> list[str]:
    """`path:line: guards `call`` for each rewritten availability check (its line in `after`) that guards a
    `torch.cuda.*` use the output still holds."""
    if not rewritten_checks:
        return []
    from migrator.engine.guards import guarded_calls

    try:
        tree = ast.parse(after)
    except SyntaxError:
        return []  # an unparsable output is counted by real_repos itself
    return [f"{path}:{line}: guards {call}" for line, call in sorted(guarded_calls(tree, rewritten_checks,
                                                                                   _cuda_uses(tree)).items())]
