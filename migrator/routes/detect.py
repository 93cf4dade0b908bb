"""Which training framework a scan root is built on, and which version: imports, pins, vendored copies.

Evidence, strongest first: a vendored Megatron-LM tree (its canonical layout, `megatron/core/package_info.py`),
a pin in requirements*.txt / pyproject.toml / setup.py (read with `packaging.requirements`), the installed
distribution's metadata, then imports. A pin gives the lowest version it allows (`==4.51.3` -> 4.51.3,
`>=4.51` -> 4.51); none -> unknown. An import name alone is no evidence when the tree holds its own
package of that name without the framework's layout (an old vendored `megatron/` with `megatron/training.py`
and no `megatron/core/`): that is a look-alike (`Framework.lookalike`), reported, its route not applied.
Only the files of the scan (its paths, `exclude`, `.gitignore`) are read.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.ground.framework_imports import IMPORT_FRAMEWORK, MAX_EVIDENCE, ImportLines, pattern_lines

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.version import Version

PIN_FRAMEWORK = {
    "megatron-core": "megatron-core", "deepspeed": "deepspeed", "transformers": "transformers",
    "lightning": "lightning", "pytorch-lightning": "lightning", "mmengine": "mmengine",
}
ORDER = ("megatron-core", "deepspeed", "transformers", "lightning", "mmengine")
# the file that marks a real copy of the framework's package (its version file); frameworks not listed
# here have no known layout, so a tree's own package of that import name is always a look-alike
CANONICAL_LAYOUT = {"megatron-core": "core/package_info.py"}
VERSION_FILE = "megatron/core/package_info.py"  # a vendored Megatron's version (`vendored_megatron`)
DISTRIBUTIONS = {"megatron-core": ("megatron-core",), "deepspeed": ("deepspeed",), "transformers": ("transformers",),
                 "lightning": ("lightning", "pytorch-lightning"), "mmengine": ("mmengine",)}


@dataclass(frozen=True)
class Framework:
    name: str  # megatron-core | deepspeed | transformers | lightning | mmengine
    version: str | None  # lowest version the evidence allows; None when unknown
    version_source: str  # "requirements.txt:3 `transformers>=4.51`", "vendored megatron/core/package_info.py", ...
    evidence: tuple[str, ...]  # first few places it is imported or pinned
    lookalike: str | None = None  # the tree's own package of that name, without the framework's layout
    sources: tuple[str, ...] = ()  # every file that gave evidence (imports, pins, version file), sorted

    def to_dict(self) -> dict:
        data = {"name": self.name, "version": self.version, "version_source": self.version_source,
                "evidence": list(self.evidence)}
        if self.lookalike:
            data["lookalike"] = self.lookalike
        return data


def _lowest(req: Requirement) -> str | None:
    best = None
    for spec in req.specifier:
        if spec.operator in ("==", "===", ">=", "~=", ">") and not spec.version.endswith("*"):
            best = spec.version if best is None else max(best, spec.version, key=_vkey)
    return best


def _vkey(v: str) -> Version:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def _pins_in_requirements(text: str) -> Iterator[tuple[int, str]]:
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            yield lineno, line


def _pins_in_pyproject(text: str) -> Iterator[tuple[int, str]]:
    if sys.version_info >= (3, 11):  # imported here, as packaging below: most trees pin no framework
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return
    project = data.get("project") or {}
    if not isinstance(project, dict):
        return
    deps, extras = project.get("dependencies") or [], project.get("optional-dependencies") or {}
    items = list(deps) if isinstance(deps, list) else []
    for extra in extras.values() if isinstance(extras, dict) else ():
        items.extend(extra if isinstance(extra, list) else [])
    for item in items:
        if isinstance(item, str):
            yield _line_of(text, item), item


def _pins_in_setup_py(text: str) -> Iterator[tuple[int, str]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            yield node.lineno, node.value


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def pins(rel: str, text: str) -> list[tuple[str, str | None, str]]:
    """(framework, lowest version, "file:line `spec`") for each framework requirement in one file."""
    name = Path(rel).name
    if name == "pyproject.toml":
        items = _pins_in_pyproject(text)
    elif name == "setup.py":
        items = _pins_in_setup_py(text)
    else:
        items = _pins_in_requirements(text)
    found = []
    for lineno, spec in items:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name

        try:
            req = Requirement(spec)
        except InvalidRequirement:
            continue
        framework = PIN_FRAMEWORK.get(canonicalize_name(req.name))
        if framework:
            found.append((framework, _lowest(req), f"{rel}:{lineno} `{spec.strip()}`"))
    return found


def vendored_megatron(text: str) -> str | None:
    """megatron-core version from the text of `megatron/core/package_info.py` (MAJOR, MINOR, PATCH, PRE_RELEASE)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    parts: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant):
                parts[node.targets[0].id] = node.value.value
    if not all(k in parts for k in ("MAJOR", "MINOR", "PATCH")):
        return None
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts.get('PRE_RELEASE') or ''}"


def installed_version(framework: str) -> str | None:
    """The version of the framework's distribution installed where migrate runs (its metadata), if any."""
    from importlib import metadata

    for dist in DISTRIBUTIONS.get(framework, ()):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def local_packages(files: list[tuple[str, Path, str]]) -> dict[str, list[str]]:
    """framework -> the tree's packages named like its import root (`megatron/`, `lib/megatron/`: a folder
    with `__init__.py`, or with the canonical layout), each marked `folder*` when it has that layout."""
    rels = {rel for rel, _, kind in files if kind == "python"}
    found: dict[str, list[str]] = {}
    for rel in sorted(rels):
        parts = rel.split("/")
        for i, part in enumerate(parts[:-1]):
            framework = IMPORT_FRAMEWORK.get(part)
            if framework is None or part == "accelerate":
                continue
            folder = "/".join(parts[: i + 1])
            canonical = CANONICAL_LAYOUT.get(framework)
            mark = folder + "*" if canonical and f"{folder}/{canonical}" in rels else folder
            if not mark.endswith("*") and f"{folder}/__init__.py" not in rels:
                continue  # a plain folder (`examples/lightning/`) is not an importable package of that name
            seen = found.setdefault(framework, [])
            if folder not in seen and folder + "*" not in seen:
                seen.append(mark)
    return found


