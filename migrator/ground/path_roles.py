"""Path roles: what part of a project a file is, so production code comes before tests, examples and docs.

A file's role, first rule that decides:

1. `[tool.migrate] path-roles` (`{ "legacy/**" = "example" }`, gitignore-style globs; the last matching
   pattern wins, as in a `.gitignore`);
2. a test by name or folder (`test_*.py`, `*_test.py`, `conftest.py`, `tests/`), even inside a package;
3. inside a folder the packaging ships (`production`): pyproject `[tool.setuptools] packages` /
   `package-dir` / `packages.find.where`, hatch and poetry `packages`, setup.cfg `[options]`, setup.py
   `packages=` / `find_packages(where)` / `package_dir` / `py_modules` where statically readable; without
   any of these, the top-level folders with `__init__.py` (at the root or under `src/`) that are not named
   like tests, examples, docs or tools (setuptools' automatic discovery leaves those out too);
4. a conventional folder, the first from the top: `examples/`, `demos/`, `tutorials/`, `notebooks/`,
   `contrib/` -> example; `docs/` -> docs; `benchmarks/`, `tools/`, `scripts/` -> script;
5. anything else is production (a root `train.py` is the project).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

ROLES = ("production", "script", "example", "test", "docs")  # the order of worst-first lists and effort
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}
TEST_FOLDERS = frozenset({"test", "tests", "testing", "unittests", "unit_tests"})
PACKAGE_TEST_FOLDERS = frozenset({"test", "tests", "unittests", "unit_tests"})  # `pkg.testing` is often an API
FOLDER_ROLES = {
    **dict.fromkeys(("examples", "example", "demo", "demos", "tutorials", "tutorial", "notebooks", "contrib",
                     "projects"), "example"),
    **dict.fromkeys(("docs", "doc"), "docs"),
    **dict.fromkeys(("benchmarks", "benchmark", "tools", "scripts"), "script"),
}


def role_rank(role: str | None) -> int:
    """Sort key: production first; an unknown role (a finding read from an older result) counts as production."""
    return ROLE_RANK.get(role or "production", 0)


def is_test_file(name: str) -> bool:
    return (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py") or name == "conftest.py"


def convention_role(rel: str, packaged: bool = False) -> str | None:
    """The role the path's own name and folders say (rules 2 and 4), or None; `packaged`: only tests count."""
    parts = rel.split("/")
    tests = PACKAGE_TEST_FOLDERS if packaged else TEST_FOLDERS
    if is_test_file(parts[-1]) or any(p in tests for p in parts[:-1]):
        return "test"
    if packaged:
        return None
    return next((FOLDER_ROLES[p] for p in parts[:-1] if p in FOLDER_ROLES), None)


@dataclass(frozen=True)
class PathRoles:
    """The role of each root-relative POSIX path of one project."""

    packaged: tuple[str, ...] = ()  # folders (and module files) the packaging ships, root-relative
    overrides: tuple[tuple[str, str], ...] = ()  # (glob, role) from `[tool.migrate] path-roles`
    _seen: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def role(self, rel: str) -> str:
        found = self._seen.get(rel)
        if found is None:
            found = self._seen[rel] = self._decide(rel)
        return found

    def _decide(self, rel: str) -> str:
        overridden = [role for glob, role in self.overrides if _glob(glob).match_file(rel)]
        if overridden:
            return overridden[-1]
        shipped = any(rel == p or rel.startswith(p + "/") for p in self.packaged)
        return convention_role(rel, packaged=shipped) or "production"


@lru_cache(maxsize=256)
def _glob(pattern: str) -> Any:
    from migrator.ground.globs import compile_globs

    return compile_globs([pattern])[0]


def path_roles(root: Path, overrides: tuple[tuple[str, str], ...] = ()) -> PathRoles:
    """The roles of `root`'s files, from its packaging metadata and `overrides`."""
    return PathRoles(tuple(sorted(set(packaged_paths(root)))), overrides)


def packaged_paths(root: Path) -> list[str]:
    """Root-relative folders and module files the project's packaging ships (see the module docstring)."""
    declared = [*_from_pyproject(root), *_from_setup_cfg(root), *_from_setup_py(root)]
    found = [p for p in declared if p != "." and ".." not in p.split("/") and (root / p).exists()]
    if found:
        return found
    return [*_found_packages(root, "."), *_found_packages(root, "src")]


def _found_packages(root: Path, where: str) -> Iterator[str]:
    """Top-level packages under `where` as setuptools' automatic discovery sees them (no tests, docs, tools...)."""
    if Path(where).is_absolute() or ".." in Path(where).parts:
        return  # the tree's own files only
    base = root / where
    try:
        children = sorted(base.iterdir())
    except OSError:
        return
    for child in children:
        name = child.name
        if name in TEST_FOLDERS or name in FOLDER_ROLES or name.startswith((".", "_")) or not name.isidentifier():
            continue
        if (child / "__init__.py").is_file():
            yield child.relative_to(root).as_posix()


