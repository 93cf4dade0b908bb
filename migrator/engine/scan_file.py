"""Scan one file: read, prefilter, parse once, check, suppress. Returns a FileResult; never raises
for bad input (a file that cannot be read or parsed becomes a `meta` finding)."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from migrator.catalogue.loader import load_catalogue
from migrator.catalogue.site import is_build_file, is_package_init
from migrator.engine.census_perf import traced_hits
from migrator.engine.coverage_checker import CoverageHit, coverage_hits, depends_on_training, training_free_hits
from migrator.engine.extension_calls import extension_sites, may_have_sites
from migrator.engine.file_scan import FileScan, ScanOptions
from migrator.engine.file_words import FileWords, file_words
from migrator.engine.markers import unattributed
from migrator.engine.module_check import check_module
from migrator.engine.prefilter import code_prefiltered
from migrator.engine.python_checker import PythonChecker
from migrator.engine.source import (
    ParseFailure,
    SourceText,
    UnreadableSource,
    decode_python,
    decode_text,
    parse_python,
    parses,
)
from migrator.engine.suppress import Directives, file_directives, parse_directives, with_continued_lines
from migrator.ground import input_files
from migrator.ground.input_files import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, InputRefused
from migrator.ground.model import FileResult, Finding, ImportInfo, Marker, OpUse
from migrator.ground.own_code import helper_lines

if TYPE_CHECKING:  # the checkers of other kinds are imported where a file of theirs is scanned
    from migrator.engine import text_checkers

GENERATED = re.compile(rb"@generated\b")


def scan_file(path: Path, rel: str, kind: str, options: ScanOptions) -> FileResult:
    read = read_for_scan(path, rel, kind, options)
    return read if isinstance(read, FileResult) else scan_bytes(read, rel, kind, options)


def read_for_scan(path: Path, rel: str, kind: str, options: ScanOptions) -> bytes | FileResult:
    """The file's bytes (through `input_files`, capped per kind), or the result for a file that cannot be read."""
    try:
        return input_files.read_bytes(path, read_limit(kind))  # through the module: tests stand in for it
    except InputRefused as exc:
        if kind == "config" and exc.too_big:
            from migrator.engine import config_checker

            return FileResult(rel, skipped=f"larger than {config_checker.MAX_CONFIG_BYTES // 2**20} MiB: data, not a config")
        if exc.too_big and GENERATED.search(_head(path)):
            return FileResult(rel, skipped="generated file (@generated marker)")
        scan = FileScan(rel, load_catalogue(), options.selector_for(rel))
        scan.meta("unreadable-file", f"cannot read {rel}: {exc}")
        return FileResult(rel, tuple(scan.findings))
    except OSError as exc:
        scan = FileScan(rel, load_catalogue(), options.selector_for(rel))
        scan.meta("unreadable-file", f"cannot read {rel}: {exc.strerror or exc}")
        return FileResult(rel, tuple(scan.findings))


def read_limit(kind: str) -> int:
    """The most bytes a file of `kind` is read with; a larger one is refused (or skipped) by `read_for_scan`."""
    if kind == "config":
        from migrator.engine.config_checker import MAX_CONFIG_BYTES

        return MAX_CONFIG_BYTES
    return MAX_NOTEBOOK_BYTES if kind == "notebook" else MAX_SOURCE_BYTES


def _head(path: Path) -> bytes:
    try:
        return input_files.read_head(path, 2048)
    except OSError:
        return b""


def scan_text_content(text: str, rel: str, kind: str, options: ScanOptions) -> FileResult:
    """Scan text that is not on disk (a fix result before it is written)."""
    return scan_bytes(text.encode("utf-8"), rel, kind, options)


def scan_bytes(data: bytes, rel: str, kind: str, options: ScanOptions) -> FileResult:
    return judged_scan(data, rel, kind, options)[0]


def judged_scan(data: bytes, rel: str, kind: str, options: ScanOptions,
                memo: CheckMemo | None = None) -> tuple[FileResult, bool]:
    """The file's result, and whether a verdict in it would change with other `training_dtypes`.
    Scans of the same bytes with other training dtypes pass one `memo`: they share the parse and the check."""
    catalogue = load_catalogue()
    scan = FileScan(rel, catalogue, options.selector_for(rel), options, kind)
    return _scan_bytes(scan, data, memo), scan.training_sensitive


