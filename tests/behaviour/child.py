"""Run every Python file of a tree the way an import does (`run_name` is not `__main__`, so training
loops behind a main guard do not start) and record per file: the outcome, what it printed and the
lines it executed. Used by tests/behaviour/test_portable_behaviour.py, once per tree and side:

    python tests/behaviour/child.py OUT.json TREE...
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
from pathlib import Path


def run_file(path: Path, tree: Path) -> dict:
    lines: set[int] = set()
    target = str(path)

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != target:
            return None  # only this file's own lines
        if event == "line":
            lines.add(frame.f_lineno)
        return tracer

    out = io.StringIO()
    before = set(sys.modules)
    sys.path.insert(0, str(path.parent))
    outcome = "ok"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            sys.settrace(tracer)
            try:
                runpy.run_path(target, run_name="__behaviour__")
            finally:
                sys.settrace(None)
    except BaseException as exc:  # noqa: BLE001 - the outcome is the record
        name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
        outcome = f"{type(exc).__name__}:{name}" if name else type(exc).__name__
    finally:
        sys.path.remove(str(path.parent))
        for mod in set(sys.modules) - before:  # the tree's own modules: each file starts from scratch
            if str(getattr(sys.modules[mod], "__file__", None) or "").startswith(str(tree)):
                del sys.modules[mod]
    return {"outcome": outcome, "stdout": out.getvalue(), "lines": sorted(lines)}


def main(dest: Path, trees: list[Path]) -> None:
    import torch

    results = {}
    for tree in trees:
        for path in sorted(tree.rglob("*.py")):
            if path.name == "_migrate_runtime.py":
                continue
            os.chdir(path.parent)
            torch.manual_seed(0)
            results[f"{tree.name}/{path.relative_to(tree).as_posix()}"] = run_file(path, tree)
    dest.write_text(json.dumps(results))


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), [Path(t).resolve() for t in sys.argv[2:]])
