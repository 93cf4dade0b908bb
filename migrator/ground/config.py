"""Settings: `[tool.migrate]` in the scan root's pyproject.toml, overridden by the command line."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from migrator.ground.kinds import Target
from migrator.ground.model import FAIL_LEVELS, FAMILY_PREFIX

TARGETS = tuple(t.value for t in Target)
SOCS = ("A2", "A3", "950DT")
ROUTES = ("auto", "none", "mindspeed", "deepspeed", "hf")  # migrator.routes.CHOICES (a test keeps them equal)
FAMILY_WORDS = FAMILY_PREFIX  # family names work wherever codes do: --select attention
KNOWN_KEYS = {
    "select", "ignore", "exclude", "extend-exclude", "per-file-ignores", "fail-on", "target", "soc",
    "torch-npu-version", "baseline", "route", "path-roles",
    "cann-version",  # the msprof-analyze advisor's AICPU rules the op census judges with (migrate ops --trace)
    "clusters",  # cluster profiles for `migrate plan` (migrator/plan/clusters.py reads them)
}


class ConfigError(ValueError):
    """Bad configuration: the message names the file and the key (exit 2)."""


@dataclass(frozen=True)
class Settings:
    root: Path
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    fail_on: str = "warning"
    target: str = "npu"
    soc: str = "A2"
    torch_npu_version: str | None = None
    jobs: int = 0  # 0 = automatic
    use_cache: bool = True
    config_file: Path | None = None
    baseline: Path | None = None  # `baseline = "file"`: report only findings not listed there
    route: str = "auto"  # framework route (migrator/routes): auto, none, or a route name
    path_roles: tuple[tuple[str, str], ...] = ()  # `path-roles`: (glob, role), migrator/ground/path_roles.py
    cann_version: str | None = None  # `cann-version`: the advisor's AICPU rules for the census (newest: None)

    def cache_key(self) -> str:
        """Everything that changes a file's findings, except the file itself."""
        return repr(
            (self.select, self.ignore, self.per_file_ignores, self.target, self.soc, self.torch_npu_version)
        )

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def find_root(paths: list[Path]) -> Path:
    """Nearest ancestor of the first path, as given, that holds pyproject.toml or .git.

    The path is made absolute without following links: the root is where the user stands, not where
    a link points (`migrate fix link.py` with the link's target in another project must not write
    that project's `.migrate/`)."""
    start = Path(os.path.abspath(paths[0] if paths else Path.cwd()))
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if (candidate / "pyproject.toml").is_file() or (candidate / ".git").exists():
            return candidate
    return folder


def _codes(value: Any, key: str, source: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: [tool.migrate] {key} must be a list of rule codes or prefixes")
    return tuple(normalise_code(v) for v in value)


def _check_globs(patterns: list[str], key: str, source: Path) -> None:
    from migrator.ground.globs import GlobError, check_pattern

    for pattern in patterns:
        try:
            check_pattern(pattern)
        except GlobError as exc:
            raise ConfigError(f"{source}: [tool.migrate] {key}: {exc}") from None


def normalise_code(value: str) -> str:
    value = value.strip()
    return FAMILY_WORDS.get(value.lower(), value.upper())


def load_settings(root: Path) -> Settings:
    path = root / "pyproject.toml"
    base = Settings(root=root)
    section = _migrate_section(path, root)
    if section is None:
        return base
    return replace(base, **_section_changes(section, path, root))


def _migrate_section(path: Path, root: Path) -> dict[str, Any] | None:
    """The `[tool.migrate]` table of pyproject.toml, or None when there is no file or no such table."""
    from migrator.ground.input_files import MAX_SMALL_BYTES, read_text

    if not os.path.lexists(path):
        return None
    if sys.version_info >= (3, 11):  # imported here: a root without pyproject.toml needs no TOML reader
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(read_text(path, MAX_SMALL_BYTES, root))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: cannot read configuration: nested too deeply for the TOML reader") from None
    tool = data.get("tool")
    if tool is not None and not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table ([tool.*] sections), not {type(tool).__name__}")
    section = (tool or {}).get("migrate")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.migrate] must be a table")
    unknown = sorted(set(section) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) in [tool.migrate]: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    return section


