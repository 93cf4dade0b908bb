"""OPS008 a `torch==X` pin without torch-npu: a `torch-npu==Y` line is added after it (requirements files,
npu target). The line edit itself is `migrator.fix.text_fixer.add_torch_npu`."""

from __future__ import annotations

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

LEVEL = "node"
PORTABLE = "torch-npu is added for the npu target only (portable code keeps one requirements set)"
NOT_REQUIREMENTS = "add the torch-npu pin by hand here (only requirements files are edited)"


def precheck_text(site: CallSite) -> Verdict:
    if site.target != Target.NPU:
        return Declined(PORTABLE)
    if site.file_kind != "requirements":
        return Declined(NOT_REQUIREMENTS)
    return FIXABLE


def precheck(site: CallSite) -> Verdict:  # a setup.py requirement string
    return Declined(PORTABLE if site.target != Target.NPU else NOT_REQUIREMENTS)
