"""Plan and apply fixes over a scan result; write nothing unless asked, never a broken file."""

from __future__ import annotations

import ast
import difflib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrator import __version__
from migrator.engine.source import UnreadableSource, decode_python, decode_text
from migrator.fix import text_fixer
from migrator.fix.line_map import line_map as _line_map
from migrator.fix.writer import atomic_write, sniff
from migrator.jsonfile import read_json_or_none
from migrator.model import Finding, RunResult
from migrator.rules.catalogue import load_catalogue

MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.MULTILINE)
LAUNCHED_SCRIPT = re.compile(r"(?:python3?|torchrun|deepspeed|accelerate\s+launch)\b[^\n#]*?\s([\w./-]+\.py)\b")
RECORD_PATH = ".migrate/fix-record.json"


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

    def to_dict(self) -> dict[str, Any]:
        data = {
            "code": self.code,
            "fix_kind": self.fix_kind,
            "title": self.title,
            "symbol": self.symbol,
            "original": {"line": self.line, "column": self.column, "end_line": self.end_line, "end_column": self.end_column},
            "new": {"line": self.new_line, "column": 1, "end_line": self.new_end_line, "end_column": self.new_end_column},
        }
        if self.cell is not None:
            data["cell"] = self.cell
        return data


def _edit_line_map(kind: str | None, before: str, after: str, cell: tuple[str, str] | None):
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
    before: str
    after: str
    edits: tuple[Edit, ...] = ()
    declined: tuple[tuple[Finding, str], ...] = ()
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.before != self.after

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
class FixOptions:
    target: str = "npu"
    exact_only: bool = False
    annotate: bool = False
    strip_annotations: bool = False


@dataclass(frozen=True)
class FixPlan:
    root: Path
    changes: tuple[FileChange, ...]
    options: FixOptions
    errors: tuple[tuple[str, str], ...] = field(default=())


def _entry_points(root: Path, scan: RunResult, texts: dict[str, str]) -> set[str]:
    entries = {path for path, text in texts.items() if path.endswith(".py") and MAIN_GUARD.search(text)}
    for path, text in texts.items():
        if path.endswith((".sh", ".bash", ".zsh", ".slurm", ".sbatch")):
            base = Path(path).parent
            for m in LAUNCHED_SCRIPT.finditer(text):
                for candidate in ((base / m.group(1)).as_posix(), m.group(1)):
                    entries.add(candidate.lstrip("./") if candidate.startswith("./") else candidate)
    return entries


def _read(root: Path, rel: str) -> tuple[str, bytes, str] | None:
    path = root / rel
    try:
        data = path.read_bytes()
        source = decode_python(data) if rel.endswith(".py") else decode_text(data)
    except (OSError, UnreadableSource):
        return None
    return source.text if not source.text.startswith("\ufeff") else source.text[1:], data, source.encoding


def plan_fixes(scan: RunResult, root: Path, options: FixOptions, extra_files: set[str] = frozenset()) -> FixPlan:
    from migrator.engine.discover import file_kind
    from migrator.fix.python_fixer import fix_python

    rules = load_catalogue().rules
    by_file: dict[str, list[Finding]] = {}
    for f in scan.findings:
        by_file.setdefault(f.path, []).append(f)
    texts: dict[str, str] = {}
    raw: dict[str, tuple[bytes, str]] = {}
    for rel in sorted(set(by_file) | set(extra_files)):
        got = _read(root, rel)
        if got is not None:
            texts[rel], data, enc = got
            raw[rel] = (data, enc)
    entries = _entry_points(root, scan, texts)
    changes: list[FileChange] = []
    for rel, text in texts.items():
        findings = by_file.get(rel, [])
        fixable = [f for f in findings if f.fix and (not options.exact_only or f.fix.kind == "exact")]
        source = text_fixer.strip_annotations(text) if options.strip_annotations else text
        new, applied, declined, error = source, [], [], None
        cell_texts: dict[int, tuple[str, str]] = {}
        kind = file_kind(Path(rel))
        is_entry = rel in entries and "import torch" in text
        if kind == "notebook":
            if fixable:
                new, applied, declined, cell_texts, error = _fix_notebook(source, fixable, rules, options.target)
        elif kind == "config":
            if fixable:
                from migrator.fix.config_fixer import fix_config

                new, applied, declined = fix_config(rel, source, fixable, options.target)
        elif rel.endswith(".py"):
            if fixable or (is_entry and options.target == "npu" and "torch_npu" not in text and findings):
                try:
                    result = fix_python(source, fixable, rules, options.target, is_entry)
                    new, applied, declined = result.text, result.applied, result.declined
                except Exception as exc:  # noqa: BLE001 - one bad file never stops the run
                    error = f"internal fixer error ({exc.__class__.__name__}: {exc}); file left unchanged"
            if error is None and new != source:
                try:
                    ast.parse(new)
                except SyntaxError as exc:
                    error = f"the fixed text would not parse ({exc.msg}, line {exc.lineno}); file left unchanged"
        elif fixable:
            new, applied, declined = text_fixer.fix_text(source, fixable, options.target)
        if options.annotate and error is None:
            new = _annotate(rel, new, findings, applied, declined, options)
            if rel.endswith(".py"):
                try:
                    ast.parse(new)
                except SyntaxError:
                    new = text_fixer.strip_annotations(new) if not options.strip_annotations else new
        if error is not None:
            new = text
        maps: dict = {}
        edits = []
        for f in sorted(applied, key=Finding.sort_key):
            if f.cell not in maps:
                maps[f.cell] = _edit_line_map(kind, text, new, cell_texts.get(f.cell) if f.cell is not None else None)
            mapping, new_lines = maps[f.cell]
            first = mapping.get(f.line, (f.line, f.line))[0]
            last = mapping.get(f.end_line, (f.end_line, f.end_line))[1]
            end_col = len(new_lines[last - 1]) + 1 if 0 < last <= len(new_lines) else 1
            edits.append(Edit(f.code, f.fix.kind if f.fix else "exact", f.fix.title if f.fix else "", f.symbol,
                              f.line, f.column, f.end_line, f.end_column, first, last, end_col, f.cell))
        edits = tuple(edits)
        changes.append(FileChange(rel, text, new, edits, tuple(declined), error))
    return FixPlan(root, tuple(changes), options)


