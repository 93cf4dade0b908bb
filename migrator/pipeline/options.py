"""Settings for one command, and the one place `ScanOptions` is built from them.

Every scan of a command (scan, fix's scans before and after writing, fix --diff/--check's scan of the
planned texts, the fixer's annotations) takes its options from `scan_options`, so none of them can
judge for another SoC, coverage table or census than the others.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from migrator.engine.scan_file import ScanOptions
from migrator.ground.config import RuleSelector, Settings, find_root, load_settings
from migrator.ground.usage_error import UsageError
from migrator.ground.workdir import CENSUS_FILE

if TYPE_CHECKING:
    from migrator.engine.census_perf import TracedPerf



def scan_options(settings: Settings, training_dtypes: tuple[str, ...] = ()) -> ScanOptions:
    """What the per-file scan judges with: rule selection, SoC, coverage table, the root's op census
    (`.migrate/op-trace.json`), the fix target. The tree's training dtypes are combined by the engine
    from every file's evidence (`engine/scanned.py`); `training_dtypes` is for a scan of one text."""
    traced, census_perf = _census_facts(settings.root)
    return ScanOptions(
        select=settings.select,
        ignore=settings.ignore,
        per_file_ignores=settings.per_file_ignores,
        soc=settings.soc,
        torch_npu_version=settings.torch_npu_version,
        traced=traced,
        census_perf=census_perf,
        target=settings.target,
        training_dtypes=training_dtypes,
    )


def _census_facts(root: Path) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[TracedPerf, ...]]:
    """The op census's traced APIs and perf sites; without a census file the census package (whose records
    import validation's) is not imported, a start-up cost every scan would pay."""
    try:
        os.stat(Path(root) / CENSUS_FILE)
    except OSError:
        return (), ()
    from migrator.census.store import traced_apis, traced_perf
    from migrator.engine.census_perf import TracedPerf

    return (traced_apis(root),
            tuple(TracedPerf(s.impl, s.path, s.line, s.symbol, s.message) for s in traced_perf(root)))


def selector(settings: Settings) -> RuleSelector:
    return RuleSelector(settings.select, settings.ignore)


def resolve_settings(paths: Sequence[str | Path], root: str | Path | None = None,
                     **overrides: Any) -> tuple[Settings, list[Path]]:
    """The settings of the root (given, or the paths' nearest project folder) with `overrides`, and the
    paths made absolute (links not followed); a missing path or a symlink loop is a usage error."""
    resolved = []
    for p in paths or ["."]:
        path = Path(p)
        if not path.exists() and not path.is_symlink():
            raise UsageError(f"{p}: no such file or directory")
        if path.is_symlink() and _is_link_loop(path):
            raise UsageError(f"{p}: a symlink loop (following it leads back to itself); nothing to scan")
        resolved.append(path.absolute())
    root_path = Path(root).absolute() if root else find_root(resolved)
    settings = load_settings(root_path).with_overrides(**overrides)
    _check_coverage_choice(settings)
    return settings, resolved


def _is_link_loop(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _check_coverage_choice(settings: Settings) -> None:
    from migrator.catalogue.coverage import CoverageError, available_versions, socs

    try:
        versions = available_versions()
        if settings.torch_npu_version and settings.torch_npu_version not in versions:
            raise UsageError(
                f"unknown torch-npu version {settings.torch_npu_version!r}; coverage tables shipped: {', '.join(versions)}"
            )
        valid_socs = socs(settings.torch_npu_version)
    except CoverageError as exc:
        raise UsageError(str(exc)) from None
    if settings.soc not in valid_socs:
        raise UsageError(f"unknown SoC {settings.soc!r}; choose one of {', '.join(valid_socs)}")
