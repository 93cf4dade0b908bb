"""What git says belongs to a project: the files it lists and the submodules it records.

Each answer comes from git itself, so its own rules hold (`.gitignore` at every level,
`.git/info/exclude`, `core.excludesFile`, quoting in `.gitmodules`); `None` or a plain reading
where git is not installed or the folder is not in a work tree.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import subprocess

# a listing is an optimisation: past this the plain walk answers instead (a stuck git never stalls a scan)
GIT_LIST_TIMEOUT_S = 20
SUBMODULE_PATH = re.compile(r"^\s*path\s*=\s*(.+?)\s*$", re.MULTILINE)


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes] | None:
    from migrator.ground.git_command import run_git  # (subprocess, tempfile...) only where git runs

    return run_git(args, cwd, timeout=GIT_LIST_TIMEOUT_S)  # isolated: nothing from the repository's config runs (migrator/ground/git_command.py)


class GitBlocked(NamedTuple):
    """A file git would open by itself that is there but not a regular file: git is not run."""
    path: Path
    what: str  # "FIFO", "socket", "device", ...


def project_files(folder: Path, pruned_dirs: Iterable[str] = ()) -> list[str] | GitBlocked | None:
    """Paths under `folder` (relative to it, `/`-separated) that git counts as the project: tracked
    files and untracked files no ignore rule covers (`git ls-files -co --exclude-standard`). A nested
    repository or submodule is one entry (its folder). Folders named in `pruned_dirs` are not
    descended into for untracked files. None where git is missing, `folder` is not in a work tree
    or git ignores `folder` itself; `GitBlocked` (the file) where a file git opens could block it."""
    if not _below_a_git_folder(folder):
        return None  # no work tree: spare the git process
    pruned_dirs = tuple(pruned_dirs)
    excludes = [f"--exclude={name}/" for name in sorted(pruned_dirs)]
    blocked = _ignore_files_git_cannot_read(folder, pruned_dirs) or _git_files_not_regular(folder)
    if blocked is not None:
        return GitBlocked(blocked, _what(blocked))  # the walk reads each ignore file safely instead
    out = _git(["ls-files", "--cached", "--others", "--exclude-standard", "-z", *excludes], folder)
    if out is None or out.returncode != 0:
        return None
    if _ignored_by_git(folder):
        return None  # asked for although git leaves it out (e.g. an unpacked sdist under an ignored folder)
    # -z: names unquoted, as bytes; os.fsdecode keeps a non-UTF-8 name openable (surrogateescape)
    names = {os.fsdecode(raw).rstrip("/") for raw in out.stdout.split(b"\0") if raw}
    return sorted(names)  # a conflicted file is listed once per stage


def _ignore_files_git_cannot_read(folder: Path, pruned_dirs: Iterable[str]) -> Path | None:
    """Whether a `.gitignore` (or `.git/info/exclude`) under `folder` is no regular file: git opens them
    itself, and a FIFO there blocks it. git lists no FIFO, so the folders are walked (names only, no reads)."""
    pruned = {".git", *pruned_dirs}
    stack = [str(folder)]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in pruned:
                            stack.append(entry.path)
                    elif entry.name == ".gitignore" and not (entry.is_file(follow_symlinks=False)
                                                             or entry.is_symlink()):  # git reads no linked one
                        return Path(entry.path)
        except OSError:
            continue
    exclude = folder / ".git" / "info" / "exclude"
    try:
        return None if stat.S_ISREG(os.lstat(exclude).st_mode) else exclude
    except OSError:
        return None


def _git_files_not_regular(folder: Path) -> Path | None:
    """Whether a file git opens by itself is there but not a regular file (`.git/index`, `.git/HEAD`,
    `.git/config`, the `core.excludesFile` the config names, the default global ignore file): a FIFO
    there blocks git until its timeout, on every call. Checked with `lstat`/`stat`, never opened."""
    git_dir = _git_dir(folder)
    if git_dir is not None:
        for name in ("index", "HEAD", "config"):
            if _there_not_regular(git_dir / name):
                return git_dir / name
    out = _git(["config", "--path", "--get", "core.excludesFile"], folder)
    named = os.fsdecode(out.stdout).strip() if out is not None and out.returncode == 0 else ""
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return next((Path(p) for p in (named, os.path.join(home, "git", "ignore")) if p and _there_not_regular(Path(p))),
                None)


def _what(path: Path) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = os.lstat(path).st_mode if os.path.lexists(path) else 0
    return ("FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
            else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "folder" if stat.S_ISDIR(mode)
            else "special file")


def _git_dir(folder: Path) -> Path | None:
    try:
        here = folder.resolve()
    except (OSError, RuntimeError):
        return None
    for parent in (here, *here.parents):
        if (parent / ".git").is_dir():
            return parent / ".git"
        if os.path.lexists(parent / ".git"):
            return None  # a worktree's or submodule's `.git` file: git finds its folder itself
    return None


def _there_not_regular(path: Path) -> bool:
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)  # a link to a regular file is fine
    except OSError:
        return False  # absent (or unreadable: git reports it, it does not block)


def _ignored_by_git(folder: Path) -> bool:
    out = _git(["check-ignore", "-q", "--", os.path.join(str(folder.resolve()), "")], folder)
    return out is not None and out.returncode == 0


def _below_a_git_folder(folder: Path) -> bool:
    """A `.git` folder or file (worktrees, submodules) in `folder` or above it."""
    try:
        here = folder.resolve()
    except (OSError, RuntimeError):
        return True  # let git decide
    return any(os.path.exists(os.path.join(p, ".git")) for p in (here, *here.parents))


def submodules(root: Path) -> set[str]:
    """Paths of git submodules (other projects' code, e.g. a vendored CUTLASS): scanned only on request.
    git itself reads `.gitmodules` (quoting, includes, case rules); without git, a plain `path =` match."""
    gitmodules = root / ".gitmodules"
    if not gitmodules.is_file():
        return set()
    out = _git(["config", "--file", str(gitmodules), "-z", "--get-regexp", r"^submodule\..*\.path$"], root)
    if out is not None and out.returncode in (0, 1):  # 1: no submodule paths
        # -z: "key\nvalue\0" per entry
        entries = out.stdout.decode("utf-8", "replace").split("\0")
        return {e.partition("\n")[2].strip("/") for e in entries if "\n" in e}
    try:
        text = gitmodules.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {m.group(1).strip("/") for m in SUBMODULE_PATH.finditer(text)}
