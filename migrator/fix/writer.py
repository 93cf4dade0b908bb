"""Writing files back without losing anything: atomic replace, same mode, owner, encoding, BOM,
newlines; never through a symlink and never outside the root."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from migrator.ground.safe_write import TEMP_NAME, TEMP_SUFFIX, UnsafeWrite, temp_writer_gone, write_bytes

__all__ = ["TEMP_NAME", "TEMP_SUFFIX", "ChangedSincePlanned", "UnsafeWrite", "atomic_write", "destination", "inside", "sniff"]


@dataclass(frozen=True)
class Encoded:
    """How a file's bytes map to text, so the text can be turned back into the same kind of bytes."""

    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return (b"\xef\xbb\xbf" + data) if self.bom else data


def sniff(data: bytes, encoding: str) -> Encoded:
    bom = data.startswith(b"\xef\xbb\xbf")
    enc = "utf-8" if encoding.lower().replace("_", "-") in ("utf-8-sig", "utf8") else encoding
    return Encoded(enc, bom)


def inside(path: Path, real_root: Path) -> bool:
    return path.is_relative_to(real_root)


def destination(root: Path, rel: str) -> Path:
    """Where `rel` may be written under `root`: its folder resolved, checked to be inside the root,
    and the file itself not a symlink (a link is never replaced by a copy). Raises UnsafeWrite."""
    real_root = root.resolve()
    path = root / rel
    folder = path.parent.resolve()
    if not inside(folder, real_root):
        raise UnsafeWrite(f"{rel}: would be written to {folder / path.name}, outside the root {root}; refused")
    final = folder / path.name
    if final.is_symlink():
        raise UnsafeWrite(f"{rel}: is a symlink; links are never replaced; refused")
    return final


class ChangedSincePlanned(OSError):
    """The file is not what the fix was planned from (edited, renamed, replaced while it ran): kept."""


def atomic_write(path: Path, data: bytes, before_replace: Callable[[], None] | None = None) -> None:
    """Replace `path` with `data` (see migrator/ground/safe_write.py: atomic over a regular file or a new path,
    same mode and owner; never a partial file); `before_replace` may refuse, right before the rename."""
    write_bytes(path, data, before_replace=before_replace)


def sweep_stale_temps(root: Path, *, tree_locked: bool) -> list[Path]:
    """Delete the temporary files a killed run of `atomic_write` left under `root` (only names of
    its own scheme, only regular files, only those whose writer is gone: `temp_writer_gone`; a run without
    the tree's lock, `fix --no-record`, keeps a live run's temps); symlinked folders and the scanner's
    skipped folders, such as .git and virtual environments, are not entered; `.migrate` is."""
    from migrator.engine.discover import ALWAYS_SKIPPED_DIRS

    skip_dirs = ALWAYS_SKIPPED_DIRS - {".migrate"}
    removed = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip_dirs]
        for name in files:
            if not TEMP_NAME.match(name):
                continue
            path = Path(folder) / name
            try:
                if stat.S_ISREG(path.lstat().st_mode) and temp_writer_gone(path, unstamped_gone=tree_locked):
                    path.unlink()
                    removed.append(path)
            except OSError:
                continue
    return removed
