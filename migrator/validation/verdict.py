"""The one vocabulary of validation statuses: a stage, a check row and a tensor verdict all say one of these.

``Verdict`` is a ``str`` enum so the result JSON keeps the plain strings (``"pass"``, ``"not_run"``, ...)
and a status read back from JSON compares equal to its member.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Verdict(str, Enum):
    """What a stage, check or tensor came to."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"  # the migration changed the numerics (exit 1)
    ERROR = "error"  # could not be judged: the program or the harness did not run (exit 2)
    NOT_RUN = "not_run"  # not selected, gated by an earlier stage, or nothing to run
    NOT_COMPARABLE = "not_comparable"  # both sides ran but cannot be compared (randomness left on)

    def __str__(self) -> str:  # f-strings and str() give the JSON string, not "Verdict.PASS"
        return self.value

    @property
    def severity(self) -> int:
        """pass < warn < fail for grading; the other verdicts grade as pass (they never make a tensor worse)."""
        return _SEVERITY.get(self, 0)


_SEVERITY: dict[str, int] = {Verdict.WARN: 1, Verdict.FAIL: 2}

GRADED = (Verdict.PASS, Verdict.WARN, Verdict.FAIL)  # the verdicts of a stage that compared something
BLOCKING = (Verdict.FAIL, Verdict.ERROR)  # a stage ending so gates the later ones (unless --force)


def worst(statuses: Iterable[str]) -> Verdict:
    """The worst of pass/warn/fail among ``statuses`` (pass for none; any other status counts as pass)."""
    out = Verdict.PASS
    for status in statuses:
        if _SEVERITY.get(status, 0) > out.severity:  # members hash as their strings: plain strings look up too
            out = Verdict(status)
    return out