class CheckMemo:
    """One Python module's decoding, directives, parse and check, kept for the scans of the same bytes that
    differ only in training dtypes (only the op verdicts, `coverage_hits`, depend on them)."""

    __slots__ = ("source", "directives", "tree", "checker", "training_free", "training_sensitive", "_words")

    def __init__(self) -> None:
        self.source: SourceText | None = None
        self.directives: Directives | None = None
        self.tree: ast.Module | ParseFailure | None = None
        self.checker: PythonChecker | None = None
        self.training_free: tuple[CoverageHit, ...] | None = None  # the op hits no training dtype changes
        self.training_sensitive: bool | None = None  # `depends_on_training`: the same whatever the training dtypes
        self._words: FileWords | None | bool = False  # False: not searched yet

    def words(self, data: bytes) -> FileWords | None:
        """`file_words(data)`, searched once for every step that asks (None without RE2)."""
        if self._words is False:
            self._words = file_words(data)
        return self._words  # type: ignore[return-value]


def _scan_bytes(scan: FileScan, data: bytes, memo: CheckMemo | None = None) -> FileResult:
    rel, kind = scan.rel, scan.kind
    early = _without_decoding(scan, data)
    if early is not None:
        return early
    memo = memo or CheckMemo()
    if memo.source is not None and memo.directives is not None:
        source, directives = memo.source, memo.directives
    else:
        try:
            source = decode_python(data) if kind == "python" else decode_text(data)
        except UnreadableSource as exc:
            scan.meta("unreadable-file", f"cannot read {rel}: {exc}")
            return FileResult(rel, tuple(scan.findings))
        words = memo.words(data)
        directives = file_directives(source, data, words.directive if words else None)
        memo.source, memo.directives = source, directives
    if directives.skip_file:
        return FileResult(rel, skipped="`# migrate: skip-file` directive")
    checked = _check_by_kind(scan, source, data, memo)
    if isinstance(checked, FileResult):
        return checked
    ops, quiet_lines, own_names = checked
    kept, suppressed = _apply_suppressions(scan, with_continued_lines(directives, source.text, scan.findings) if kind == "python" else directives)
    markers: tuple[Marker, ...] = ()
    if kind in ("python", "shell", "dockerfile"):
        words = memo.words(data)
        markers = unattributed(rel, kind, source, kept, quiet_lines, own_names, data, words.starts if words else None)
    return FileResult(rel, tuple(sorted(kept, key=Finding.sort_key)), markers, ops, None, suppressed)


def _without_decoding(scan: FileScan, data: bytes) -> FileResult | None:
    """The result of a file settled before its text is decoded: a generated file, a notebook (scanned
    cell by cell), a config file with no marker or too large to be a config; None for the rest."""
    rel, kind = scan.rel, scan.kind
    if b"@generated" in data[:2048] and GENERATED.search(data[:2048]):
        return FileResult(rel, skipped="generated file (@generated marker)")
    if kind == "notebook":
        return _scan_notebook(scan, data)
    if kind == "config":
        from migrator.engine import config_checker

        if not config_checker.CONFIG_PREFILTER.search(data):
            return FileResult(rel)  # no marker key or value: not a config we read
        if len(data) > config_checker.MAX_CONFIG_BYTES:
            return FileResult(rel, skipped=f"larger than {config_checker.MAX_CONFIG_BYTES // 2**20} MiB: data, not a config")
    return None


def _check_by_kind(
    scan: FileScan, source: SourceText, data: bytes, memo: CheckMemo | None = None
) -> FileResult | PythonFacts:
    """Findings into `scan` by the file's kind; what the marker search needs, or the result when checking stops early."""
    rel, kind = scan.rel, scan.kind
    if kind == "python":
        parsed = _check_python(scan, source, data, memo)
        return FileResult(rel, tuple(scan.findings)) if parsed is None else parsed
    if kind == "config":
        from migrator.engine import config_reader

        try:
            _check_config(scan, source.text)
        except config_reader.ConfigParseError as exc:
            return FileResult(rel, skipped=f"not read as a config: {exc}")
        return PythonFacts((), set())
    from migrator.engine import text_checkers
    from migrator.engine.cuda_file import cuda_file_note

    try:
        hits = list(_text_hits(kind, source))
    except text_checkers.PyprojectError as exc:
        scan.meta("parse-error", f"cannot parse {rel}: {exc}")
        return FileResult(rel, tuple(scan.findings))
    for hit in hits:
        rule, replacement = scan.rule_for_key(hit.key, hit.replacement)
        message, effort = hit.message, None
        if hit.key == "impl:cuda-source-file" and rule is not None:  # its kernels, by size and what is left
            message, effort = cuda_file_note(rule.message_for(hit.symbol, replacement), source.text, rel,
                                             scan.options.extensions)
        scan.add(rule, hit.line, hit.column, hit.line, hit.end_column, hit.symbol, replacement, message=message,
                 effort=effort)
    return PythonFacts((), set())


