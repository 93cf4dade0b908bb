"""Find the files to scan: what git lists as the project (or, without git, a walk that reads
`.gitignore`), less `exclude`; skips symlinks out of the root and never opens what is not a file."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.engine.git_files import GitBlocked, project_files, submodules

if TYPE_CHECKING:
    import pathspec

ALWAYS_SKIPPED_DIRS = {
    ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox",
    "node_modules", ".migrate", ".eggs", ".ipynb_checkpoints", ".venv", "site-packages", ".conda",
}
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


def explicit_kind(path: Path) -> str | None:
    """A file named on the command line that `file_kind` does not know: an extensionless script is
    Python (`bin/train`, a `#!... python` line or none); any other suffix (`notes.txt`) is not read."""
    if path.suffix.lower() == ".pyi":
        return "python"
    if path.suffix:
        return None
    try:
        with open(path, "rb") as fh:
            first = fh.readline(200)
    except OSError:
        return "python"  # unreadable: the skip names why
    return "shell" if first.startswith(b"#!") and b"python" not in first and re.search(rb"\b(ba|z)?sh\b", first) else "python"


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


def unreadable_reason(path: Path) -> str | None:
    """Why a path that is not a folder is never opened: a symlink loop or a dangling one, or not a regular
    file (a FIFO, socket or device could block the scan, or never end). None for a regular file or a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        if exc.errno == errno.ENOENT and os.path.islink(path):  # a skip, not a read error: `--check` can pass
            return f"dangling symlink (to {os.readlink(path)})"
        return None  # other errors: the read reports them
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
    """Yield scannable files under `paths` (absolute), in a stable order: in each folder its files
    by name, then its subfolders by name."""
    walk = _Discovery(root, exclude)
    for start in paths:
        if start.is_dir():
            yield from walk.folder(start)
        else:
            yield from walk.explicit_file(start)


SUBMODULE_SKIP = "git submodule (another project's code): scan it by naming it"
OUTSIDE_SKIP = "symlink pointing outside the scan root"


