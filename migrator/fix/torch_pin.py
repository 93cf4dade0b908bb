"""The torch version a repository pins, and whether torch_npu then loads itself.

From torch 2.5 a device backend registers through the `torch.backends` entry point, and torch_npu
ships one (`torch_npu = torch_npu:_autoload`, ../shared/docs/ascend-facts.md §(a) "Entry points";
observed there: `import torch` loads an installed torch_npu). With a pinned minimum torch of 2.5.1 or
later (torch_npu pins torch exactly, so a matching torch_npu has the entry point too), a module needs
no `import torch_npu` for its side effect: the npu target adds one only at entry points, so tests and
library modules still import on a CPU-only CI host. No pin, or a lower one: every module gets it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

AUTOLOAD_FROM = Version("2.5.1")
_LOWER = (">=", "==", "~=", ">", "===")


@dataclass(frozen=True)
class TorchPin:
    minimum: Version | None  # the lowest torch any pin allows; None: no lower bound found
    source: str  # where it was read ("requirements.txt"), or "" when nowhere

    @property
    def autoload(self) -> bool:
        return self.minimum is not None and self.minimum >= AUTOLOAD_FROM

    def note(self) -> str:
        """One line for the fix output: why `import torch_npu` was or was not added per module."""
        if self.autoload:
            return (f"torch>={self.minimum} pinned in {self.source}: torch_npu loads itself on `import torch` "
                    "(torch.backends entry point, torch >= 2.5.1); `import torch_npu` added at entry points only")
        if not self.source:
            where = "no torch pin found"
        elif self.minimum is None:
            where = f"torch without a lower bound in {self.source}"
        else:
            where = f"torch {self.minimum} allowed by {self.source}"
        return f"{where}: `import torch_npu` added to every module that needs the npu device"


def _minimum(text: str) -> Version | None | bool:
    """torch's lower bound in one requirement; True: torch without one; None: not torch."""
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    if req.name.lower() != "torch":
        return None
    lows = []
    for spec in req.specifier:
        if spec.operator in _LOWER:
            try:
                lows.append(Version(spec.version.rstrip(".*")))
            except InvalidVersion:
                continue
    return max(lows) if lows else True  # `>=2.1,<3`: the lower bound; `>=2.1,>=2.6`: both hold


def _requirement_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return [line.split(" #", 1)[0].strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("#", "-"))]


def _pyproject(path: Path) -> list[str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    deps = data.get("project", {}).get("dependencies", [])
    return [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []


def _setup_py(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    return [elt.value for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "install_requires"
            and isinstance(node.value, (ast.List, ast.Tuple))
            for elt in node.value.elts if isinstance(elt, ast.Constant) and isinstance(elt.value, str)]


@lru_cache(maxsize=64)
def read_torch_pin(root: Path) -> TorchPin:
    """The lowest torch the repository at `root` allows, over requirements*.txt, pyproject's
    `[project] dependencies` and setup.py's `install_requires` (the lowest wins: it is what may run)."""
    sources = [(p.name, _requirement_lines(p)) for p in sorted(root.glob("requirements*.txt"))]
    sources += [("pyproject.toml", _pyproject(root / "pyproject.toml")), ("setup.py", _setup_py(root / "setup.py"))]
    best: TorchPin = TorchPin(None, "")
    for name, lines in sources:
        for line in lines:
            low = _minimum(line)
            if low is True:  # any torch at all may be installed: autoload is not given
                return TorchPin(None, name)
            if isinstance(low, Version) and (best.minimum is None or low < best.minimum):
                best = TorchPin(low, name)
    return best