def _check_config(scan: FileScan, text: str) -> None:
    from migrator.engine import config_checker, config_reader

    parsed = config_reader.parse_config(text, config_reader.config_format(scan.rel))
    index = config_reader.LineIndex(text)
    for hit in config_checker.config_hits(parsed):
        rule, replacement = scan.rule_for_key(hit.key, hit.replacement)
        line, col = index.position(hit.start)
        end_line, end_col = index.position(hit.end) if hit.end >= 0 else (line, col)
        count = len(scan.findings)
        scan.add(rule, line, col, end_line, end_col, hit.symbol, replacement, message=hit.message)
        if hit.shared and len(scan.findings) > count and scan.findings[-1].fix is not None:
            f = scan.findings[-1]  # rewriting a shared scalar would change every place that uses it
            scan.findings[-1] = replace(f, fix=None, message=f.message + " (the value is shared through a YAML anchor "
                                        "or merge key, so no automatic fix)")


def _scan_notebook(scan: FileScan, data: bytes) -> FileResult:
    """Every code cell: Python through the Python checker, `!`/`%env`/`%pip` lines through the shell
    checker; suppressions per cell; findings, markers and ops carry the 1-based cell number."""
    from migrator.engine import notebook

    rel = scan.rel
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        scan.meta("unreadable-file", f"cannot read {rel}: not valid UTF-8 (byte 0x{data[exc.start]:02x} on line {line})", line)
        return FileResult(rel, tuple(scan.findings))
    try:
        nb = notebook.read_notebook(text)
    except notebook.NotebookError as exc:
        scan.meta("parse-error", f"cannot parse {rel}: {exc}", exc.line, exc.column)
        return FileResult(rel, tuple(scan.findings))
    if not notebook.is_python(nb):
        return FileResult(rel, skipped=f"notebook kernel language is {nb.language}, not Python")
    findings: list[Finding] = []
    markers: list[Marker] = []
    ops: list[OpUse] = []
    suppressed = 0
    headers = notebook.import_headers(nb)
    for cell in nb.cells:
        if cell.kind == "skip":
            continue
        cscan = FileScan(rel, scan.catalogue, scan.selector, scan.options)
        if cell.kind == "error":
            cscan.meta("parse-error", f"cannot parse {rel} cell {cell.index}: {cell.error}")
            findings.extend(replace(f, cell=cell.index) for f in cscan.findings)
            continue
        original = SourceText(cell.source, tuple(notebook_lines(cell.source)), "utf-8")
        directives = parse_directives(original.lines)
        if directives.skip_file:
            return FileResult(rel, skipped=f"`# migrate: skip-file` directive (cell {cell.index})")
        doc_lines, own_names = set[int](), frozenset[str]()
        if cell.kind == "python":
            header = headers.get(cell.index, "")
            h = header.count("\n")  # imports of the other cells, above the cell (shared namespace)
            combined = header + cell.python
            view = SourceText(combined, tuple(notebook_lines(combined)), "utf-8")
            parsed = _check_python(cscan, view, combined.encode("utf-8"))
            scan.training_sensitive |= cscan.training_sensitive
            cscan.findings = [  # back to cell lines; the header's own findings belong to other cells
                replace(f, line=max(f.line - h, 1), end_line=max(f.end_line - h, 1))
                for f in cscan.findings
                if f.line > h or f.family == "meta"
            ]
            if parsed is None:
                where = f"cannot parse {rel} cell {cell.index}:"
                findings.extend(
                    replace(f, cell=cell.index, message=f.message.replace(f"cannot parse {rel}:", where, 1)) for f in cscan.findings
                )
                continue
            cell_ops, cell_doc_lines, own_names = parsed
            ops.extend(replace(op, cell=cell.index, line=op.line - h) for op in cell_ops if op.line > h)
            doc_lines = {n - h for n in cell_doc_lines if n > h}
        _shell_lines(cscan, cell.shell)
        kept, hidden = _apply_suppressions(cscan, directives)
        suppressed += hidden
        findings.extend(replace(f, cell=cell.index) for f in kept)
        markers.extend(replace(m, cell=cell.index) for m in unattributed(rel, "python", original, kept, doc_lines, own_names))
    return FileResult(rel, tuple(sorted(findings, key=Finding.sort_key)), tuple(markers), tuple(ops), None, suppressed)