def _fix_notebook(text, findings, rules, target):
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


def _annotate(rel, text, findings, applied, declined, options) -> str:
    """Mark every site the fix could not handle with `# MIGRATE(CODE): reason` (Python and shell).

    Notebooks, container files and configs are not annotated: a comment line inside a JSON string,
    a Dockerfile heredoc or a YAML block scalar would change what the file means."""
    from migrator.engine.discover import file_kind
    from migrator.engine.scan_file import ScanOptions, scan_text_content

    kind = file_kind(Path(rel))
    if kind not in ("python", "shell"):
        return text

    reasons = {(f.code, f.symbol): why for f, why in declined}
    remaining = scan_text_content(text, rel, kind, ScanOptions())
    starts: dict[int, int] = {}  # shell: a note goes above the first line of a `\`-continued command
    if kind == "shell":
        from migrator.engine.text_checkers import _logical_lines

        for _, parts in _logical_lines(tuple(text.splitlines())):
            for number, _ in parts:
                starts[number] = parts[0][0]
    notes: dict[int, list[tuple[str, str]]] = {}
    for f in remaining.findings:
        if f.family == "meta" or (f.severity == "info" and f.fix is None and (f.code, f.symbol) not in reasons):
            continue
        why = reasons.get((f.code, f.symbol)) or f.message
        line = starts.get(f.line, f.line) if kind == "shell" else f.line
        notes.setdefault(line, []).append((f.code, why.replace("\n", " ")[:160]))
    return text_fixer.annotate(text, notes)


def write_plan(plan: FixPlan, out_dir: Path | None, scan: RunResult, record: bool = True) -> Path | None:
    """Write changed files (in place, or a full copy under out_dir) and the fix record."""
    target_root = out_dir or plan.root
    if out_dir is not None:
        _copy_tree(plan.root, out_dir)
    for change in plan.changes:
        if not change.changed:
            continue
        src = plan.root / change.path
        data = src.read_bytes()
        enc = sniff(data, _encoding_of(change.path, data))
        atomic_write(target_root / change.path, enc.encode(change.after))
    if not record:
        return None
    path = target_root / RECORD_PATH
    data = _merged_record(path, fix_record(plan), {c.path for c in plan.changes})
    atomic_write(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
    return path


def _merged_record(path: Path, new: dict[str, Any], planned: set[str]) -> dict[str, Any]:
    """A run over some files (pre-commit passes only the staged ones) keeps what an earlier run
    recorded for the others; a record that cannot be read is replaced."""
    old = read_json_or_none(path)
    try:
        if old.get("target") != new["target"]:
            return new
        files = [f for f in old.get("files", []) if f.get("path") not in planned] + new["files"]
        declined = [d for d in old.get("declined", []) if d.get("path") not in planned] + new["declined"]
    except (AttributeError, TypeError):
        return new
    return {**new, "files": sorted(files, key=lambda f: f["path"]), "declined": declined}


def _encoding_of(rel: str, data: bytes) -> str:
    try:
        return decode_python(data).encoding if rel.endswith(".py") else decode_text(data).encoding
    except UnreadableSource:
        return "utf-8"


def _copy_tree(root: Path, out_dir: Path) -> None:
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir}: output folder exists and is not empty; choose a new folder")
    ignore = shutil.ignore_patterns(".git", "__pycache__", ".migrate", "*.pyc", ".venv*")
    real_out = out_dir.resolve()

    def _ignore(folder, names):
        skipped = set(ignore(folder, names))
        for name in names:
            if (Path(folder) / name).resolve() == real_out:
                skipped.add(name)
        return skipped

    shutil.copytree(root, out_dir, symlinks=True, ignore=_ignore, dirs_exist_ok=True)


def fix_record(plan: FixPlan) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "tool": {"name": "ascend-migrate", "version": __version__, "catalogue": load_catalogue().digest},
        "target": plan.options.target,
        "root": plan.root.as_posix(),
        "files": [
            {"path": c.path, "edits": [e.to_dict() for e in c.edits]}
            for c in plan.changes
            if c.changed and c.edits
        ],
        # sites the fixer would not rewrite, with the reason: `migrate scan` reports them as manual
        "declined": [
            {"path": c.path, "code": f.code, "symbol": f.symbol, "reason": why}
            for c in plan.changes
            for f, why in c.declined
        ],
    }
