"""Where no import names a call's callee, the scanner calls the call detectors only on the method names and keywords
their units declare (`UNNAMED_CALLEE`), and where one does, only on the names, methods and keywords they declare
for that (`NAMED_CALLEE`; the build checks: `extension_builds.CALLEE_NAMES`): on every other call a detector must do
nothing."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from migrator.catalogue import units
from migrator.catalogue.loader import load_catalogue

ROOT = Path(__file__).resolve().parents[2]
EXTRA = """
x.cuda(); x.cuda(0); x.to(0); x.to_empty(device=1); x.to("cuda"); y.zero_grad(set_to_none=True); z.zero_grad(True)
f(device=0); g(map_location=0); h(0); k(device_type="cuda"); m.autocast("cuda"); n.GradScaler("cuda")
x.to(); x.cpu(0); opt.step(set_to_none=True); torch_device(0); x.to (0); x.npu(0); x.cuda_(); run(cuda=True)
"""


class _Recorder:
    """The detectors' view of the scanner, recording what they report or claim."""

    def __init__(self) -> None:
        self.acts: list[str] = []

    def emit(self, impl, node, symbol, replacement=None) -> None:
        self.acts.append(f"emit {impl}")

    def claim(self, node) -> None:
        self.acts.append("claim")

    def qualnames(self, node) -> set[str]:
        return set()

    def built_by(self, node) -> set[str]:
        return {"torch_npu.optim.NpuFusedAdam"}  # what `zero_grad` looks for

    def module_calls(self) -> set[str]:
        return {"torch_npu.optim.NpuFusedAdam"}


def _parsed(extra: list[str]) -> list[ast.Module]:
    """The modules of `extra`, `samples/` and `tests/fixtures/` that parse."""
    trees = []
    for text in extra + [p.read_text(encoding="utf-8") for folder in ("samples", "tests/fixtures")
                         for p in sorted((ROOT / folder).rglob("*.py"))]:
        try:
            trees.append(ast.parse(text))
        except SyntaxError:
            continue
    return trees


def _calls() -> list[ast.Call]:
    calls = []
    for tree in _parsed([EXTRA]):
        calls += [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return calls


@pytest.fixture(scope="module")
def calls() -> list[ast.Call]:
    return _calls()


@pytest.mark.parametrize("detector", units.detectors(load_catalogue(), "call"), ids=lambda d: d.__module__)
def test_a_detector_acts_only_on_what_its_unit_declares(detector, calls):
    methods, keywords = importlib.import_module(detector.__module__).UNNAMED_CALLEE
    declared = acted = 0
    for call in calls:
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        method = call.func.attr if isinstance(call.func, ast.Attribute) else None
        recorder = _Recorder()
        detector(recorder, call, set(), kwargs)
        if method in methods or keywords & kwargs.keys():
            declared += 1
            acted += bool(recorder.acts)
        else:
            assert recorder.acts == [], ast.unparse(call)
    assert (declared > 0) == bool(methods or keywords)
    assert (acted > 0) == bool(methods or keywords)  # the declaration is no empty promise


def test_the_scanner_reads_every_declaration():
    triggers = units.unnamed_callee_triggers(load_catalogue())
    assert triggers is not None
    assert {"cuda", "to", "to_empty", "zero_grad"} <= triggers[0] and "device" in triggers[1]


# where an import names the callee (`NAMED_CALLEE`): each call tried with the names an import gives it in its module
# and with names the detectors and build checks act on
NAMED_EXTRA = """
import torch, functools, importlib
from torch.utils import cpp_extension
from parrots.utils.build_extension import Extension
torch.device(0); torch.device(rank); torch.autocast("cuda"); torch.amp.GradScaler("cuda"); torch.zeros(1, device=0)
torch.nn.Linear(1, 2).to(0); torch.nn.parallel.DistributedDataParallel(m, device_ids=[0], output_device=0)
importlib.import_module("fused_cuda"); cpp_extension.load_inline("x", cuda_sources=["k"]); cpp_extension.load("x", ["a.cu"])
Extension("x", ["a.cu"], cuda=True); functools.partial(Extension, cuda=True); torch.cuda(); torch.x.zero_grad(True)
"""
SYNTHETIC_NAMES = ({"torch.device"}, {"torch.autocast"}, {"torch.amp.GradScaler"}, {"torch.nn.Linear"},
                   {"importlib.import_module"}, {"functools.partial"})


def _named_calls() -> list[tuple[ast.Call, set[str]]]:
    from migrator.engine.python_checker import PythonChecker

    found = []
    for tree in _parsed([NAMED_EXTRA, EXTRA]):
        checker = PythonChecker(load_catalogue(), lambda rule: True, tree)
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            found += [(call, names) for names in (checker.qualnames(call.func), *SYNTHETIC_NAMES) if names]
    return found


class _NamesRecorder(_Recorder):
    def qualnames(self, node) -> set[str]:
        return {"parrots.utils.build_extension.Extension"} if isinstance(node, ast.Name) and node.id == "Extension" else set()


@pytest.mark.parametrize("detector", units.detectors(load_catalogue(), "call"), ids=lambda d: d.__module__)
def test_a_detector_acts_on_a_named_callee_only_as_its_unit_declares(detector):
    names_declared, methods, keywords = importlib.import_module(detector.__module__).NAMED_CALLEE
    acted = 0
    for call, names in _named_calls():
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        method = call.func.attr if isinstance(call.func, ast.Attribute) else None
        recorder = _NamesRecorder()
        detector(recorder, call, set(names), kwargs)
        if recorder.acts:
            acted += 1
            assert names & names_declared or method in methods or keywords & kwargs.keys(), (ast.unparse(call), names)
    assert (acted > 0) == bool(names_declared or methods or keywords)  # the declaration is no empty promise


def test_the_build_checks_act_only_on_their_callee_names():
    from migrator.engine import extension_builds

    acted = 0
    for call, names in _named_calls():
        recorder = _NamesRecorder()
        extension_builds.check_call(recorder, call, set(names), {k.arg: k.value for k in call.keywords if k.arg})
        if recorder.acts:
            acted += 1
            assert names & extension_builds.CALLEE_NAMES, (ast.unparse(call), names)
    assert acted >= 5  # DDP, a module loader, load_inline, load, parrots' Extension


def test_the_scanner_reads_every_named_declaration():
    triggers = units.named_callee_triggers(load_catalogue())
    assert triggers is not None
    assert {"torch.device", "torch.autocast"} <= triggers[0] and "to" in triggers[1] and "device" in triggers[2]