@dataclass
class _Evidence:  # filled file by file, then read
    imports: dict[str, list[str]] = field(default_factory=dict)  # framework -> "file:line" of its imports
    pinned: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # framework -> (lowest, where)
    vendored: dict[str, tuple[str, str]] = field(default_factory=dict)  # framework -> (version, version file)
    files: dict[str, set[str]] = field(default_factory=dict)  # framework -> every file with evidence of it

    def note_imports(self, rel: str, lines: ImportLines) -> None:
        for root, line in lines:
            self.files.setdefault(IMPORT_FRAMEWORK[root], set()).add(rel)
            sites = self.imports.setdefault(IMPORT_FRAMEWORK[root], [])
            if len(sites) < MAX_EVIDENCE:
                sites.append(f"{rel}:{line}")

    def note_version_file(self, rel: str, text: str) -> None:
        if rel.endswith(VERSION_FILE):
            version = vendored_megatron(text)
            best = self.vendored.get("megatron-core")
            if version and (best is None or len(rel) < len(best[1])):
                self.vendored["megatron-core"] = (version, rel)
            if version:
                self.files.setdefault("megatron-core", set()).add(rel)

    def note_pins(self, rel: str, text: str) -> None:
        for framework, version, where in pins(rel, text):
            self.files.setdefault(framework, set()).add(rel)
            if framework not in self.pinned or (self.pinned[framework][0] is None and version):
                self.pinned[framework] = (version, where)


SourceText = Callable[[str, Path], str]  # (relative path, absolute path) -> its text; OSError when unreadable


def disk_text(rel: str, path: Path) -> str:
    from migrator.ground.input_files import MAX_SOURCE_BYTES, read_text

    return read_text(path, MAX_SOURCE_BYTES, errors="replace")


def overlaid(overlay: Mapping[str, bytes] | None) -> SourceText:
    """The text of each file as a scan with ``overlay`` (relative path -> bytes scanned instead) sees it."""
    if not overlay:
        return disk_text

    def text(rel: str, path: Path) -> str:
        return overlay[rel].decode("utf-8", "replace") if rel in overlay else disk_text(rel, path)

    return text


def _read_evidence(files: list[tuple[str, Path, str]], source: SourceText,
                   imports: Mapping[str, ImportLines] | None = None) -> _Evidence:
    """`imports`: the framework import lines the scan found in each Python file it read (`import_lines`);
    such a file is read here only when it is a version file or a setup.py."""
    found = _Evidence()
    imports = imports or {}
    for rel, path, kind in files:
        if kind not in ("python", "requirements", "pyproject"):
            continue
        lines = imports.get(rel) if kind == "python" else None
        pinned = kind in ("requirements", "pyproject") or Path(rel).name == "setup.py"
        if lines is not None:
            found.note_imports(rel, lines)
            if not pinned and not rel.endswith(VERSION_FILE):
                continue
        try:
            text = source(rel, path)
        except OSError:  # also a file the scan itself refused (not regular, over the cap)
            continue
        if kind == "python":
            if lines is None:
                found.note_imports(rel, pattern_lines(text))
            found.note_version_file(rel, text)
        if pinned:
            found.note_pins(rel, text)
    return found


def _framework(name: str, ev: _Evidence, folders: list[str]) -> Framework:
    """One framework's version from its strongest evidence (vendored, pin, installed, imports)."""
    evidence = list(ev.imports.get(name, []))
    lookalike = None
    if name not in ev.vendored and folders and not any(f.endswith("*") for f in folders):
        lookalike = folders[0]  # the project's own package of that name shadows the framework
    installed = None if name in ev.vendored or lookalike else installed_version(name)
    if lookalike:
        version, source = None, f"vendored look-alike {lookalike}/"
    elif name in ev.vendored:
        version, source = ev.vendored[name][0], f"vendored {ev.vendored[name][1]}"
    elif name in ev.pinned and ev.pinned[name][0]:
        version, source = ev.pinned[name][0], f"pin {ev.pinned[name][1]}"
    elif installed:
        version, source = installed, f"installed distribution {installed}"
    else:
        version, source = None, (f"pin {ev.pinned[name][1]} (no lower bound)" if name in ev.pinned else "imports only")
    if name in ev.pinned:
        evidence.append(ev.pinned[name][1])
    return Framework(name, version, source, tuple(evidence), lookalike, tuple(sorted(ev.files.get(name, ()))))


def detect(root: Path, files: list[tuple[str, Path, str]], source: SourceText = disk_text,
           imports: Mapping[str, ImportLines] | None = None) -> list[Framework]:
    """Frameworks of one scan. `files`: (relative POSIX path, absolute path, scanner kind), the scan's own files;
    `source` reads their text (`overlaid`: as `fix --diff` would write them); `imports`: the import lines the
    scan found in the Python files it read, by relative path (those files are not read again)."""
    ev = _read_evidence(files, source, imports)
    local = local_packages(files)
    return [_framework(name, ev, local.get(name, [])) for name in ORDER
            if name in ev.imports or name in ev.pinned or name in ev.vendored]
