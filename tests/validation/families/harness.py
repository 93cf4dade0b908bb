"""The harness the unseen program families share (issue 37 item 7): a family is one ``validate.py``
(the original, CUDA-style), its hand port (text edits of the original) and its variants — the
``migrate fix`` port, the hand port, algebraically equal refactors of the hand port (each must pass)
and seeded slips of the hand port (each must fail, naming its cause). Every ``old`` text of an edit
must be in the program, so a changed fixture breaks loudly instead of silently testing nothing."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

Edits = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str                        # "fix" (migrate fix's port), "hand", "refactor" or "slip"
    edits: Edits = ()                # applied to the hand port (refactors and slips)
    category: str = ""               # a slip's kind: init, buffers, optimizer, masks, fused, parallel
    cause: tuple[str, ...] = ()      # a slip: every one must be in the failing stage's named cause
    what: str = ""

    @property
    def expected(self) -> str:
        return "fail" if self.kind == "slip" else "pass"


@dataclass(frozen=True)
class Family:
    name: str
    source: str                      # where the model comes from: URL and licence
    original: str                    # the whole validate.py
    port: Edits                      # the hand port, applied to the original
    variants: tuple[Variant, ...]
    stages: tuple[str, ...] = ("S1",)
    extra_files: dict[str, str] = field(default_factory=dict)  # more files of the tree, by name

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)


def edit(text: str, edits: Edits, where: str) -> str:
    for old, new in edits:
        assert old in text, f"{where}: {old!r} not in the program"
        text = text.replace(old, new)
    return text


def write_original(family: Family, dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / "validate.py").write_text(family.original)
    for name, text in family.extra_files.items():
        (dest / name).write_text(text)
    return dest


def write_variant(family: Family, variant: Variant, dest: Path, original: Path) -> Path:
    """The variant's tree at ``dest``: ``migrate fix`` of ``original`` for the fix port, else the hand
    port with the variant's edits."""
    if variant.kind == "fix":
        from migrator import api

        api.fix([original], root=original, target="npu", out_dir=dest, use_cache=False)
        return dest
    write_original(family, dest)
    text = edit(family.original, family.port, f"{family.name} hand port")
    (dest / "validate.py").write_text(edit(text, variant.edits, f"{family.name}/{variant.name}"))
    return dest


@dataclass(frozen=True)
class Outcome:
    family: str
    variant: Variant
    got: str                         # "pass" or "fail" (a validation that could not run: "error")
    stage: str                       # the first stage that did not pass ("" when all passed)
    cause: str                       # the failing stage's first divergence, else its reason
    seconds: float

    @property
    def right(self) -> bool:
        """Got what was expected, and a slip's cause holds every expected phrase."""
        return self.got == self.variant.expected and all(p in self.cause for p in self.variant.cause)


def record(family: Family, root: Path) -> tuple[Path, Path]:
    """(the original tree, its recorded reference side): the original runs once per family."""
    from migrator import api

    original = write_original(family, root / "original")
    reference = root / "reference"
    result = api.validate(original, record=str(reference), stages=("S1",), steps=(0,))
    assert result.exit_code == 0, result.text()
    return original, reference


def run_variant(family: Family, variant: Variant, root: Path, original: Path, reference: Path) -> Outcome:
    from migrator import api

    t0 = time.monotonic()
    dest = root / variant.name
    shutil.rmtree(dest, ignore_errors=True)
    tree = write_variant(family, variant, dest, original)
    result = api.validate(original, migrated=str(tree), compare=str(reference), stages=family.stages, steps=(0,))
    seconds = time.monotonic() - t0
    got, stage_id, cause = "pass", "", ""
    for sid in family.stages:
        stage = result.stage(sid)
        if stage.status in ("pass", "warn"):
            continue
        got = "fail" if stage.status == "fail" else "error"
        stage_id, cause = sid, stage.first_divergence or stage.reason or stage.status
        break
    if got == "pass" and result.exit_code != 0:
        got, cause = "error", result.text()[-400:]
    return Outcome(family.name, variant, got, stage_id, cause, seconds)
