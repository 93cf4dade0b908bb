"""The checker's traversal after session 16 (issue 43) does what it did before, with fewer calls: leaves its handlers
ignore are tested inline (`FastVisitor.NAMES_VISITED`, `CONSTANTS_IGNORED`, `LEAVES_SKIPPED`), a keyword is gone through to its value, a
call visits its children with what it knows of the callee, a bound dotted name is walked once, names that report
nothing are not visited again, strings are checked only where they hold a word a check needs (`STRING_WORDS`), the
set-up's statement walk tests assignments inline. Each is held here to the code it replaced (written out below) on
`samples/`, `tests/fixtures/`, the tool's own modules and edge cases."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from migrator.catalogue import units
from migrator.catalogue.loader import load_catalogue
from migrator.catalogue.patterns import accepted_names, lists_npu
from migrator.engine import extension_builds
from migrator.engine.extension_builds import CUDA_SOURCE_NAME
from migrator.engine.fast_visitor import FastVisitor
from migrator.engine.guards import GUARD_STATEMENTS
from migrator.engine.import_calls import attribute_modules, bound_module, collect_aliases
from migrator.engine.python_checker import DTYPE_STRINGS, ENV_TOKEN, NVIDIA_SMI, PythonChecker
from migrator.engine.statements import (
    BINDING_STATEMENTS,
    SCOPE_STATEMENTS,
    TRY_STATEMENTS,
    block_fields,
    may_bind_module,
    sorted_statements,
)
from migrator.engine.string_words import OWN_STRING_WORDS, string_gate
from migrator.ground.kinds import FixKind
from tests.engine.helpers import parsed_modules

ROOT = Path(__file__).resolve().parents[2]
EDGES = '''
import torch, pynvml, numpy as np
import torch.nn.functional as F
from typing import Optional, Literal
from torch.cuda import amp
import importlib
cp = importlib.import_module("cupy")
class GPU:
    def __init__(self, x: Optional["torch.Tensor"] = None, *a: torch.Tensor, **k):
        self.pynvml = pynvml
        self.n = self.pynvml.nvmlDeviceGetCount() + pynvml.nvmlInit()
        self.d = torch.device(0); y = x.to(0, non_blocking=True).cuda(); z = F.relu(y, inplace=True)
        w = torch.nn.functional.softmax(z, dim=-1).double().half(); v = torch.float64; u = torch.cuda.is_available()
        m = {"device": "cuda:0", 1: 2.5, None: True, b"cuda": 3j, "NCCL_DEBUG": ..., "x.cu": "torch.cuda.FloatTensor"}
        p = ["cuda", "npu"]; q = ("cuda", "cpu"); r = {"cuda"}; s = f"cuda:{k}"; t = "nccl" if a else "NcCl"
        torch.cuda.synchronize(); torch.backends.cudnn.benchmark = True; np.float64(1); cp.asarray([1])
        parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"]); os.system("nvidia-smi -L")
        with torch.autocast("cuda"), amp.autocast(): loss.backward(); torch.autograd.backward(loss)
        f(*a, **k); g(device=1)(x)[0].to(1); h.is_cuda; self.x.y.is_cuda; torch.x.is_cuda; (lambda: torch)()
        def _f(): "CUDA_VISIBLE_DEVICES=0 nvidia-smi"; return torch.float16
        match k:
            case {"cuda": 1, **rest} if rest: pass
        model: Literal["cuda"] = "cuda"; subprocess.run(["nvidia-smi"]); Trainer(accelerator="gpu")
        from_pretrained(attn_implementation="flash_attention_2"); x.type(torch.cuda.HalfTensor)
        use(pynvml, amp, torch); use(pynvml, amp.x, torch.float64.y, torch.cuda.amp)  # names reported at each use
'''


def _sources() -> list[str]:
    folders = [ROOT / "samples", ROOT / "tests/fixtures", ROOT / "migrator/engine"]
    return [EDGES] + [p.read_text(encoding="utf-8") for folder in folders for p in sorted(folder.rglob("*.py"))]


@pytest.fixture(scope="module")
def trees() -> list[ast.Module]:
    return parsed_modules(_sources())


class _Before(PythonChecker):
    """The checker before session 16: every leaf visited through its handler, every string checked, a call's and an
    assignment's children by `generic_visit`, each link of a bound dotted name a visit of its own; and before
    session 17: every call detector on every call an import names."""

    NAMES_VISITED = None
    CONSTANTS_IGNORED: frozenset[type] = frozenset()
    LEAVES_SKIPPED: dict[type, str] = {}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.string_gate = None
        self.attribute_names = None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root = node.value
        while type(root) is ast.Attribute:
            root = root.value
        if type(root) is ast.Name and (root.id in self.aliases or root.id in self.alias_roots):
            if self.report_symbol(node):
                return
        elif type(root) is ast.Name:
            self._unbound_links(node)
            return
        for detect in self.detect_attribute:
            detect(self.facade, node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):
            names = self._names(node)
            known = self._resolve(names) if names else None
            if known is not None and (known[0] is not None or known[1] or known[2] is not None):
                self._report(node, known, False)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        self.call_of[func] = node
        if node.args and type(node.args[0]) is not ast.Starred:
            self.first_arg_of[node.args[0]] = node
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        if "choices" in kwargs:
            self.defaults_with_choices.update(k.value for k in node.keywords if k.arg == "default")
        names = self._names(func)
        if names:
            self._named_call(node, func, names, kwargs)
        else:
            self._unnamed_call(node, func, kwargs)
        self.generic_visit(node)

    def _named_call(self, node: ast.Call, func: ast.expr, names: frozenset[str], kwargs: dict[str, ast.expr]) -> None:
        if type(func) is ast.Attribute and func.attr == "backward":
            self.backward_lines.append(node.lineno)
        kernel, command, op, autocast, *_ = self._callee(names)
        if kernel and node not in self.decorator_calls:
            self.report_symbol(func, decorator=True)
        self.check_call(node, set(names), kwargs, command)  # every detector on every call an import names
        if op is not None:
            self.calls.append((op, node))
        if autocast and "dtype" not in kwargs:
            self.dtypes_used.add("fp16")

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        self.assigned_values.add(value)
        bound = bound_module(node) if may_bind_module(value) else None
        hit = self.match({bound[1]}) if bound else None
        if bound and hit and hit[0].rule.fix_kind == FixKind.MANUAL:
            self.emit(hit[0].rule, value, bound[1])
        if type(value) is ast.Call and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
            names = self._names(value.func)
            if names and self._callee(names)[4]:
                self.tensor_names.add(node.targets[0].id)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, str):
            if self.in_type or node in self.claimed or node in self.docstring_set:
                return
            self.check_string(node, value)
            if value.lower() in DTYPE_STRINGS:
                self.dtypes_used.add(DTYPE_STRINGS[value.lower()])
        elif isinstance(value, bytes) and node not in self.claimed:
            self.check_string(node, value.decode("latin-1"))

    def _collection(self, node: ast.Tuple | ast.List | ast.Set) -> None:
        elts = node.elts
        for e in elts:
            if type(e) is ast.Constant and e.value == "cuda":
                if lists_npu(node) or accepted_names(node):
                    for element in elts:
                        if isinstance(element, ast.Constant) and element.value == "cuda":
                            self.claim(element)
                break
        for e in elts:
            self.visit(e)

    visit_Tuple = visit_List = visit_Set = _collection


def _place(node: ast.AST) -> tuple:
    return type(node).__name__, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), \
        getattr(node, "end_col_offset", 0)


def _outcome(checker_class: type[PythonChecker], tree: ast.Module) -> dict:
    checker = checker_class(load_catalogue(), lambda rule: True, tree)
    checker.visit(tree)
    return {
        "hits": [(rule.code, _place(node), symbol, replacement, sorted(extra.items())) for rule, node, symbol,
                 replacement, extra in checker.hits],
        "dtypes": sorted(checker.dtypes_used), "tensors": sorted(checker.tensor_names),
        "calls": [(op, _place(c)) for op, c in checker.calls],
        "methods": [(receiver, method, _place(c)) for receiver, method, c in checker.method_calls],
        "float64": [(_place(n), s) for n, s in checker.float64], "backward": checker.backward_lines,
        "functions": [_place(f) for f in checker.functions], "loops": [_place(n) for n in checker.loops],
        "guards": [_place(n) for n in checker.guard_nodes],
        "call_of": sorted((_place(k), _place(v)) for k, v in checker.call_of.items()),
        "first_arg_of": sorted((_place(k), _place(v)) for k, v in checker.first_arg_of.items()),
        **{name: sorted(map(_place, getattr(checker, name))) for name in (
            "assigned_values", "defaults_with_choices", "pattern_nodes", "command_strings", "claimed")},
    }


def test_the_traversal_records_what_it_did_before(trees):
    reported = 0
    for tree in trees:
        after = _outcome(PythonChecker, tree)
        assert after == _outcome(_Before, tree)
        reported += len(after["hits"])
    edges = _outcome(PythonChecker, trees[0])
    assert reported > 100 and len(edges["hits"]) >= 25  # the corpus and the edge cases do reach the detectors
    assert edges["methods"] and edges["float64"] and edges["backward"] and edges["defaults_with_choices"]


DOCSTRING_EDGES = parsed_modules([
    '"module"\nclass A:\n    b"bytes: no docstring"\n    def f(self):\n        f"no docstring: {x}"\n'
    '    async def g(self):\n        "async"\n        class B:\n            "inner"\n',
    "1\ndef f():\n    'yes'\n    'no: the second'\nclass C: ...\nif x:\n    def g(): 'in an if'\n"
    "try:\n    import a\nexcept ImportError:\n    class D:\n        'in a handler'\n",
    "",
])


def _docstrings_as_before(tree: ast.AST, scopes: list[ast.stmt]) -> list[ast.Constant]:
    """`statements.docstrings`, its own pass over the module and its scopes before the walk read them."""
    out = []
    for node in (tree, *scopes):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    out.append(body[0].value)
    return out


def test_the_statement_walk_sorts_as_before(trees):
    def before(tree: ast.AST) -> tuple:
        bindings, tries, scopes, guard_nodes = [], [], [], []
        stack = list(getattr(tree, "body", ()))
        while stack:
            statement = stack.pop()
            kind = type(statement)
            if kind in GUARD_STATEMENTS:
                guard_nodes.append(statement)
            if kind is ast.Assign:
                if type(statement.value) is ast.Name or may_bind_module(statement.value):
                    bindings.append(statement)
            elif kind in BINDING_STATEMENTS:
                bindings.append(statement)
            elif kind in TRY_STATEMENTS:
                tries.append(statement)
            elif kind in SCOPE_STATEMENTS:
                scopes.append(statement)
            for name in block_fields(kind):
                stack.extend(getattr(statement, name, None) or ())
        return bindings, tries, scopes, guard_nodes, _docstrings_as_before(tree, scopes)

    kept = 0
    for tree in [*trees, *DOCSTRING_EDGES]:
        assert sorted_statements(tree) == before(tree)
        kept += sum(type(s) is ast.Assign for s in sorted_statements(tree).bindings)
    assert kept >= 3  # `self.pynvml = pynvml`, `cp = importlib.import_module("cupy")`: assignments are kept
    found = [[d.value for d in sorted_statements(tree).docstrings] for tree in DOCSTRING_EDGES]
    assert found == [["module", "async", "inner"], ["in a handler", "in an if", "yes"], []]  # the walk's order


def _attribute_modules_as_before(statements, aliases, manual):
    """`import_calls.attribute_modules` before it asked `manual` only of the names `self.x = name` assigns."""
    out: dict[str, set[str]] = {}
    bound = {name: manual_modules for name, modules in aliases.items()
             if (manual_modules := {m for m in modules if "." not in m and manual(m)})}
    if not bound:
        return out
    for node in statements:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)):
            continue
        modules = bound.get(node.value.id, set())
        for target in node.targets if modules else ():
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                out.setdefault(f"self.{target.attr}", set()).update(modules)
    return out


def test_the_attribute_modules_are_as_before(trees):
    edges = parsed_modules(["import pynvml, torch, a.b as c\nclass M:\n    def __init__(self):\n"
                            "        self.nvml = pynvml; self.t = torch; self.c = c; x.y = pynvml; self.z = self.nvml\n"
                            "        self.nvml2 = self.other = pynvml; self.u = undefined\n"])
    manuals = (lambda m: True, lambda m: m == "pynvml", lambda m: False)
    named = 0
    for tree in [*trees, *edges]:
        bindings = sorted_statements(tree).bindings
        aliases = collect_aliases(tree, bindings)
        for manual in manuals:
            found = attribute_modules(bindings, aliases, manual)
            assert found == _attribute_modules_as_before(bindings, aliases, manual)
            assert list(found) == list(_attribute_modules_as_before(bindings, aliases, manual))  # in the same order
            named += len(found)
    assert named >= 5


def _string_cases(trees: list[ast.Module]) -> set[str]:
    strings = {"cuda", "CUDA:0", "x.CU", "NcCl", "İnccl", "ﬃcuda", "Kcuda", "nvidia-smi", "NVIDIA_SMI", "NVTE_X",
               "TORCH_NCCL_X", "torch.cuda.FloatTensor", "TORCH.CUDA.X", "", "cu da", "n ccl"}
    for tree in trees:
        strings.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return strings


class _Recorder:
    def __init__(self) -> None:
        self.acts: list[str] = []

    def emit(self, impl, node, symbol, replacement=None) -> None:
        self.acts.append(impl)

    def claim(self, node) -> None:
        self.acts.append("claim")

    def qualnames(self, node) -> set[str]:
        return set()


def test_an_attribute_detector_acts_only_on_the_names_its_unit_declares(trees):
    hooks = units.detectors(load_catalogue(), "attribute")
    assert hooks and units.attribute_names(load_catalogue()) is not None
    attributes = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    attributes += [ast.Attribute(ast.Name(name, ast.Load()), attr, ctx) for name in ("x", "self")
                   for attr in ("is_cuda", "is_npu", "cuda", "device") for ctx in (ast.Load(), ast.Store())]
    for hook in hooks:
        declared = importlib.import_module(hook.__module__).ATTRIBUTE_NAMES
        acted = 0
        for node in attributes:
            recorder = _Recorder()
            hook(recorder, node)
            if recorder.acts:
                acted += 1
                assert node.attr in declared, (hook.__module__, node.attr)
        assert acted, hook.__module__


def test_a_string_detector_acts_only_on_strings_holding_its_words(trees):
    hooks = units.detectors(load_catalogue(), "string")
    assert hooks and units.string_words(load_catalogue()) is not None  # every string unit declares its words
    strings = _string_cases(trees)
    node = ast.Constant("x")
    for hook in hooks:
        words = importlib.import_module(hook.__module__).STRING_WORDS
        acted = 0
        for text in strings:
            recorder = _Recorder()
            hook(recorder, node, text)
            if recorder.acts:
                acted += 1
                assert any(word in text.lower() for word in words), (hook.__module__, text)
        assert acted, hook.__module__  # the cases do reach each detector


def test_the_checkers_own_string_checks_need_their_words(trees):
    for text in _string_cases(trees) | {"CUDA_HOME", "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_VISIBLE_DEVICES", "a.cuh"}:
        needs = ENV_TOKEN.search(text) or NVIDIA_SMI.search(text) or (".cu" in text and CUDA_SOURCE_NAME.fullmatch(text))
        if needs:
            assert any(word in text.lower() for word in OWN_STRING_WORDS), text


class _Leaves(FastVisitor):
    NAMES_VISITED = "wanted"
    CONSTANTS_IGNORED = frozenset({int, float, type(None)})

    def __init__(self) -> None:
        self.wanted = {"a", "torch"}
        self.seen: list[ast.AST] = []

    def visit_Name(self, node: ast.Name) -> None:
        self.seen.append(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        self.seen.append(node)

    def visit_Call(self, node: ast.Call) -> None:
        self.seen.append(node)
        self.generic_visit(node)


def test_ignored_leaves_are_left_out_in_the_standard_order():
    tree = ast.parse('torch.f(a, 1, b, "s", k=a, **{None: 2.5, "x": b}, z=g(a, None, True))\n[a, 1, (b, "t")]\n')
    visitor = _Leaves()
    visitor.visit(tree)
    expected = [n for n in _standard_order(tree) if isinstance(n, ast.Call)
                or (isinstance(n, ast.Name) and n.id in visitor.wanted)
                or (isinstance(n, ast.Constant) and type(n.value) not in _Leaves.CONSTANTS_IGNORED)]
    assert visitor.seen == expected
    assert [type(n).__name__ for n in visitor.seen].count("Constant") == 4  # "s", "x", True, "t"


class _Skipping(FastVisitor):
    """Attributes, arguments, names and tuples recorded, but an attribute named `skip` and an argument without an
    annotation (`LEAVES_SKIPPED`)."""

    LEAVES_SKIPPED = {ast.Attribute: "child.attr == 'skip'", ast.arg: "child.annotation is None"}

    def __init__(self) -> None:
        self.seen: list[ast.AST] = []

    def _record(self, node: ast.AST) -> None:
        self.seen.append(node)
        self.generic_visit(node)

    visit_Attribute = visit_arg = visit_Name = _record

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self.seen.append(node)
        self.visit_expressions(node.elts)  # the per-class `visit_expressions` tests them too


def test_skipped_leaves_and_what_they_hold_are_left_out_in_the_standard_order():
    tree = ast.parse("def f(a, b: x.skip, *c: t.y, d=x.skip.z, **e): return f(u.skip, v.w, k=(q.skip, r.skip(s.m)))\n"
                     "lambda g, h=y.skip: g.skip")
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == "skip") or (isinstance(node, ast.arg) and node.annotation is None):
            skipped.update(ast.walk(node))
    visitor = _Skipping()
    visitor.visit(tree)
    expected = [n for n in _standard_order(tree) if n not in skipped and isinstance(n, (ast.Attribute, ast.arg, ast.Name, ast.Tuple))]
    assert visitor.seen == expected
    assert len(skipped) > 10 and sum(isinstance(n, ast.Attribute) for n in visitor.seen) == 4  # t.y, x.skip.z, v.w, s.m


def _standard_order(tree: ast.AST) -> list[ast.AST]:
    class Recording(ast.NodeVisitor):
        def __init__(self) -> None:
            self.seen: list[ast.AST] = []

        def generic_visit(self, node: ast.AST) -> None:
            self.seen.append(node)
            super().generic_visit(node)

    recording = Recording()
    recording.visit(tree)
    return recording.seen


def test_the_module_calls_found_from_the_statements_equal_the_index(trees):
    from migrator.engine.bindings import Bindings

    found = 0
    for tree in trees:
        checker = PythonChecker(load_catalogue(), lambda rule: True, tree)
        from_statements = Bindings(tree, checker.qualnames).module_calls()
        indexed = Bindings(tree, checker.qualnames)
        indexed.built_by(tree)  # builds the index of every node's scope, the module's calls with it
        assert from_statements == indexed.everywhere
        found += len(from_statements)
    assert found > 20


def test_the_checkers_hooks_are_what_the_units_answer_for_its_catalogue():
    catalogue = load_catalogue()
    tree = ast.parse("import torch\n")
    for _ in range(2):  # the first checker finds them, the next reads them back
        checker = PythonChecker(catalogue, lambda r: True, tree)
        assert checker.detect_call == units.detectors(catalogue, "call")
        assert checker.unnamed_triggers == units.unnamed_callee_triggers(catalogue)
        named = units.named_callee_triggers(catalogue)
        assert checker.named_triggers == named and named is not None
        assert checker.detected_names == named[0] | extension_builds.CALLEE_NAMES
        assert checker.detect_string == units.detectors(catalogue, "string")
        assert checker.string_gate is string_gate(catalogue)
        assert checker.detect_compare == units.detectors(catalogue, "compare")
        assert checker.detect_attribute == units.detectors(catalogue, "attribute")
        assert checker.attribute_names == units.attribute_names(catalogue)
