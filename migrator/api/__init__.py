"""The programmatic interface: every function returns data and never prints.

    from migrator import api
    result = api.scan(["path/to/repo"])           # RunResult
    print(result.summary.by_family)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from migrator.catalogue.loader import Rule, load_catalogue
from migrator.ground.config import ConfigError, Settings
from migrator.ground.model import RunResult
from migrator.ground.progress import Progress, prefixed
from migrator.ground.usage_error import UsageError
from migrator.pipeline.options import resolve_settings
from migrator.pipeline.scan import scan_tree

if TYPE_CHECKING:
    from migrator.census.advise.model import AdviseResult
    from migrator.census.model import Census
    from migrator.engine.add_noqa import NoqaOutcome as AddNoqaOutcome
    from migrator.pipeline.fix import FixOutcome
    from migrator.reporters.report_data import ReportData


def _settled(paths: Sequence[str | Path], settings: Settings | None, overrides: dict[str, Any]) -> tuple[Settings, list[Path]]:
    if settings is None:
        return resolve_settings(paths, **overrides)
    return settings, [Path(p).absolute() for p in paths]


def scan(
    paths: Sequence[str | Path],
    settings: Settings | None = None,
    progress: Progress | None = None,
    memo: dict | None = None,
    **overrides: Any,
) -> RunResult:
    """Scan files and folders; findings are sorted by path, line and column. `memo`: an empty dict
    shared by several scans of one command, so that unchanged files are scanned once."""
    settings, resolved = _settled(paths, settings, overrides)
    return scan_tree(settings, resolved, progress, memo).result


def fix(
    paths: Sequence[str | Path],
    settings: Settings | None = None,
    *,
    target: str = "npu",
    exact_only: bool = False,
    annotate: bool = False,
    strip_annotations: bool = False,
    fuse: bool = False,
    write: bool = True,
    out_dir: str | Path | None = None,
    record: bool = True,
    progress: Progress | None = None,
    **overrides: Any,
) -> FixOutcome:
    """Rewrite what can be rewritten, as a transaction over the tree (`migrator/pipeline/fix.py`): every
    file is planned (fixed, re-parsed, encoded) before any is written; a file that cannot be planned or
    written is an error of that file only. `write=False` computes the changes only (for --diff/--check);
    its remaining findings are a fresh scan's of the planned texts."""
    settings, resolved = _settled(paths, settings, overrides)
    from migrator.pipeline.fix import FixRequest, FixTransaction  # here: a scan needs none of fix's pipeline

    request = FixRequest(target=target, exact_only=exact_only, annotate=annotate, strip_annotations=strip_annotations,
                         fuse=fuse, write=write, out_dir=Path(out_dir).absolute() if out_dir else None, record=record)
    return FixTransaction(settings, resolved, request, progress).run()


def ops(names: Sequence[str], soc: str = "A2", version: str | None = None) -> list[dict]:
    """`migrate ops NAME...`: status, dtypes, NPU equivalent and source per name; aliases (`F.`, `nn.`,
    `Tensor.`) expanded; a name a catalogue rule covers (`flash_attn_varlen_func`) gets `rules`; one
    neither in the table, nor in torch, nor in a rule gets `unknown_api: true` (exit 1)."""
    from migrator.catalogue.coverage import explain as explain_ops
    from migrator.catalogue.covering_rules import covering_rules

    rows = explain_ops(list(names), soc=soc, version=version, check_torch=True)
    for row in rows:
        rules = covering_rules(row["query"], load_catalogue()) if row.get("unknown_api") else []
        if rules:  # a non-torch API (flash_attn, apex) a rule replaces: known, just not to torch
            row["unknown_api"] = False
            row["rules"] = rules
    return rows