class _Discovery:
    """One `discover` call: the paths already yielded, the folders git already listed."""

    def __init__(self, root: Path, exclude: pathspec.PathSpec | None) -> None:
        self.root = root
        self.real_root = root.resolve()
        self.exclude = exclude
        self.seen: set[str] = set()
        self.listed: list[Path] = []  # real paths of folders whose files git listed
        self._submodules: set[str] | None = None
        self._folder_verdicts: dict[str, bool] = {}

    @property
    def vendored(self) -> set[str]:
        if self._submodules is None:
            self._submodules = submodules(self.root)
        return self._submodules

    def excluded(self, rel: str) -> bool:
        return bool(self.exclude and self.exclude.match_file(rel))

    def inside_root(self, path: Path) -> bool:
        try:
            path.resolve().relative_to(self.real_root)
            return True
        except (ValueError, OSError, RuntimeError):
            return False

    def explicit_file(self, start: Path) -> Iterator[Candidate | Skip]:
        rel = rel_to(self.root, start)
        if rel in self.seen:
            return
        self.seen.add(rel)
        kind = file_kind(start) or explicit_kind(start)
        if kind is None:
            yield Skip(rel, f"not a file migrate reads (Python, notebook, shell, CUDA, config, requirements, "
                            f"Dockerfile): `{start.suffix}` files are not parsed as Python")
        elif self.excluded(rel):
            yield Skip(rel, "excluded by configuration")
        elif why := unreadable_reason(start):
            yield Skip(rel, why)
        elif start.is_symlink() and not self.inside_root(start):
            yield Skip(rel, OUTSIDE_SKIP)
        else:
            yield Candidate(start, rel, kind, True)

    def folder(self, start: Path) -> Iterator[Candidate | Skip]:
        """git's listing where `start` is in a work tree, else the `.gitignore`-reading walk."""
        pruned = ALWAYS_SKIPPED_DIRS.difference(start.resolve().parts)  # a folder asked for by name is read
        listing = project_files(start, pruned)
        # said, not silent: the walk's ignore rules may differ from git's (a `.gitignore` the walk reports itself)
        if isinstance(listing, GitBlocked) and listing.path.name != ".gitignore":
            yield Skip(rel_to(self.root, listing.path), f"not a regular file ({listing.what}): git would block "
                       "on it, so git was not run; files listed by the plain walk (.gitignore files only)")
        if listing is None or isinstance(listing, GitBlocked):
            yield from _walk(self, start)
            return
        self.listed.append(start.resolve())
        yield from self._listed(start, listing)

    def file(self, path: Path, rel: str, regular: bool, link: bool) -> Iterator[Candidate | Skip]:
        kind = file_kind(path)
        if kind is None or rel in self.seen:
            return
        self.seen.add(rel)
        if self.excluded(rel):
            return
        if not regular and (why := unreadable_reason(path)):
            yield Skip(rel, why)
        elif link and not self.inside_root(path):
            yield Skip(rel, OUTSIDE_SKIP)
        else:
            yield Candidate(path, rel, kind, False)

    def _listed(self, start: Path, listing: list[str]) -> Iterator[Candidate | Skip]:
        base, prefix = str(start), rel_to(self.root, start)
        entries = []
        for name in listing:
            parts = name.split("/")
            if not ALWAYS_SKIPPED_DIRS.isdisjoint(parts[:-1]) or self._in_excluded_folder(prefix, parts):
                continue
            full = os.path.join(base, name)
            try:
                mode = os.lstat(full).st_mode
            except OSError:  # in the index, not on disk (deleted, sparse checkout)
                continue
            is_folder = stat.S_ISDIR(mode) or (stat.S_ISLNK(mode) and os.path.isdir(full))
            entries.append((_walk_order(parts, is_folder), full, name, mode, is_folder))
        entries.sort(key=lambda e: e[0])
        for _, full, name, mode, is_folder in entries:
            path, rel = Path(full), name if prefix == "." else f"{prefix}/{name}"
            if is_folder:
                yield from self._subfolder(path, rel, stat.S_ISLNK(mode))
            else:
                yield from self.file(path, rel, stat.S_ISREG(mode), stat.S_ISLNK(mode))

    def _in_excluded_folder(self, prefix: str, parts: list[str]) -> bool:
        if self.exclude is None:
            return False
        head = "" if prefix == "." else prefix + "/"
        return any(self._excluded_folder(head + "/".join(parts[:i]) + "/") for i in range(1, len(parts)))

    def _excluded_folder(self, rel: str) -> bool:
        if rel not in self._folder_verdicts:
            self._folder_verdicts[rel] = self.excluded(rel)
        return self._folder_verdicts[rel]

    def _subfolder(self, path: Path, rel: str, link: bool) -> Iterator[Candidate | Skip]:
        """A folder in git's listing: a submodule, a nested repository, or a symlink git does not follow."""
        if path.name in ALWAYS_SKIPPED_DIRS or self.excluded(rel + "/"):
            return
        if rel in self.vendored:
            yield Skip(rel, SUBMODULE_SKIP)
            return
        if link:
            if not self.inside_root(path):
                yield Skip(rel, OUTSIDE_SKIP)
                return
            target = path.resolve()
            if any(target == done or done in target.parents for done in self.listed):
                here = path.parent.resolve()
                loop = target == here or target in here.parents
                yield Skip(rel, "symlink loop" if loop else "symlink to a folder inside the scanned tree: not followed")
                return
        yield from self.folder(path)


def _walk_order(parts: list[str], is_folder: bool) -> tuple[tuple[int, str], ...]:
    """A folder's files before its subfolders, each by name: the order of the walk without git."""
    return (*((1, p) for p in parts[:-1]), (1 if is_folder else 0, parts[-1]))


