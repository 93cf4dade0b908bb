"""Which training framework a scan root is built on, and which version: imports, pins, vendored copies.

Evidence, strongest first: a vendored Megatron-LM tree (`megatron/core/package_info.py`), a pin in
requirements*.txt / pyproject.toml / setup.py (read with `packaging.requirements`), then imports.
A pin gives the lowest version it allows (`==4.51.3` -> 4.51.3, `>=4.51` -> 4.51); none -> unknown.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# import root -> framework; accelerate and Trainer scripts count as transformers (the HF route)
IMPORT_FRAMEWORK = {
    "megatron": "megatron-core", "deepspeed": "deepspeed", "transformers": "transformers",
    "accelerate": "transformers", "lightning": "lightning", "pytorch_lightning": "lightning", "mmengine": "mmengine",
}
PIN_FRAMEWORK = {
    "megatron-core": "megatron-core", "deepspeed": "deepspeed", "transformers": "transformers",
    "lightning": "lightning", "pytorch-lightning": "lightning", "mmengine": "mmengine",
}
ORDER = ("megatron-core", "deepspeed", "transformers", "lightning", "mmengine")
IMPORT_LINE = re.compile(r"^[ \t]*(?:from|import)[ \t]+(" + "|".join(IMPORT_FRAMEWORK) + r")\b", re.MULTILINE)
MAX_EVIDENCE = 3


@dataclass(frozen=True)
class Framework:
    name: str  # megatron-core | deepspeed | transformers | lightning | mmengine
    version: str | None  # lowest version the evidence allows; None when unknown
    version_source: str  # "requirements.txt:3 `transformers>=4.51`", "vendored megatron/core/package_info.py", ...
    evidence: tuple[str, ...]  # first few places it is imported or pinned

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "version_source": self.version_source,
                "evidence": list(self.evidence)}


def _lowest(req: Requirement) -> str | None:
    best = None
    for spec in req.specifier:
        if spec.operator in ("==", "===", ">=", "~=", ">") and not spec.version.endswith("*"):
            best = spec.version if best is None else max(best, spec.version, key=_vkey)
    return best


def _vkey(v: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def _pins_in_requirements(text: str):
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            yield lineno, line


def _pins_in_pyproject(text: str):
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


def _pins_in_setup_py(text: str):
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
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            continue
        framework = PIN_FRAMEWORK.get(canonicalize_name(req.name))
        if framework:
            found.append((framework, _lowest(req), f"{rel}:{lineno} `{spec.strip()}`"))
    return found


def vendored_megatron(path: Path) -> str | None:
    """megatron-core version from `megatron/core/package_info.py` (MAJOR, MINOR, PATCH, PRE_RELEASE)."""
    from migrator.input_files import MAX_SOURCE_BYTES, read_text

    try:
        tree = ast.parse(read_text(path, MAX_SOURCE_BYTES, errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    parts: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant):
                parts[node.targets[0].id] = node.value.value
    if not all(k in parts for k in ("MAJOR", "MINOR", "PATCH")):
        return None
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts.get('PRE_RELEASE') or ''}"


def detect(root: Path, files: list[tuple[str, Path, str]]) -> list[Framework]:
    """Frameworks of one scan root. `files`: (relative POSIX path, absolute path, scanner kind)."""
    from migrator.input_files import MAX_SOURCE_BYTES, read_text

    imports: dict[str, list[str]] = {}
    pinned: dict[str, tuple[str | None, str]] = {}
    vendored: dict[str, tuple[str, str]] = {}
    for rel, path, kind in files:
        name = Path(rel).name
        if kind not in ("python", "requirements", "pyproject"):
            continue
        try:
            text = read_text(path, MAX_SOURCE_BYTES, errors="replace")
        except OSError:  # also a file the scan itself refused (not regular, over the cap)
            continue
        if kind == "python":
            for m in IMPORT_LINE.finditer(text):
                sites = imports.setdefault(IMPORT_FRAMEWORK[m.group(1)], [])
                if len(sites) < MAX_EVIDENCE:
                    sites.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}")
            if rel.endswith("megatron/core/package_info.py"):
                version = vendored_megatron(path)
                best = vendored.get("megatron-core")
                if version and (best is None or len(rel) < len(best[1])):
                    vendored["megatron-core"] = (version, rel)
        if kind in ("requirements", "pyproject") or name == "setup.py":
            for framework, version, where in pins(rel, text):
                if framework not in pinned or (pinned[framework][0] is None and version):
                    pinned[framework] = (version, where)
    found = []
    for name in ORDER:
        if name not in imports and name not in pinned and name not in vendored:
            continue
        evidence = list(imports.get(name, []))
        if name in vendored:
            version, source = vendored[name][0], f"vendored {vendored[name][1]}"
        elif name in pinned and pinned[name][0]:
            version, source = pinned[name][0], f"pin {pinned[name][1]}"
        else:
            version, source = None, (f"pin {pinned[name][1]} (no lower bound)" if name in pinned else "imports only")
        if name in pinned:
            evidence.append(pinned[name][1])
        found.append(Framework(name, version, source, tuple(evidence)))
    return found
