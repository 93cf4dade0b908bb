"""Writing files back without losing anything: atomic replace, same mode, owner, encoding, BOM,
newlines; never through a symlink and never outside the root."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

TEMP_SUFFIX = ".migrate-tmp"
# what `atomic_write` names its temporary files: `.<name>.<8 mkstemp characters>.migrate-tmp`
TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX) + r"$")


class UnsafeWrite(OSError):
    """A write that would land outside the root or replace a symlink; refused."""


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


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one rename; keeps the file's mode and (where permitted) its owner
    and group. A new file gets the mode the umask gives. Never leaves a partial file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        if st is not None:
            _keep_owner(tmp, st)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _keep_owner(tmp: str, st: os.stat_result) -> None:
    own = os.stat(tmp)
    if (own.st_uid, own.st_gid) == (st.st_uid, st.st_gid) or not hasattr(os, "chown"):
        return
    try:
        os.chown(tmp, st.st_uid, st.st_gid)
    except PermissionError:
        try:  # a user may still keep the group, if they belong to it
            os.chown(tmp, -1, st.st_gid)
        except PermissionError:
            pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def sweep_stale_temps(root: Path) -> list[Path]:
    """Delete the temporary files a killed run of `atomic_write` left under `root` (only names of
    its own scheme, only regular files; symlinked folders and the scanner's skipped folders, such as
    .git and virtual environments, are not entered; `.migrate` is)."""
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
                if stat.S_ISREG(path.lstat().st_mode):
                    path.unlink()
                    removed.append(path)
            except OSError:
                continue
    return removed
