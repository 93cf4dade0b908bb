"""Plan and apply fixes over a scan result; write nothing unless asked, never a broken file."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.catalogue.loader import Rule, load_catalogue
from migrator.engine.scan_file import ScanOptions
from migrator.engine.source import UnreadableSource, decode_python, decode_text
from migrator.fix import ledger, text_fixer
from migrator.fix.annotate import annotated
from migrator.fix.choices import FixChoices
from migrator.fix.entry_points import MAIN_GUARD
from migrator.fix.import_order import read_style
from migrator.fix.line_map import line_map as _line_map
from migrator.fix.pool import PythonJob, PythonOutcome, fix_modules
from migrator.fix.runtime_module import Planner, RuntimeImport
from migrator.fix.spool import Spool, Spooled, bytes_of, same_text, text_of
from migrator.fix.torch_pin import read_torch_pin
from migrator.fix.writer import inside, sniff
from migrator.ground.cycles import cycle_collection_paused
from migrator.ground.fix_record import Edit as RecordedEdit
from migrator.ground.fix_record import Span
from migrator.ground.kinds import Target
from migrator.ground.model import Finding, RunResult

if TYPE_CHECKING:
    from migrator.engine.workers import WorkerPool

LAUNCHED_SCRIPT = re.compile(r"(?:python3?|torchrun|deepspeed|accelerate\s+launch)\b[^\n#]*?\s([\w./-]+\.py)\b")
RECORD_PATH = ledger.RECORD_PATH


@dataclass(frozen=True)
class Edit:
    code: str
    fix_kind: str
    title: str
    symbol: str
    line: int
    column: int
    end_line: int
    end_column: int
    new_line: int = 0  # where the edited lines are in the fixed file (whole lines)
    new_end_line: int = 0
    new_end_column: int = 1
    cell: int | None = None  # notebooks: 1-based cell; the lines are lines of that cell
    new_sha256: str | None = None  # hash of the edited lines after the fix (the ledger looks for them later)

    def to_record(self) -> RecordedEdit:
        """The edit as the fix record keeps it (`migrator/ground/fix_record.py`)."""
        return RecordedEdit(
            code=self.code, fix_kind=self.fix_kind, title=self.title, symbol=self.symbol,
            original=Span(line=self.line, column=self.column, end_line=self.end_line, end_column=self.end_column),
            new=Span(line=self.new_line, column=1, end_line=self.new_end_line, end_column=self.new_end_column,
                     sha256=self.new_sha256),
            cell=self.cell,
        )


def _edit_line_map(kind: str | None, before: str, after: str,
                   cell: tuple[str, str] | None) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """Old line -> new lines, for the whole file or (notebooks) one cell's source. Span edits that kept
    every line in place (configs, Dockerfiles, scripts) skip the diff, which is quadratic on huge files."""
    if cell is not None:
        return _line_map(*cell)
    if kind in ("config", "dockerfile", "shell") and before.count("\n") == after.count("\n"):
        new = after.splitlines()
        return {i: (i, i) for i in range(1, len(new) + 1)}, new
    return _line_map(before, after)


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the root, POSIX
    held_before: str | Spooled  # the texts, in memory or in the plan's spool (`before`, `after`)
    held_after: str | Spooled
    edits: tuple[Edit, ...] = ()
    declined: tuple[tuple[Finding, str], ...] = ()
    error: str | None = None
    write_to: str | None = None  # a symlink's target (relative to the root): the file written instead
    held_encoded: bytes | Spooled | None = field(default=None, repr=False, compare=False)  # `encoded`
    before_sha256: str = ""
    runtime_module: bool = False  # the tree's `_migrate_runtime.py`, written by the fix (no edits)
    imports_module: str | None = None  # the runtime module this file now imports (written before it)

    @property
    def before(self) -> str:
        return text_of(self.held_before)

    @property
    def after(self) -> str:
        return text_of(self.held_after)

    @property
    def encoded(self) -> bytes | None:
        """`after` in the file's encoding."""
        return bytes_of(self.held_encoded)

    @property
    def real_path(self) -> str:
        return self.write_to or self.path

    @property
    def changed(self) -> bool:
        return self.error is None and not same_text(self.held_before, self.held_after)

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