def _named(names: Iterable[Any], package_dir: dict[str, str]) -> Iterator[str]:
    """Folders of dotted package names (`a.b` -> `src/a/b` under `package_dir = {"" = "src"}`)."""
    for name in names:
        if not isinstance(name, str) or not name:
            continue
        top, _, rest = name.partition(".")
        if top in package_dir:
            base = package_dir[top]
            yield _join(base, rest.replace(".", "/"))
        else:
            yield _join(package_dir.get("", ""), name.replace(".", "/"))


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/") not in ("", ".")) or "."


def _wheres(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else ["."]
    return [w for w in items if isinstance(w, str)] or ["."]


def _read(root: Path, name: str) -> str | None:
    from migrator.ground.input_files import MAX_SMALL_BYTES, read_text

    try:
        return read_text(root / name, MAX_SMALL_BYTES, root)
    except (OSError, UnicodeDecodeError):
        return None


def _from_pyproject(root: Path) -> list[str]:
    text = _read(root, "pyproject.toml")
    if not text:
        return []
    if sys.version_info >= (3, 11):  # imported here: a root without pyproject.toml needs no TOML reader
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return []
    out: list[str] = []
    setuptools = _table(data, "tool", "setuptools")
    package_dir = {k: v for k, v in _table(setuptools, "package-dir").items() if isinstance(v, str)}
    packages = setuptools.get("packages")
    if isinstance(packages, list):
        out.extend(_named(packages, package_dir))
    for where in _wheres(_table(setuptools, "packages", "find").get("where")) if isinstance(packages, dict) else ():
        out.extend(_found_packages(root, where))
    hatch = _table(data, "tool", "hatch", "build", "targets", "wheel").get("packages")
    out.extend(_join(value) for value in (hatch if isinstance(hatch, list) else []) if isinstance(value, str))
    poetry = _table(data, "tool", "poetry").get("packages")
    for entry in poetry if isinstance(poetry, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("include"), str):
            out.append(_join(str(entry.get("from") or ""), entry["include"]))
    name = _table(data, "project").get("name")
    if not out and isinstance(name, str):  # flit, hatch, pdm: the distribution's own import name
        module = name.replace("-", "_").replace(".", "_").lower()
        out.extend(p for p in (module, f"src/{module}", f"{module}.py", f"src/{module}.py") if (root / p).exists())
    return out


def _table(data: Any, *keys: str) -> dict[str, Any]:
    """The nested TOML table at `keys`, or an empty one where a key is missing or not a table."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def _from_setup_cfg(root: Path) -> list[str]:
    text = _read(root, "setup.cfg")
    if not text:
        return []
    import configparser  # here: most trees have no setup.cfg

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    if not parser.has_section("options"):
        return []
    options = parser["options"]
    package_dir = dict(_cfg_pairs(options.get("package_dir", "")))
    packages = options.get("packages", "").strip()
    if packages.startswith(("find:", "find_namespace:")):
        where = parser.get("options.packages.find", "where", fallback=package_dir.get("", ".")).strip() or "."
        return list(_found_packages(root, where))
    names = [n.strip() for n in packages.replace(",", "\n").splitlines() if n.strip()]
    modules = [m.strip() + ".py" for m in options.get("py_modules", "").replace(",", "\n").splitlines() if m.strip()]
    return [*_named(names, package_dir), *(_join(package_dir.get("", ""), m) for m in modules)]


def _cfg_pairs(text: str) -> Iterator[tuple[str, str]]:
    """`package_dir` of setup.cfg: `=src` or lines `name = folder`."""
    for line in text.splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            yield key.strip(), value.strip()


def _from_setup_py(root: Path) -> list[str]:
    text = _read(root, "setup.py")
    try:
        tree = ast.parse(text) if text else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "setup"), None) if tree else None
    if call is None:
        return []
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    package_dir = _literal(keywords.get("package_dir"))
    package_dir = {k: v for k, v in package_dir.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(package_dir, dict) else {}
    out: list[str] = []
    packages = keywords.get("packages")
    if isinstance(packages, ast.Call) and _called(packages) in ("find_packages", "find_namespace_packages"):
        where = next((_literal(k.value) for k in packages.keywords if k.arg == "where"), None)
        if where is None and packages.args:
            where = _literal(packages.args[0])
        out.extend(_found_packages(root, where if isinstance(where, str) else package_dir.get("", ".")))
    elif isinstance(names := _literal(packages), (list, tuple)):
        out.extend(_named(names, package_dir))
    modules = _literal(keywords.get("py_modules"))
    if isinstance(modules, (list, tuple)):
        out.extend(_join(package_dir.get("", ""), f"{m}.py") for m in modules if isinstance(m, str))
    return out


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
