"""Find the files to scan: respects .gitignore and `exclude`, skips symlinks out of the root."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

ALWAYS_SKIPPED_DIRS = {
    ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox",
    "node_modules", ".migrate", ".eggs", ".ipynb_checkpoints", ".venv", "site-packages", ".conda",
}
SUBMODULE_PATH = re.compile(r"^\s*path\s*=\s*(.+?)\s*$", re.MULTILINE)


def submodules(root: Path) -> set[str]:
    """Paths of git submodules (other projects' code, e.g. a vendored CUTLASS): scanned only on request.
    git itself reads `.gitmodules` (quoting, includes, case rules); without git, a plain `path =` match."""
    import shutil
    import subprocess

    gitmodules = root / ".gitmodules"
    if not gitmodules.is_file():
        return set()
    git = shutil.which("git")
    if git is not None:
        try:
            out = subprocess.run([git, "config", "--file", str(gitmodules), "-z", "--get-regexp", r"^submodule\..*\.path$"],
                                 capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            out = None
        if out is not None and out.returncode in (0, 1):  # 1: no submodule paths
            # -z: "key\nvalue\0" per entry
            entries = out.stdout.decode("utf-8", "replace").split("\0")
            return {e.partition("\n")[2].strip("/") for e in entries if "\n" in e}
    try:
        text = gitmodules.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {m.group(1).strip("/") for m in SUBMODULE_PATH.finditer(text)}


def file_kind(path: Path) -> str | None:
    """Which checker reads this file, or None when the scanner has nothing to say about it."""
    name = path.name
    if name.startswith(".migrate"):  # the tool's own baselines and records quote findings
        return None
    suffix = path.suffix.lower()
    if suffix == ".py":
        return "python"
    if suffix in (".sh", ".bash", ".zsh", ".slurm", ".sbatch"):
        return "shell"
    if suffix in (".cu", ".cuh"):
        return "cuda"
    if name == "pyproject.toml":
        return "pyproject"
    if suffix == ".txt" and (name.startswith(("requirements", "constraints")) or path.parent.name == "requirements"):
        return "requirements"
    if suffix == ".ipynb":
        return "notebook"
    if is_container_file(name):
        return "dockerfile"
    if suffix in CONFIG_SUFFIXES:
        # read only when its bytes hold a marker key or value (see engine/config_checker.py)
        return "config"
    return None


CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml")


def is_container_file(name: str) -> bool:
    """`Dockerfile`, `Containerfile`, `Dockerfile.gpu`, `train.dockerfile` (any case)."""
    lower = name.lower()
    return (
        lower in ("dockerfile", "containerfile")
        or lower.startswith(("dockerfile.", "containerfile."))
        or lower.endswith((".dockerfile", ".containerfile"))
    )


@dataclass(frozen=True)
class Candidate:
    path: Path  # absolute
    rel: str  # POSIX, relative to the root
    kind: str
    explicit: bool


@dataclass(frozen=True)
class Skip:
    rel: str
    reason: str


def _gitignore(folder: Path) -> pathspec.PathSpec | None:
    path = folder / ".gitignore"
    try:
        return pathspec.GitIgnoreSpec.from_lines(path.read_text(encoding="utf-8", errors="replace").splitlines())
    except OSError:
        return None


def unreadable_reason(path: Path) -> str | None:
    """Why a path that is not a folder is never opened: a symlink loop, or not a regular file (a FIFO,
    socket or device could block the scan, or never end). None for a regular file or a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "symlink loop" if exc.errno == errno.ELOOP else None  # other errors: the read reports them
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    what = ("FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
            else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special file")
    return f"not a regular file ({what}): not opened"


def _is_regular(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()  # no extra system call for a plain file
    except OSError:  # e.g. a symlink loop
        return False


def rel_to(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def discover(
    root: Path, paths: list[Path], exclude: pathspec.PathSpec | None
) -> Iterator[Candidate | Skip]:
    """Yield scannable files under `paths` (absolute), in a stable order."""
    real_root = root.resolve()
    seen: set[str] = set()

    def excluded(rel: str) -> bool:
        return bool(exclude and exclude.match_file(rel))

    def inside_root(path: Path) -> bool:
        try:
            path.resolve().relative_to(real_root)
            return True
        except (ValueError, OSError, RuntimeError):
            return False

    for start in paths:
        rel = rel_to(root, start)
        if not start.is_dir():
            kind = file_kind(start)
            if rel in seen:
                continue
            seen.add(rel)
            if kind is None:
                kind = "python"  # an explicit file is scanned as Python unless its name says otherwise
            if excluded(rel):
                yield Skip(rel, "excluded by configuration")
            elif why := unreadable_reason(start):
                yield Skip(rel, why)
            elif start.is_symlink() and not inside_root(start):
                yield Skip(rel, "symlink pointing outside the scan root")
            else:
                yield Candidate(start, rel, kind, True)
            continue
        yield from _walk(root, start, excluded, inside_root, seen)


def _walk(root, start: Path, excluded, inside_root, seen: set[str]) -> Iterator[Candidate | Skip]:
    visited_dirs: set[tuple[int, int]] = set()
    vendored = submodules(root)
    ignores: list[tuple[Path, pathspec.PathSpec]] = []
    # .gitignore files between the root and the starting folder apply too
    for parent in [*reversed(start.parents), start]:
        if parent == root or root in parent.parents:
            spec = _gitignore(parent)
            if spec:
                ignores.append((parent, spec))

    def ignored(path: Path, is_dir: bool) -> bool:
        for base, spec in ignores:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(rel + ("/" if is_dir else "")):
                return True
        return False

    stack = [start]
    while stack:
        folder = stack.pop()
        try:
            st = folder.stat()
        except OSError as exc:
            yield Skip(rel_to(root, folder), f"cannot read folder: {exc.strerror}")
            continue
        key = (st.st_dev, st.st_ino)
        if key in visited_dirs:
            yield Skip(rel_to(root, folder), "symlink loop")
            continue
        visited_dirs.add(key)
        if folder != start:
            spec = _gitignore(folder)
            if spec:
                ignores.append((folder, spec))
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            yield Skip(rel_to(root, folder), f"cannot list folder: {exc.strerror}")
            continue
        subdirs = []
        for entry in entries:
            path = Path(entry.path)
            rel = rel_to(root, path)
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if entry.name in ALWAYS_SKIPPED_DIRS or ignored(path, True) or excluded(rel + "/"):
                    continue
                if rel in vendored and path != start:
                    yield Skip(rel, "git submodule (another project's code): scan it by naming it")
                    continue
                if entry.is_symlink() and not inside_root(path):
                    yield Skip(rel, "symlink pointing outside the scan root")
                    continue
                subdirs.append(path)
                continue
            kind = file_kind(path)
            if kind is None or rel in seen or ignored(path, False):
                continue
            seen.add(rel)
            if excluded(rel):
                continue
            if not _is_regular(entry) and (why := unreadable_reason(path)):
                yield Skip(rel, why)
                continue
            if entry.is_symlink() and not inside_root(path):
                yield Skip(rel, "symlink pointing outside the scan root")
                continue
            yield Candidate(path, rel, kind, False)
        stack.extend(reversed(subdirs))