@dataclass(frozen=True)
class FixOptions(FixChoices):
    jobs: int = 0  # worker processes for big trees; 0 = one per CPU
    scan: ScanOptions | None = None  # what --annotate judges the fixed text with (pipeline/options.scan_options)

    @classmethod
    def of(cls, choices: FixChoices, *, jobs: int = 0, scan: ScanOptions | None = None) -> FixOptions:
        """The fixer's options for what a request chose."""
        return replace(cls(jobs=jobs, scan=scan), **vars(choices.chosen()))


@dataclass(frozen=True)
class FixPlan:
    root: Path
    changes: tuple[FileChange, ...]
    options: FixOptions
    errors: tuple[tuple[str, str], ...] = field(default=())
    notes: tuple[str, ...] = ()  # decisions a reviewer should see (where `import torch_npu` went, and why)


IMPORTS_TORCH = re.compile(r"^[ \t]*(?:import[ \t]+torch\b|from[ \t]+torch\b[\w.]*[ \t]+import\b)", re.MULTILINE)


SHELL_SCRIPTS = (".sh", ".bash", ".zsh", ".slurm", ".sbatch")


def _entry_facts(rel: str, text: str, read: _Read) -> None:
    """What `_entry_points` judges a file by, taken while its text is at hand."""
    if rel.endswith(".py") and MAIN_GUARD.search(text):
        read.mains[rel] = bool(IMPORTS_TORCH.search(text))
    if rel.endswith(SHELL_SCRIPTS):
        base = Path(rel).parent
        for m in LAUNCHED_SCRIPT.finditer(text):
            for candidate in ((base / m.group(1)).as_posix(), m.group(1)):
                read.launched.add(candidate.lstrip("./") if candidate.startswith("./") else candidate)


def _entry_points(read: _Read) -> set[str]:
    """Scripts that get `import torch_npu` even where no fix needs its names: `__main__` modules that import
    torch (a build file or a script without torch has no NPU to register) and the scripts launchers run."""
    from migrator.catalogue.site import is_build_file

    def imports_torch(rel: str) -> bool:
        if rel in read.mains:
            return read.mains[rel]
        return rel in read.texts and bool(IMPORTS_TORCH.search(text_of(read.texts[rel])))

    return {e for e in set(read.mains) | read.launched if imports_torch(e) and not is_build_file(e)}


def _read(root: Path, rel: str) -> tuple[str, bytes, str] | str:
    """(text without BOM, bytes, encoding), or why the file cannot be read."""
    try:
        data = (root / rel).read_bytes()
        source = decode_python(data) if rel.endswith(".py") else decode_text(data)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}; file left unchanged"
    except UnreadableSource as exc:
        return f"cannot decode: {exc}; file left unchanged"
    return source.text if not source.text.startswith("\ufeff") else source.text[1:], data, source.encoding


def _locate(root: Path, real_root: Path, rel: str) -> tuple[str, str | None]:
    """(path, relative to the real root, of the file `rel` is or links to; why it cannot be fixed)."""
    try:
        real = (root / rel).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        return rel, f"cannot read: {getattr(exc, 'strerror', None) or exc}; file left unchanged"
    if not inside(real, real_root):
        where = f"a symlink to {real}, which is" if (root / rel).is_symlink() else "the file is"
        return rel, f"{where} outside the root {root}; nothing is written outside the root; file left unchanged"
    return real.relative_to(real_root).as_posix(), None