def _shell_lines(cscan: FileScan, lines: tuple[str, ...]) -> None:
    """A notebook cell's `!` / `%env` / `%pip` lines through the shell checker."""
    from migrator.engine import text_checkers

    cscan.kind = "shell"
    for hit in text_checkers.check_shell(lines):
        rule, replacement = cscan.rule_for_key(hit.key, hit.replacement)
        cscan.add(rule, hit.line, hit.column, hit.line, hit.end_column, hit.symbol, replacement, message=hit.message)


def notebook_lines(text: str) -> list[str]:
    """Cell lines as the Python tokenizer counts them (\r\n, \r, \n only)."""
    from migrator.engine.notebook import split_lines

    return [line.rstrip("\r\n") for line in split_lines(text)]


def _text_hits(kind: str, source: SourceText) -> Iterator[text_checkers.TextHit]:
    from migrator.engine import text_checkers

    if kind == "shell":
        return text_checkers.check_shell(source.lines)
    if kind == "requirements":
        return text_checkers.check_requirements(source.lines)
    if kind == "pyproject":
        return text_checkers.check_pyproject(source.text, source.lines)
    if kind == "cuda":
        return text_checkers.check_cuda_source(source.lines)
    if kind == "dockerfile":
        return text_checkers.check_dockerfile(source.lines)
    return iter(())



class PythonFacts(NamedTuple):
    """What the marker search needs from a Python file's check, besides its findings."""

    ops: tuple[OpUse, ...]
    quiet_lines: set[int]
    own_names: frozenset[str] = frozenset()  # helpers the fix inserted: their uses are no markers


def _check_python(scan: FileScan, source: SourceText, data: bytes, memo: CheckMemo | None = None) -> PythonFacts | None:
    memo = memo or CheckMemo()
    wanted = code_prefiltered(data)
    if memo.tree is None and not wanted and not may_have_sites(scan.options.extensions, data) and parses(data):
        return PythonFacts((), set())  # nothing to look for, and no syntax error to report: no tree needed
    tree = memo.tree = memo.tree or parse_python(data, scan.rel)
    if isinstance(tree, ParseFailure):
        scan.meta("parse-error", f"cannot parse {scan.rel}: {tree.why}", tree.line, tree.column)
        return None
    for site, symbol, message in extension_sites(tree, scan.rel, scan.options.extensions, data):  # KERN021
        scan.add(scan.catalogue.impl_rule("cuda-extension-call"), *source.span(site), symbol, message=message)
    if not wanted:
        return PythonFacts((), set())  # parsed (so syntax errors are reported) but nothing to look for
    try:
        checker = memo.checker = memo.checker or check_module(
            tree, source, scan.catalogue, scan.enabled, scan.options.target, is_build_file(scan.rel),
            is_package_init(scan.rel))
    except RecursionError:
        scan.meta("parse-error", f"cannot check {scan.rel}: its expressions nest too deeply to walk "
                                 f"(over Python's recursion limit of {sys.getrecursionlimit()})")
        return None
    for rule, node, symbol, replacement, extra in checker.hits:
        line, col, end_line, end_col = source.span(node)
        library = extra.get("library")
        scan.add(rule, line, col, end_line, end_col, symbol, replacement, extra.get("ambiguous", False),
                 manual_reason=extra.get("manual_reason"), prechecked=True,
                 imported=ImportInfo(library, bool(extra.get("optional"))) if library else None)
    _census_perf(scan, source)
    if scan.rel == "setup.py" or scan.rel.endswith("/setup.py"):
        _setup_requirements(scan, tree, source, checker.docstrings)
    ops = _op_coverage(scan, checker, source, memo)
    quiet: set[int] = set()  # lines no marker is looked for on: docstrings, the fix's own helpers
    for node in checker.docstring_nodes:
        quiet.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    for helper in checker.own_helpers:
        quiet.update(helper_lines(helper))
    return PythonFacts(ops, quiet, frozenset(getattr(h, "name", "") for h in checker.own_helpers))


