"""One file's scan as a worker returns it (and the cache keeps it), with its training-dtype evidence.

A partial op's verdict depends on the 16-bit dtypes the *whole tree* trains in (autocast, `--dtype
bf16`, a DeepSpeed config; `migrator/catalogue/coverage/_dtypes.py`), which no worker knows. So the worker
reads the file once, notes the 16-bit dtypes the file itself shows (`evidence`), scans it as for a
tree that trains in neither (`base`), and, only when some verdict of the file would change with
them, also for each set of training dtypes that changes it (`variants`). The parent combines the
evidence of every file and takes each file's result for that set (`for_training`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path

from migrator.catalogue.coverage._dtypes import TRAINING_DTYPES, training_dtypes
from migrator.engine.scan_file import CheckMemo, ScanOptions, judged_scan, read_for_scan
from migrator.ground.cycles import cycle_collection_paused
from migrator.ground.framework_imports import ImportLines, import_lines
from migrator.ground.model import FileResult

#: every non-empty set of training dtypes, in `TRAINING_DTYPES` order
TRAINING_SETS: tuple[tuple[str, ...], ...] = tuple(
    dtypes for n in range(1, len(TRAINING_DTYPES) + 1) for dtypes in combinations(TRAINING_DTYPES, n))


@dataclass(frozen=True)
class ScannedFile:
    base: FileResult  # as for a tree that trains in no 16-bit dtype
    evidence: tuple[str, ...] = ()  # the 16-bit training dtypes this file shows
    variants: tuple[tuple[tuple[str, ...], FileResult], ...] = ()  # (training dtypes, result) where it differs
    # a Python file's framework import lines (route detection's evidence, read here so the file is read once);
    # None where the file was not read
    framework_imports: ImportLines | None = None

    def for_training(self, dtypes: tuple[str, ...]) -> FileResult:
        return dict(self.variants).get(dtypes, self.base)


def tree_training_dtypes(files: list[ScannedFile]) -> tuple[str, ...]:
    """The 16-bit dtypes any scanned file shows count for every file, in `TRAINING_DTYPES` order."""
    shown = {d for f in files for d in f.evidence}
    return tuple(d for d in TRAINING_DTYPES if d in shown)


def scan_one(path: Path, rel: str, kind: str, options: ScanOptions, data: bytes | None = None) -> ScannedFile:
    """Read `path` once (or take `data`: a fix result not written yet) and scan it for every training set."""
    with cycle_collection_paused():
        return _scan_one(path, rel, kind, options, data)


def _scan_one(path: Path, rel: str, kind: str, options: ScanOptions, data: bytes | None) -> ScannedFile:
    if data is None:
        read = read_for_scan(path, rel, kind, options)
        if isinstance(read, FileResult):
            return ScannedFile(read)
        data = read
    memo = CheckMemo()  # the variants below share the base scan's parse and check
    base, sensitive = judged_scan(data, rel, kind, _for_training(options, ()), memo)
    words = memo.words(data)  # the one search of the bytes the scan made, or makes now
    evidence = training_dtypes([data], words.training if words else None)
    imports = (import_lines(data, words.imports if words else None)) if kind == "python" else None
    if not sensitive:
        return ScannedFile(base, evidence, framework_imports=imports)
    variants = []
    for dtypes in TRAINING_SETS:
        result, _ = judged_scan(data, rel, kind, _for_training(options, dtypes), memo)
        if result != base:
            variants.append((dtypes, result))
    return ScannedFile(base, evidence, tuple(variants), imports)


_TRAINING_OPTIONS: list = [None, {}]  # the last options scanned with, and their copy for each training set


def _for_training(options: ScanOptions, dtypes: tuple[str, ...]) -> ScanOptions:
    """`options` for a tree that trains in `dtypes`, made once per options object (a `replace` costs ~10 µs, and
    every file of a scan is scanned with the same options, where it runs in one process)."""
    if _TRAINING_OPTIONS[0] is not options:
        _TRAINING_OPTIONS[:] = [options, {}]
    made = _TRAINING_OPTIONS[1].get(dtypes)
    if made is None:
        made = _TRAINING_OPTIONS[1][dtypes] = replace(options, training_dtypes=dtypes)
    return made