def _grouped(root: Path, rels: list[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Real file -> the paths naming it (its own path first when scanned), and per-path errors.
    A symlink is never replaced: its target is fixed once, and only inside the root."""
    real_root = root.resolve()
    groups: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    for rel in rels:
        real, error = _locate(root, real_root, rel)
        if error:
            errors[rel] = error
        else:
            groups.setdefault(real, []).append(rel)
    for real, members in groups.items():
        members.sort(key=lambda m: (m != real, m))
    return groups, errors


def _encode(data: bytes, encoding: str, text: str) -> tuple[bytes | None, str | None]:
    """The fixed text in the file's own encoding and BOM, or why it cannot be (a planning error)."""
    enc = sniff(data, encoding)
    try:
        return enc.encode(text), None
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        char = text[exc.start]
        return None, (f"the fixed text cannot be written in the file's encoding {enc.encoding} "
                      f"({char!r}, U+{ord(char):04X}, line {line}); file left unchanged")


@dataclass
class _Fixed:
    """One file's text after its fixer ran (before annotation and encoding)."""

    text: str
    applied: list[Finding] = field(default_factory=list)
    declined: list[tuple[Finding, str]] = field(default_factory=list)
    error: str | None = None
    cell_texts: dict[int, tuple[str, str]] = field(default_factory=dict)
    runtime_at: RuntimeImport | None = None  # the runtime module this file now imports


@dataclass(frozen=True)
class _Read:
    """The files to plan, read once per real file (links fixed through their real path), each text in the
    plan's spool as it is read: the bytes are kept as their first three (the BOM) and their hash."""

    groups: dict[str, list[str]]
    errors: dict[str, str]
    texts: dict[str, Spooled]
    raw: dict[str, tuple[bytes, str, str]]  # (first bytes, encoding, sha256)
    real_of: dict[str, str]
    mains: dict[str, bool] = field(default_factory=dict)  # `__main__` modules -> whether they import torch
    launched: set[str] = field(default_factory=set)  # the scripts that shell scripts run


def _read_all(root: Path, rels: list[str], spool: Spool) -> _Read:
    groups, errors = _grouped(root, rels)
    read = _Read(groups, errors, {}, {}, {})
    for real, members in groups.items():
        got = _read(root, members[0])
        if isinstance(got, str):
            errors.update(dict.fromkeys(members, got))
            continue
        text, data, enc = got
        _entry_facts(members[0], text, read)
        read.texts[members[0]] = spool.keep(text)
        read.raw[members[0]] = (data[:3], enc, ledger.sha256(data))
        read.real_of[members[0]] = real
    return read


def plan_fixes(scan: RunResult, root: Path, options: FixOptions, extra_files: Collection[str] = frozenset(),
               progress: Callable[[int, int], None] | None = None, context: Collection[Finding] = (),
               pool: WorkerPool | None = None) -> FixPlan:
    """Every file planned in full (read, fixed, re-parsed, encoded) before anything is written; a file
    that cannot be planned gets its error and is left unchanged, the others go on. `context`: the scan's
    findings before a route took some out (what an availability check guards is judged on all of them);
    `pool`: workers started ahead for the Python modules (`pool.early_workers`)."""
    by_file: dict[str, list[Finding]] = {}
    for f in scan.findings:
        by_file.setdefault(f.path, []).append(f)
    spool = Spool()  # each text read or planned goes there: this process holds one file's at a time
    read = _read_all(root, sorted(set(by_file) | set(extra_files)), spool)
    entries = _entry_points(read)
    runtime = Planner(root, ledger.recorded_runtime_modules(root)) if options.target == Target.PORTABLE else None
    every: dict[str, list[Finding]] = {}
    for f in context or scan.findings:
        every.setdefault(f.path, []).append(f)
    modules = _fix_modules(root, read.texts, by_file, entries, options, runtime, read.real_of, progress, every, pool,
                           spool)
    changes: list[FileChange] = [FileChange(rel, "", "", error=why) for rel, why in read.errors.items()]
    for rel, held in read.texts.items():
        changes.extend(_plan_file(rel, held, read, by_file.get(rel, []), options, modules.pop(rel, None), runtime,
                                  spool))
    for module in runtime.writes() if runtime else ():
        changes.append(FileChange(module.path, module.before, module.after, held_encoded=module.after.encode("utf-8"),
                                  before_sha256=ledger.sha256(module.before_bytes), runtime_module=True))
    changes.sort(key=lambda c: c.path)
    notes = (read_torch_pin(root).note(),) if options.target == Target.NPU else ()
    return FixPlan(root, tuple(changes), options, notes=notes)


def _plan_file(rel: str, held: Spooled, read: _Read, findings: list[Finding], options: FixOptions,
               module: tuple[PythonOutcome, RuntimeImport | None] | None, runtime: Planner | None,
               spool: Spool) -> list[FileChange]:
    """The planned change of one file (and of its other names, through links), its texts in `spool`."""
    from migrator.engine.discover import file_kind

    kind = file_kind(Path(rel))
    head, enc, digest = read.raw[rel]
    real = read.real_of[rel]
    if (module is None and not (options.fuse or options.annotate or options.strip_annotations)
            and not _fixable(findings, options, load_catalogue().rules)):  # nothing can change: not read back
        return [FileChange(name, held, held, (), (), None, real if real != name else None, None, digest)
                for name in (rel, *read.groups[real][1:])]
    text = text_of(held)
    fixed = _fixed_text(rel, kind, _source(text, options), findings, options, module)
    new = fixed.text
    if options.annotate and fixed.error is None:
        new = annotated(rel, new, findings, fixed.applied, fixed.declined, options.scan or ScanOptions(target=options.target),
                        options.strip_annotations, enc)
    encoded, error = None, fixed.error
    if error is None and new != text:
        encoded, error = _encode(head, enc, new)
    applied = fixed.applied
    if error is not None:
        new, applied = text, []
    elif fixed.runtime_at is not None and runtime is not None:
        runtime.used.add(fixed.runtime_at.path)
    edits = _edits(kind, text, new, applied, fixed.cell_texts)
    needs = fixed.runtime_at.path if fixed.runtime_at is not None and error is None else None
    before = held
    after = before if new == text else spool.keep(new)
    changes = [FileChange(rel, before, after, edits, tuple(fixed.declined), error, real if real != rel else None,
                          spool.keep(encoded) if encoded is not None else None, digest, imports_module=needs)]
    for link in read.groups[real][1:]:  # other names of the same file: fixed once, through its real path
        changes.append(FileChange(link, before, before, (), tuple(fixed.declined), None, real, None, digest))
    return changes


def _fixed_text(rel: str, kind: str | None, source: str, findings: list[Finding], options: FixOptions,
                module: tuple[PythonOutcome, RuntimeImport | None] | None) -> _Fixed:
    """What the file's fixer makes of it: notebooks, configs, Python modules (fixed by `_fix_modules`,
    re-parsed here) and text files each by their own fixer."""
    rules = load_catalogue().rules
    fixable = _fixable(findings, options, rules)
    if kind == "notebook":
        if not fixable:
            return _Fixed(source)
        new, applied, declined, cells, error = _fix_notebook(source, fixable, rules, options.target)
        return _Fixed(new, applied, declined, error, cells)
    if kind == "config":
        if not fixable:
            return _Fixed(source)
        from migrator.fix.config_fixer import fix_config

        new, applied, declined = fix_config(rel, source, fixable, options.target)
        return _Fixed(new, applied, declined)
    if rel.endswith(".py"):
        fixed = _fixed_module(source, module)
        if options.fuse and fixed.error is None:  # opt-in: FUS sites branch to the fused op
            from migrator.fix.fusion_rewrite import fuse_findings

            fixed.text, fused, refused = fuse_findings(fixed.text, findings)
            fixed.applied += fused
            fixed.declined += refused
        return fixed
    if fixable:
        new, applied, declined = text_fixer.fix_text(source, fixable, options.target)
        return _Fixed(new, applied, declined)
    return _Fixed(source)


def _fixed_module(source: str, module: tuple[PythonOutcome, RuntimeImport | None] | None) -> _Fixed:
    fixed = _Fixed(source)
    if module is not None:
        outcome, where = module
        runtime_at = where if where is not None and outcome.runtime_names else None
        fixed = _Fixed(text_of(outcome.text), outcome.applied, outcome.declined, outcome.error, runtime_at=runtime_at)
    if fixed.error is None and fixed.text != source:
        try:
            with cycle_collection_paused():  # the tree is dropped at once; here the collector would walk the plan too
                ast.parse(fixed.text)
        except SyntaxError as exc:
            fixed.error = f"the fixed text would not parse ({exc.msg}, line {exc.lineno}); file left unchanged"
    return fixed


def _edits(kind: str | None, text: str, new: str, applied: list[Finding],
           cell_texts: dict[int, tuple[str, str]]) -> tuple[Edit, ...]:
    """Each applied finding as an edit, with where its lines are in the new text."""
    maps: dict[int | None, tuple[dict[int, tuple[int, int]], list[str]]] = {}
    edits = []
    for f in sorted(applied, key=Finding.sort_key):
        if f.cell not in maps:
            maps[f.cell] = _edit_line_map(kind, text, new, cell_texts.get(f.cell) if f.cell is not None else None)
        mapping, new_lines = maps[f.cell]
        first = mapping.get(f.line, (f.line, f.line))[0]
        last = mapping.get(f.end_line, (f.end_line, f.end_line))[1]
        end_col = len(new_lines[last - 1]) + 1 if 0 < last <= len(new_lines) else 1
        new_hash = ledger.lines_sha256(new_lines[first - 1:last]) if 0 < first <= last <= len(new_lines) else None
        kind, title = (f.fix.kind, f.fix.title) if f.fix else _unfixed_kind(f)
        edits.append(Edit(f.code, kind, title, f.symbol,
                          f.line, f.column, f.end_line, f.end_column, first, last, end_col, f.cell, new_hash))
    return tuple(edits)


def _unfixed_kind(f: Finding) -> tuple[str, str]:
    """An applied finding without a rule fix: `--fuse` swaps in a kernel (numerics), else a decline's reason."""
    return ("numerics", "branch to the fused torch_npu op (--fuse)") if f.family == "fusion" else ("exact", "")


def _fix_kind(f: Finding, rules: dict[str, Rule]) -> str:
    return f.fix.kind if f.fix else rules[f.code].fix_kind


def _fixable(findings: list[Finding], options: FixOptions, rules: dict[str, Rule]) -> list[Finding]:
    """Declined sites go to the fixers too: their precheck declines them again, so the fix record lists them."""
    return [f for f in findings if (f.fix or f.declined) and (not options.exact_only or _fix_kind(f, rules) == "exact")]


def _source(text: str, options: FixOptions) -> str:
    return text_fixer.strip_annotations(text) if options.strip_annotations else text


def _fix_modules(root: Path, texts: dict[str, Spooled], by_file: dict[str, list[Finding]], entries: Collection[str],
                 options: FixOptions, runtime: Planner | None, real_of: dict[str, str],
                 progress: Callable[[int, int], None] | None, every: dict[str, list[Finding]],
                 pool: WorkerPool | None = None,
                 spool: Spool | None = None) -> dict[str, tuple[PythonOutcome, RuntimeImport | None]]:
    """The Python modules to fix, fixed (in parallel where the tree is big enough), each with where
    it imports the tree's runtime module from (portable target)."""
    from migrator.engine.discover import file_kind

    rules = load_catalogue().rules
    style = read_style(root)
    autoload = options.target == Target.NPU and read_torch_pin(root).autoload
    jobs: dict[str, PythonJob] = {}
    for rel, held in texts.items():
        if not rel.endswith(".py") or file_kind(Path(rel)) in ("notebook", "config"):
            continue
        findings = by_file.get(rel, [])
        fixable = _fixable(findings, options, rules)
        if not fixable:
            continue  # nothing to do here (an entry point gets `import torch_npu` only beside a fix): its text stays in the spool
        text = text_of(held)
        is_entry = rel in entries and "import torch" in text
        where = runtime.locate(real_of[rel]) if runtime else None
        jobs[rel] = PythonJob(_source(text, options), tuple(fixable), options.target, is_entry, where, style,
                              tuple(every.get(rel, findings)), autoload)
    outcomes = fix_modules(list(jobs.values()), options.jobs, progress, pool, spool)
    return {rel: (outcome, job.runtime) for (rel, job), outcome in zip(jobs.items(), outcomes)}


def _fix_notebook(text: str, findings: list[Finding], rules: dict[str, Rule], target: str,
                  ) -> tuple[str, list[Finding], list[tuple[Finding, str]], dict[int, tuple[str, str]], str | None]:
    """(new text, applied, declined, cell texts, error) for one notebook; never raises."""
    from migrator.engine.notebook import NotebookError
    from migrator.fix.notebook_fixer import NotebookFixError, fix_notebook

    try:
        result = fix_notebook(text, findings, rules, target)
    except (NotebookError, NotebookFixError) as exc:
        return text, [], [(f, str(exc)) for f in findings], {}, f"{exc}; file left unchanged"
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the run
        return text, [], [], {}, f"internal fixer error ({exc.__class__.__name__}: {exc}); file left unchanged"
    return result.text, result.applied, result.declined, result.cells, None


def with_text(root: Path, rel: str, after: str, edits: tuple[Edit, ...], change: FileChange | None = None) -> FileChange:
    """`change` (or a new change of `rel`) ending at `after` with `edits`, re-encoded as the file on disk
    is (a route's one-time edits after planning); a file that cannot be read or encoded gets its error."""
    got = _read(root, change.real_path if change is not None else rel)
    base = change or FileChange(rel, after, after)
    if isinstance(got, str):
        return replace(base, error=got)
    text, data, enc = got
    encoded, error = _encode(data, enc, after)
    before = base.before if change is not None else text
    return replace(base, held_before=before, held_after=after, edits=edits, held_encoded=encoded, error=error,
                   before_sha256=base.before_sha256 or ledger.sha256(data))
