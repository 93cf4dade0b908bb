"""The fixed vocabularies of the static side: the fix target, a rule's severity and its fix kind.

Each is a `str` enum whose values are the strings the JSON, the YAML and the command line use, so
`Target.NPU == "npu"` and a member serialises as its value. `str()` and `format()` give the value too
(Python 3.11 changed a mixed-in enum's format to `Target.NPU`), so a member can stand wherever the
string stood.
"""

from __future__ import annotations

from enum import Enum


class _Kind(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Target(_Kind):
    """What `migrate fix` writes for: Ascend only, or code that runs on CUDA, Ascend and CPU alike."""

    NPU = "npu"
    PORTABLE = "portable"


class Severity(_Kind):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class FixKind(_Kind):
    """How a rule's sites are fixed: exactly, with a kernel change to validate, or by a person."""

    EXACT = "exact"
    NUMERICS = "numerics"
    MANUAL = "manual"


def values(kind: type[_Kind]) -> tuple[str, ...]:
    """The strings of a vocabulary, in declaration order (for messages and `choices=`)."""
    return tuple(str(member.value) for member in kind)