def _op_coverage(scan: FileScan, checker: PythonChecker, source: SourceText, memo: CheckMemo) -> tuple[OpUse, ...]:
    """The module's op uses; its coverage findings into `scan`, and whether a verdict depends on training dtypes."""
    soc, version, traced = scan.options.soc, scan.options.torch_npu_version, dict(scan.options.traced)
    if memo.training_sensitive is None:
        memo.training_sensitive = depends_on_training(checker, soc, version, traced)
    scan.training_sensitive = memo.training_sensitive
    if memo.training_free is None:
        memo.training_free = training_free_hits(checker, soc, version)
    op_uses: list[OpUse] = []
    rel, impl_rule_of, ascii_text = scan.rel, scan.catalogue.impl_rule, source.ascii
    for impl, node, symbol, message, info, op, status in coverage_hits(checker, soc, version, traced,
                                                                   scan.options.training_dtypes, memo.training_free):
        line = node.lineno
        col = node.col_offset + 1 if ascii_text else source.char_column(line, node.col_offset)  # `char_column`'s own
        if op is not None and status is not None:  # an op's hit always carries its status
            op_uses.append(OpUse(op, rel, line, col, status, info.dtypes if info else ()))
        if not impl:
            continue  # most ops: supported, or an info note already given
        impl_rule = impl_rule_of(impl)
        if impl_rule is None:
            continue
        end_line = node.end_lineno or line
        scan.add(impl_rule, line, col, end_line, source.char_column(end_line, node.end_col_offset or 0), symbol,
                 message=message, coverage=info)
    return tuple(op_uses)


def _census_perf(scan: FileScan, source: SourceText) -> None:
    """The perf lint's census sites of this file (`engine/census_perf.py`), after its static perf findings."""
    if not scan.options.census_perf:
        return  # most scans: no census, and no need to split the file into lines
    perf_lines = {f.line for f in scan.findings if f.family == "perf"}
    for traced, column, end_column in traced_hits(scan.options.census_perf, scan.rel, perf_lines, source.lines):
        scan.add(scan.catalogue.impl_rule(traced.impl), traced.line, column, traced.line, end_column, traced.symbol,
                 message=traced.message)


def _setup_requirements(scan: FileScan, tree: ast.AST, source: SourceText, docstrings: set[int]) -> None:
    """Requirement strings in setup.py (`install_requires=[...]`, `.append("nvidia-ml-py")`)."""
    from migrator.engine import text_checkers

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value.strip()
            if not text or len(text) > 200 or " " in text.split(";")[0].strip().replace(" @ ", "@"):
                continue
            for hit in text_checkers.requirement_hit(text, node.lineno, 1):
                if hit.key == "impl:cuda-only-requirement":
                    col = source.char_column(node.lineno, node.col_offset)
                    end = source.char_column(node.end_lineno or node.lineno, node.end_col_offset or 0)
                    rule, replacement = scan.rule_for_key(hit.key, hit.replacement)
                    scan.add(rule, node.lineno, col, node.end_lineno or node.lineno, end, hit.symbol, replacement)



def _apply_suppressions(scan: FileScan, directives: Directives) -> tuple[list[Finding], int]:
    if not directives.suppressions:
        return list(scan.findings), 0  # most files: nothing hidden, nothing to report on a directive
    kept: list[Finding] = []
    used: set[tuple[int, int]] = set()
    suppressed = 0
    for finding in scan.findings:
        match = directives.covers(finding.code, finding.line) if finding.family != "meta" else None
        if match:
            used.add((match.directive_line, match.column))
            suppressed += 1
        else:
            kept.append(finding)
    extra = FileScan(scan.rel, scan.catalogue, scan.selector)
    reported: set[int] = set()
    for s in directives.suppressions:
        if s.directive_line in reported or s.noqa:
            continue
        if not s.codes:
            reported.add(s.directive_line)
            extra.meta(
                "bare-suppression",
                "bare `# migrate: ignore` hides every finding on its line, also those of rules added later; "
                "name the codes, e.g. `# migrate: ignore[DEV001]`",
                s.directive_line,
                s.column,
            )
        elif (s.directive_line, s.column) not in used and not any(
            (u_line == s.directive_line) for u_line, _ in used
        ):
            reported.add(s.directive_line)
            extra.meta(
                "unused-suppression",
                f"`# migrate: ignore[{', '.join(s.codes)}]` suppresses nothing here",
                s.directive_line,
                s.column,
            )
    return kept + extra.findings, suppressed
