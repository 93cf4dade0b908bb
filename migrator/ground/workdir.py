"""The tool's own folder in a scan root, `.migrate/` (fix record, op census).

It carries its own `.gitignore` holding `*`, as `.ruff_cache` and `.pytest_cache` do: `git status`
stays clean and nobody commits a record by accident, without editing the project's `.gitignore`.
"""

from __future__ import annotations

from pathlib import Path

GITIGNORE_TEXT = "# Automatically created by ascend-migrate.\n*\n"
CENSUS_FILE = ".migrate/op-trace.json"  # the op census (`migrate ops --trace`), read by scan when present


def ensure_folder(folder: Path) -> Path:
    """Create `folder` (and parents) if needed, with a `.gitignore` of `*` when it has none; an
    existing `.gitignore` is left as the user made it."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists() and not ignore.is_symlink():
        try:
            with open(ignore, "x", encoding="utf-8", newline="\n") as fh:
                fh.write(GITIGNORE_TEXT)
        except FileExistsError:
            pass  # another run created it meanwhile
    return folder
