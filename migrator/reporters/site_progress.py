"""One model of progress for every first-screen number: CUDA-dependent sites, each fixed (an edit the fix
record holds), fixable (an automatic fix remains) or manual. Percentages and the verdict line are computed
from it, so no card can contradict another (issue 44: "0 % migrate automatically" next to "Migrated 74 %")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from migrator.ground.model import ADVISORY_FAMILIES, Finding

# findings that are no CUDA-dependent place: tool notes, op support, advice on speed
NOT_CUDA_SITES = ("meta", "coverage", *ADVISORY_FAMILIES)


def pct(part: int, whole: int) -> str:
    if whole <= 0:
        return "n/a"
    value = 100.0 * part / whole
    if 0 < value < 1:
        return "<1%"
    if 99 < value < 100:
        return ">99%"
    return f"{value:.0f}%"


@dataclass(frozen=True)
class SiteProgress:
    fixed: int  # sites `migrate fix` changed (its record's edits)
    exact: int  # remaining sites with an exact automatic fix
    numerics: int  # remaining sites whose automatic fix changes numerics (validate)
    manual: int  # remaining sites a person ports

    @property
    def fixable(self) -> int:
        return self.exact + self.numerics

    @property
    def remaining(self) -> int:
        return self.fixable + self.manual

    @property
    def total(self) -> int:
        return self.fixed + self.remaining

    @property
    def automatic_pct(self) -> str:
        """Sites fixed or fixable automatically, of all."""
        return pct(self.fixed + self.fixable, self.total)

    @property
    def migrated_pct(self) -> str:
        return pct(self.fixed, self.total)

    def head(self) -> str:
        """The counts as the verdict line says them."""
        if not self.total:
            return "no CUDA-dependent sites"
        return (f"{self.total} CUDA-dependent site{'' if self.total == 1 else 's'}: {self.fixed} fixed, "
                f"{self.fixable} fixable automatically, {self.manual} manual")


def site_progress(findings: Iterable[Finding], fixed: int = 0) -> SiteProgress:
    core = [f for f in findings if f.family not in NOT_CUDA_SITES]
    exact = sum(1 for f in core if f.fix is not None and f.fix.kind == "exact")
    numerics = sum(1 for f in core if f.fix is not None and f.fix.kind != "exact")
    return SiteProgress(fixed, exact, numerics, len(core) - exact - numerics)