def _gitignore(folder: Path) -> tuple[pathspec.PathSpec | None, str | None]:
    """(spec, None), (None, None) without a `.gitignore`, or (spec of the usable patterns or None, why the
    file or some of its patterns were not used)."""
    from migrator.ground.globs import compile_globs
    from migrator.ground.input_files import MAX_SMALL_BYTES, read_text

    path = folder / ".gitignore"
    if not os.path.lexists(path):
        return None, None
    try:
        lines = read_text(path, MAX_SMALL_BYTES, errors="replace").splitlines()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"not used: {exc}"
    spec, problems = compile_globs(lines, strict=False)
    return spec, ("pattern(s) not used: " + "; ".join(problems)) if problems else None


class _Ignores:
    """The `.gitignore` specs read so far on the walk, each with the folder its patterns are relative to."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.specs: list[tuple[Path, pathspec.PathSpec]] = []

    def read(self, folder: Path) -> Iterator[Skip]:
        spec, problem = _gitignore(folder)
        if problem:
            yield Skip(rel_to(self.root, folder / ".gitignore"), problem)
        if spec:
            self.specs.append((folder, spec))

    def ignored(self, path: Path, is_dir: bool) -> bool:
        for base, spec in self.specs:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(rel + ("/" if is_dir else "")):
                return True
        return False


def _walk(walk: _Discovery, start: Path) -> Iterator[Candidate | Skip]:
    """Without git: walk the folders, reading each `.gitignore` on the way."""
    root = walk.root
    visited_dirs: set[tuple[int, int]] = set()
    ignores = _Ignores(root)
    # .gitignore files between the root and the starting folder apply too
    for parent in [*reversed(start.parents), start]:
        if parent == root or root in parent.parents:
            yield from ignores.read(parent)
    stack = [start]
    while stack:
        folder = stack.pop()
        entries = yield from _enter_folder(root, folder, start, visited_dirs, ignores)
        subdirs: list[Path] = []
        for entry in entries:
            subdir = yield from _walk_entry(walk, entry, start, ignores)
            if subdir is not None:
                subdirs.append(subdir)
        stack.extend(reversed(subdirs))


def _enter_folder(
    root: Path, folder: Path, start: Path, visited_dirs: set[tuple[int, int]], ignores: _Ignores
) -> Generator[Skip, None, list[os.DirEntry[str]]]:
    """Skips for a folder that cannot be read or was seen before (then no entries); its `.gitignore`
    joins `ignores`; returns its entries by name."""
    try:
        st = folder.stat()
    except OSError as exc:
        yield Skip(rel_to(root, folder), f"cannot read folder: {exc.strerror}")
        return []
    key = (st.st_dev, st.st_ino)
    if key in visited_dirs:
        yield Skip(rel_to(root, folder), "symlink loop")
        return []
    visited_dirs.add(key)
    if folder != start:
        yield from ignores.read(folder)
    try:
        return sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        yield Skip(rel_to(root, folder), f"cannot list folder: {exc.strerror}")
        return []


def _walk_entry(
    walk: _Discovery, entry: os.DirEntry[str], start: Path, ignores: _Ignores
) -> Generator[Candidate | Skip, None, Path | None]:
    """A file's candidate, or a folder's skip; returns the folder when the walk goes into it."""
    path = Path(entry.path)
    rel = rel_to(walk.root, path)
    try:
        is_dir = entry.is_dir()
    except OSError:
        is_dir = False
    if is_dir:
        if entry.name in ALWAYS_SKIPPED_DIRS or ignores.ignored(path, True) or walk.excluded(rel + "/"):
            return None
        if rel in walk.vendored and path != start:
            yield Skip(rel, SUBMODULE_SKIP)
            return None
        if entry.is_symlink() and not walk.inside_root(path):
            yield Skip(rel, OUTSIDE_SKIP)
            return None
        return path
    if file_kind(path) is not None and not ignores.ignored(path, False):
        yield from walk.file(path, rel, _is_regular(entry), entry.is_symlink())
    return None