def trace_ops(target: str | Path, *, root: str | Path | None = None, soc: str | None = None,
              torch_npu_version: str | None = None, cann_version: str | None = None, write: bool = True,
              progress: Progress | None = None, **options: Any) -> tuple[Census, Path | None, Settings]:
    """`migrate ops --trace TARGET`: the runtime op census of a program (migrator/census/).

    TARGET is a tree with the validate.py protocol or a script (`script_args`); options are the
    fields of `migrator.census.TraceOptions` (`steps`, `fake`, `entry`, `bf16_policy`, `timeout`...).
    `cann_version` (or `[tool.migrate] cann-version`): the advisor's AICPU rules the perf lint judges with.
    The program runs only in a child process. Returns (census, path written or None, settings)."""
    from migrator.census import CensusError, TraceOptions, aicpu_rules, store, trace

    settings, _ = resolve_settings([target], root=root, soc=soc, torch_npu_version=torch_npu_version,
                                   cann_version=cann_version)
    try:
        cann = aicpu_rules.checked_version(settings.cann_version)  # before the run, not after it
        opts = TraceOptions(target=str(target), root=str(settings.root), soc=settings.soc,
                            torch_npu_version=settings.torch_npu_version, cann_version=cann, **options)
    except TypeError as exc:
        raise UsageError(f"bad trace option: {exc}") from None
    except aicpu_rules.AdvisorRulesError as exc:
        raise UsageError(f"{settings.config_file or 'cann-version'}: {exc}") from None
    try:
        if progress:
            progress("tracing in a child process", 0, 1)
        census = trace(opts)
        if progress:
            progress("tracing in a child process", 1, 1)
    except CensusError as exc:
        raise UsageError(str(exc)) from None
    path = store.write(settings.root, census) if write else None
    return census, path, settings


def ops_list(soc: str = "A2", version: str | None = None, status: str | None = None) -> list:
    from migrator.catalogue.coverage import iter_entries

    return [e for e in iter_entries(soc=soc, version=version, status=status) if e.known]


def explain(code: str) -> Rule:
    rule = load_catalogue().get(code)
    if rule is None:
        raise UsageError(f"unknown rule {code!r}; `migrate rules` lists them")
    return rule


def rules() -> list[Rule]:
    return list(load_catalogue().rules.values())


# ---- baseline and reviewer report (migrator/reporters/baseline.py, migrator/reporters/report_data.py)


def apply_baseline(result: RunResult, baseline: str | Path) -> RunResult:
    """Only the findings the baseline file does not list; `summary.baselined` counts the others."""
    from migrator.engine.scanned_lines import SourceLines
    from migrator.reporters import baseline as bl

    try:
        known = bl.load(baseline)
    except bl.BaselineError as exc:
        raise UsageError(str(exc)) from None
    return bl.filter_result(result, known, SourceLines(result.summary.root))


def add_noqa(result: RunResult) -> AddNoqaOutcome:
    """`scan --add-noqa`: a `# noqa: CODE` comment on the line of each finding of `result` (see
    `migrator.engine.add_noqa`); the files are written, the outcome counts comments and files and notes
    what was left."""
    from migrator.engine.add_noqa import add_noqa as add_comments

    return add_comments(result)


def baseline_text(result: RunResult) -> str:
    """The baseline file (JSON) recording every finding of `result`."""
    from migrator.engine.scanned_lines import SourceLines
    from migrator.reporters import baseline as bl

    return bl.dumps(bl.make(result, SourceLines(result.summary.root)))


def report(
    paths: Sequence[str | Path],
    settings: Settings | None = None,
    *,
    fix_record: str | Path | None = None,
    validation: str | Path | None = None,
    diffs: dict[str, str] | None = None,
    diffs_applied: bool = False,
    proposed_diffs: bool = False,
    progress: Progress | None = None,
    plan: str | Path | None = None,
    **overrides: Any,
) -> ReportData:
    """Everything `migrate report` shows, as a `migrator.reporters.report_data.ReportData` (render it with
    `migrator.reporters.report.render(data, "html" | "md")`). `diffs` maps paths to unified diffs;
    `proposed_diffs=True` asks `fix(write=False)` for them."""
    from migrator.reporters.report_data import ReportDataError, gather

    settings, resolved = _settled(paths, settings, overrides)
    result = scan(resolved, settings=settings, progress=progress)
    notes: list[str] = []
    if proposed_diffs and diffs is None:
        try:
            outcome = fix(resolved, settings=settings, target=settings.target, write=False,
                          progress=prefixed(progress, "diffs: "))
            diffs = {c.path: c.diff() for c in outcome.plan.changes if c.changed}
        except Exception as exc:  # the report still renders, with the reason shown
            notes.append(f"proposed diffs unavailable: {exc.__class__.__name__}: {exc}")
    try:
        data = gather(
            result, target=settings.target, soc=settings.soc, fix_record=fix_record,
            validation=validation, diffs=diffs, diffs_applied=diffs_applied, plan=plan,
        )
    except ReportDataError as exc:
        raise UsageError(str(exc)) from None
    return replace(data, notes=(*data.notes, *notes)) if notes else data