# keys whose value must be one of a fixed set: (toml key, Settings field, allowed values)
_CHOICE_KEYS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("fail-on", "fail_on", tuple(FAIL_LEVELS)),
    ("target", "target", TARGETS),
    ("soc", "soc", SOCS),
    ("route", "route", ROUTES),
)


def _section_changes(section: dict[str, Any], path: Path, root: Path) -> dict[str, Any]:
    """Settings fields from a checked `[tool.migrate]` table; keys are checked in a fixed order."""
    changes: dict[str, Any] = {"config_file": path}
    for key in ("select", "ignore"):
        if key in section:
            changes[key] = _codes(section[key], key, path)
    excludes = _excludes(section, path)
    if excludes is not None:
        changes["exclude"] = excludes
    if "per-file-ignores" in section:
        changes["per_file_ignores"] = _per_file_ignores(section["per-file-ignores"], path)
    if "path-roles" in section:
        changes["path_roles"] = _path_roles(section["path-roles"], path)
    for key, name, allowed in _CHOICE_KEYS:
        if key in section:
            changes[name] = _choice(section[key], key, allowed, path)
    if "torch-npu-version" in section:
        changes["torch_npu_version"] = str(section["torch-npu-version"])
    if "cann-version" in section:
        changes["cann_version"] = str(section["cann-version"])
    if "baseline" in section:
        changes["baseline"] = _baseline(section["baseline"], path, root)
    return changes


def _excludes(section: dict[str, Any], path: Path) -> tuple[str, ...] | None:
    """`exclude` and `extend-exclude` together, or None when neither is given."""
    found: tuple[str, ...] | None = None
    for key in ("exclude", "extend-exclude"):
        if key in section:
            value = section[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{path}: [tool.migrate] {key} must be a list of glob patterns")
            _check_globs(value, key, path)
            found = (found or ()) + tuple(value)
    return found


def _per_file_ignores(pfi: Any, path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(pfi, dict):
        raise ConfigError(f"{path}: [tool.migrate] per-file-ignores must be a table of glob = [codes]")
    _check_globs(list(pfi), "per-file-ignores", path)
    return tuple((glob, _codes(codes, f"per-file-ignores.{glob}", path)) for glob, codes in sorted(pfi.items()))


def _path_roles(table: Any, path: Path) -> tuple[tuple[str, str], ...]:
    """`path-roles = { "legacy/**" = "example" }`: globs in the table's order (the last match wins)."""
    from migrator.ground.path_roles import ROLES

    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.migrate] path-roles must be a table of glob = role "
                          f"(role: {', '.join(ROLES)})")
    _check_globs(list(table), "path-roles", path)
    for glob, role in table.items():
        if role not in ROLES:
            raise ConfigError(f"{path}: [tool.migrate] path-roles: {glob!r} = {role!r} is not a role; "
                              f"use one of {', '.join(ROLES)}")
    return tuple((glob, str(role)) for glob, role in table.items())


def _choice(value: Any, key: str, allowed: tuple[str, ...], path: Path) -> str:
    if value not in allowed:
        raise ConfigError(f"{path}: [tool.migrate] {key} must be one of {', '.join(allowed)}")
    return str(value)


def _baseline(value: Any, path: Path, root: Path) -> Path:
    from migrator.ground.input_files import inside_root

    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(f"{path}: [tool.migrate] baseline must be a file path (relative to {root})")
    if not inside_root(root / value, root):
        raise ConfigError(f"{path}: [tool.migrate] baseline {value!r} resolves outside the project "
                          f"root {root}: not read (give a path inside it, or --baseline on the command line)")
    return root / value


@dataclass(frozen=True)
class RuleSelector:
    """Which codes run for which file."""

    select: tuple[str, ...]
    ignore: tuple[str, ...]
    per_file: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    def enabled(self, code: str, default_enabled: bool) -> bool:
        if any(code.startswith(i) for i in self.ignore):
            return False
        if not self.select:
            return default_enabled
        if code in self.select:
            return True
        return default_enabled and any(code.startswith(s) for s in self.select)
