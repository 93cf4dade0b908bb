"""The msprof-analyze advisor's fusion patterns, read from the pinned copy of its rule file
(`ascend_env/advisor/timeline_fusion_ops.yaml`, msprof-analyze 26.2.0, Apache-2.0).

Each rule maps a torch_npu fused API to op-sequence patterns such as
``(pow){0,1}-(mean){0,1}-(add){0,1}-rsqrt-mul-(type_as){0,1}``: ``-`` joins consecutive ops, ``(op)``
is one op, ``(op){m,n}`` that op m to n times. The file's entries inherit from one another
(``inherit_unique_id``) and only ever ``add``, so the rule set is every entry's ``aten`` additions;
each rule keeps the ``cann_version`` of the entry that first lists it. The ``Optimizer`` sections
(``AdamW.step``) name optimizer classes, not op sequences, and are left out. Standard library + yaml.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ADVISOR = "msprof-analyze"
ADVISOR_VERSION = "26.2.0"
RULE_FILE = "timeline_fusion_ops.yaml"
PINNED_SHA256 = "c9ee6c6cd69136c784f7a60746188a6de6e8a3fdbed8f960188517cd1186dc28"
_ITEM = re.compile(r"^(?:\((?P<grouped>\w+)\)(?:\{(?P<low>\d+),(?P<high>\d+)\})?|(?P<bare>\w+))$")


class AdvisorRuleError(ValueError):
    """The rule file is not the pinned one or a pattern cannot be read (the message names the file)."""


@dataclass(frozen=True)
class Step:
    """One item of a pattern: the op name, between `low` and `high` times."""

    op: str
    low: int = 1
    high: int = 1


@dataclass(frozen=True)
class AdvisorRule:
    fused_api: str  # torch_npu.npu_rms_norm
    pattern: str  # as written in the file
    steps: tuple[Step, ...]
    cann_version: str  # of the entry that first lists the pattern
    unique_id: int

    @property
    def name(self) -> str:
        """How a finding cites the rule: the fused API and its pattern, the file and versions."""
        return (f"{self.fused_api}: {self.pattern} ({ADVISOR} {ADVISOR_VERSION} {RULE_FILE}, "
                f"cann_version {self.cann_version})")


def rule_path() -> Path:
    from migrator.ground.resources import data_dir

    return data_dir("ascend_env") / "advisor" / RULE_FILE


def parse_pattern(pattern: str, where: str) -> tuple[Step, ...]:
    steps = []
    for item in pattern.strip().split("-"):
        found = _ITEM.match(item.strip())
        if found is None:
            raise AdvisorRuleError(f"{where}: cannot read pattern item {item!r} of {pattern!r}")
        if found["bare"]:
            steps.append(Step(found["bare"]))
        elif found["low"] is not None:
            steps.append(Step(found["grouped"], int(found["low"]), int(found["high"])))
        else:
            steps.append(Step(found["grouped"]))
    if all(s.low == 0 for s in steps):
        raise AdvisorRuleError(f"{where}: pattern {pattern!r} matches an empty sequence")
    return tuple(steps)


def parse_rules(text: str, where: str) -> tuple[AdvisorRule, ...]:
    """Every (fused API, pattern) of the file's `aten` additions, first entry first."""
    import yaml

    entries = yaml.safe_load(text)
    if not isinstance(entries, list):
        raise AdvisorRuleError(f"{where}: expected a list of cann_version entries")
    rules: dict[tuple[str, str], AdvisorRule] = {}
    for entry in entries:
        added = ((entry.get("operator_rules") or {}).get("aten") or {}).get("add") or {}
        for api, patterns in added.items():
            for pattern in patterns:
                key = (api, pattern)
                if key not in rules:
                    rules[key] = AdvisorRule(api, pattern, parse_pattern(pattern, f"{where} ({api})"),
                                             str(entry.get("cann_version", "?")), int(entry.get("unique_id", -1)))
    return tuple(rules.values())


@cache
def load_rules() -> tuple[AdvisorRule, ...]:
    """The pinned file's rules; a file whose hash is not the pinned one is refused, naming it."""
    path = rule_path()
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != PINNED_SHA256:
        raise AdvisorRuleError(f"{path}: sha256 {digest} is not the pinned {ADVISOR} {ADVISOR_VERSION} file "
                               f"({PINNED_SHA256}); update PINNED_SHA256 and ADVISOR_VERSION together")
    return parse_rules(data.decode("utf-8"), str(path))