# ---- staged BF16 diff validation (migrator/validation/)


def validate(original: str | Path, *, progress: Callable[[str], None] | None = None, **options: Any) -> Any:
    """`migrate validate ORIGINAL` (see `migrator.api.programs.validate`); without `migrated` the tree is
    first migrated with `fix(target="npu", out_dir=<temp>)`."""
    from migrator.api import programs as api_programs

    return api_programs.validate(original, migrate=_migrate_for_validation, progress=progress, **options)


def validate_kernel(kernel: str, kernel_args: str, grid: str, **options: Any) -> Any:
    """`migrate validate --kernel FILE::KERNEL` (see `migrator.api.programs.validate_kernel`); without `ported`
    the file is first ported with `fix(target="npu")` on a copy."""
    from migrator.api import programs as api_programs

    return api_programs.validate_kernel(kernel, kernel_args, grid, port=_port_file, **options)


def _port_file(path: str, out_dir: str) -> tuple[str, list[str]]:
    """`path` copied into `out_dir` and fixed there for the npu target: (the ported file, error lines)."""
    import shutil

    root = Path(out_dir, "src")
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text("", encoding="utf-8")
    copy = root / Path(path).name
    shutil.copyfile(path, copy)
    outcome = fix([copy], root=root, target="npu", use_cache=False)
    return str(copy), [f"{p}: {e}" for p, e in outcome.errors]


def plan(model: str | Path, clusters: Sequence[str], **options: Any) -> Any:
    """`migrate plan` (see `migrator.api.programs.plan`); `check_s0` runs `validate` S0 on the best layouts."""
    from migrator.api import programs as api_programs

    return api_programs.plan(model, clusters, validate=validate, **options)


def calibrate_plan(model: str | Path | None, runs: Sequence[str | Path], logs: Sequence[str | Path] = (),
                   **options: Any) -> Any:
    """`migrate plan --calibrate` (see `migrator.api.programs.calibrate_plan`)."""
    from migrator.api import programs as api_programs

    return api_programs.calibrate_plan(model, runs, logs, **options)


def _migrate_for_validation(original: str, out_dir: str) -> list[str]:
    """The migrate step `migrate validate` runs when no migrated tree is given; error lines, none when done."""
    outcome = fix([original], root=original, target="npu", out_dir=out_dir)
    return [f"{p}: {e}" for p, e in outcome.errors]


def cache_clean() -> tuple[Path, int, int]:
    """`migrate cache clean`: (cache folder, files removed, bytes removed)."""
    from migrator.engine import cache

    folder = cache.cache_dir()
    files, size = cache.clean(folder)
    return folder, files, size


def advise(profile: str | Path, paths: Sequence[str | Path] = (), *, root: str | Path | None = None,
           run_advisor: bool = True) -> AdviseResult:
    """`migrate advise --profile DIR [PATHS]`: the perf and fusion findings of a scan of PATHS (the root's op
    census included, when it has one) checked against the torch_npu profile in DIR (confirmed / not seen /
    not checkable), and Huawei's `msprof-analyze advisor all -d DIR` where it is installed. Bad input raises
    UsageError naming the file."""
    from migrator.census.advise import advisor, checks
    from migrator.census.advise.model import AdviseResult, AdvisorRun
    from migrator.census.advise.profile import ProfileError, read
    from migrator.census.store import census_path

    try:
        facts = read(profile)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    settings, resolved = resolve_settings(list(paths) or ["."], root=root)
    findings = [f for f in scan_tree(settings, resolved, None, None).result.findings if f.family in ("perf", "fusion")]
    ran = advisor.run(str(profile)) if run_advisor else AdvisorRun(("msprof-analyze",), installed=False)
    return AdviseResult(facts, checks.check_all(findings, facts), ran, census_path(settings.root).is_file(),
                        facts.notes)


def __getattr__(name: str) -> Any:
    """`FixOutcome`, imported with fix's pipeline when first asked for."""
    if name == "FixOutcome":
        from migrator.pipeline.fix import FixOutcome

        return FixOutcome
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["scan", "fix", "explain", "rules", "resolve_settings", "UsageError", "ConfigError", "FixOutcome"]
__all__ += ["add_noqa", "apply_baseline", "baseline_text", "report", "validate", "validate_kernel", "plan",
            "calibrate_plan", "trace_ops", "cache_clean", "advise"]
