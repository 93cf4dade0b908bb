"""The programmatic interface: every function returns data and never prints.

    from migrator import api
    result = api.scan(["path/to/repo"])           # RunResult
    print(result.summary.by_family)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from migrator import __version__
from migrator.config import ConfigError, Settings, find_root, load_settings
from migrator.model import FAMILIES, Finding, RunResult, Summary, ToolInfo
from migrator.rules.catalogue import Rule, load_catalogue

MAX_LISTED_MARKERS = 200


class UsageError(ValueError):
    """Bad arguments (missing paths, unknown codes): exit 2 with this message."""


def resolve_settings(paths: Sequence[str | Path], root: str | Path | None = None, **overrides) -> tuple[Settings, list[Path]]:
    resolved = []
    for p in paths or ["."]:
        path = Path(p)
        if not path.exists() and not path.is_symlink():
            raise UsageError(f"{p}: no such file or directory")
        resolved.append(path.absolute())
    root_path = Path(root).absolute() if root else find_root(resolved)
    settings = load_settings(root_path).with_overrides(**overrides)
    return settings, resolved


def scan(
    paths: Sequence[str | Path],
    settings: Settings | None = None,
    progress: Callable[[int, int], None] | None = None,
    **overrides,
) -> RunResult:
    """Scan files and folders; findings are sorted by path, line and column."""
    from migrator.engine.runner import run

    if settings is None:
        settings, resolved = resolve_settings(paths, **overrides)
    else:
        resolved = [Path(p).absolute() for p in paths]
    catalogue = load_catalogue()
    _check_codes(settings.select + settings.ignore, catalogue.rules)
    output = run(settings, resolved, progress)
    findings = tuple(sorted((f for r in output.files for f in r.findings), key=Finding.sort_key))
    markers = tuple(m for r in output.files for m in r.markers)
    by_family = Counter(f.family for f in findings)
    summary = Summary(
        root=settings.root.as_posix(),
        files_scanned=sum(1 for r in output.files if not r.skipped),
        files_skipped=len(output.skipped),
        findings=len(findings),
        by_family={fam: by_family.get(fam, 0) for fam in FAMILIES},
        by_severity=dict(sorted(Counter(f.severity for f in findings).items())),
        by_fix_kind={
            "exact": sum(1 for f in findings if f.fix and f.fix.kind == "exact"),
            "numerics": sum(1 for f in findings if f.fix and f.fix.kind == "numerics"),
            "manual": sum(1 for f in findings if f.fix is None),
        },
        suppressed=sum(r.suppressed for r in output.files),
        unattributed_markers=len(markers),
        unattributed=markers[:MAX_LISTED_MARKERS],
    )
    tool = ToolInfo("ascend-migrate", __version__, catalogue.digest)
    return RunResult(tool=tool, summary=summary, findings=findings, skipped=output.skipped)


def _check_codes(codes: Sequence[str], rules: dict[str, Rule]) -> None:
    for code in codes:
        if not any(c.startswith(code) for c in rules):
            raise UsageError(f"unknown rule code or prefix {code!r} (see `migrate rules`)")


def explain(code: str) -> Rule:
    rule = load_catalogue().get(code)
    if rule is None:
        raise UsageError(f"unknown rule {code!r}; `migrate rules` lists them")
    return rule


def rules() -> list[Rule]:
    return list(load_catalogue().rules.values())


__all__ = ["scan", "explain", "rules", "resolve_settings", "UsageError", "ConfigError"]
