"""The passes after the checker's traversal (advice, op coverage, prechecks, Triton) take shortcuts: a list walk
for `ast.walk`, a word per fusion detector, the coverage table asked only about names it lists, verdicts kept per
process, a statement-only walk for the import scopes. Each is held here to the code it replaced (written out below
as the reference) on the samples, the fixtures, the engine's own modules and cases made to catch the edges."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from migrator.catalogue.loader import load_catalogue
from migrator.engine import fusion_attention, fusion_checker, import_scopes, perf_checker
from migrator.engine.coverage_checker import INFO_ONCE, SETUP_PREFIXES, _verdict, coverage_hits, depends_on_training
from migrator.engine.module_check import FUSION_WORDS, _lines_naming
from migrator.engine.node_walk import children, walk_nodes
from migrator.engine.python_checker import PythonChecker
from migrator.engine.sites import name_uses

ROOT = Path(__file__).resolve().parents[2]
EDGES = '''
import torch, triton
from torch import rsqrt as r, nonzero
from torch.nn.functional import softmax as sm, silu
__all__ = ["Norm"]
__all__ += ["extra"]

class Norm(torch.nn.Module):
    @staticmethod
    def rms(x, eps=1e-6):
        v = x.pow(2).mean(-1, keepdim=True)
        return x * r(v + eps) * 2

    def forward(self, x, mask):
        global STEP
        import numpy as np
        a, b = x.chunk(2, -1)
        y = silu(a) * b
        att = sm(x @ x.transpose(-2, -1) / 8, dim=-1)
        try:
            from apex import amp
        except ImportError:
            amp = None
        finally:
            pass
        match y:
            case [first, *rest]:
                import os
            case {"k": v, **others}:
                pass
        if STEP % 10 == 0:
            print(y, x.item(), x[mask > 0], torch.float64)
        out = x[x != 0].double() + nonzero(x).sum()
        (lambda q: q.npu_rms_norm)(x)
        f = (att + x.npu_swiglu)
        return att @ x, 1 .real, [g for g in x], f, x.cpu()
async def train_step(loader):
    async for batch in loader:
        loss = batch.sum()
        loss.backward()
        print(f"{loss}", loss.item())
def caller(): return Norm().rms(torch.ones(1)).softmax(-1).npu_fusion_attention()
'''


def _modules() -> list[tuple[str, str]]:
    paths = sorted([*(ROOT / "samples").rglob("*.py"), *(ROOT / "tests" / "fixtures").rglob("*.py"),
                    *(ROOT / "migrator" / "engine").glob("*.py")])
    out = [("edges.py", EDGES)]
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        out.append((path.name, text))
    return out


MODULES = _modules()


@pytest.fixture(scope="module")
def checked() -> list[tuple[str, str, ast.Module, PythonChecker]]:
    catalogue = load_catalogue()
    out = []
    for name, text in MODULES:
        tree = ast.parse(text)
        checker = PythonChecker(catalogue, lambda rule: True, tree)
        checker.visit(tree)
        out.append((name, text, tree, checker))
    return out


LEAVES = (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)


def test_walk_nodes_is_ast_walk_without_contexts_and_operators():
    for name, text in MODULES:
        tree = ast.parse(text)
        expected = [id(n) for n in ast.walk(tree) if not isinstance(n, LEAVES)]
        assert [id(n) for n in walk_nodes(tree)] == expected, name
        for node in ast.walk(tree):
            assert [id(n) for n in children(node)] == [id(n) for n in ast.iter_child_nodes(node)
                                                      if not isinstance(n, LEAVES)]
        for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            own = list(fusion_checker.own_nodes(func))
            assert [id(n) for n in fusion_checker.own_node_list(func)] == [id(n) for n in own]
            assert [id(n) for n in fusion_checker.own_node_list(func, leaves=False)] == \
                [id(n) for n in own if not isinstance(n, (ast.Name, ast.Constant))]


def _regex_lines_naming(text: str, words: tuple[str, ...], aliases: dict[str, set[str]]) -> list[int]:
    """The replaced `_lines_naming`: one alternation over the text."""
    names = set(words) | {local for local, bound in aliases.items() if any(w in b for b in bound for w in words)}
    pattern = re.compile("|".join(sorted(map(re.escape, names), key=len, reverse=True)))
    lines: set[int] = set()
    line, previous = 1, 0
    for m in pattern.finditer(text):
        line += text.count("\n", previous, m.start())
        previous = m.start()
        lines.add(line)
    return sorted(lines)


@pytest.mark.parametrize("text", ["", "softmax", "a\nsoftmax softmax\n\nrsqrt", "xsoftmaxrsqrt\n", "fsilu\nfsi\n",
                                  "r(x)\nrr\n", "\n\nsilu", "rotate_half\r\nsoftmax\n"])
def test_lines_naming_by_word_agrees_with_the_alternation(text):
    for aliases in ({}, {"r": {"torch.rsqrt"}, "fsi": {"torch.softmax"}, "self.s": {"torch.nn.functional.silu"}}):
        found = _lines_naming(text, FUSION_WORDS, aliases)
        assert found.lines == _regex_lines_naming(text, FUSION_WORDS, aliases)
        for word in FUSION_WORDS:
            assert found.naming(word).lines == _regex_lines_naming(text, (word,), aliases)


def test_module_texts_lines_naming_agrees_with_the_alternation(checked):
    for name, text, _tree, checker in checked:
        assert _lines_naming(text, FUSION_WORDS, checker.aliases).lines == \
            _regex_lines_naming(text, FUSION_WORDS, checker.aliases), name


def test_fused_here_reads_the_names_unparsing_would(checked):
    for _name, _text, tree, _checker in checked:
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            assert fusion_checker._last_name(call.func) == fusion_checker.src(call.func).rsplit(".", 1)[-1]


def _advice(checker: PythonChecker, text: str, every_detector: bool) -> list[tuple]:
    """The fusion advice of a module: by the word gate (as `module_check.advise`), or every detector on every
    function whose lines name any word, each reading all its nodes, names and constants too (the replaced code)."""
    out: list[tuple] = []

    def emit(impl: str, node: ast.AST, symbol: str, replacement: str) -> None:
        out.append((impl, id(node), symbol, replacement))

    mentions = _lines_naming(text, FUSION_WORDS, checker.aliases)
    for func in checker.functions:
        last = func.end_lineno or func.lineno
        if not mentions.within(func.lineno, last):
            continue
        first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
        named = None if every_detector else (lambda w, a=first, b=last: mentions.naming(w).within(a, b))
        body = fusion_checker.Body(func, checker.qualnames)
        if every_detector:
            body.nodes = list(fusion_checker.own_nodes(func))
        fusion_checker.detect_all(body, emit, fusion_attention.attention, named)
    return out


def test_a_detector_skipped_by_its_word_would_have_found_nothing(checked):
    found = 0
    for name, text, _tree, checker in checked:
        expected = _advice(checker, text, every_detector=True)
        assert _advice(checker, text, every_detector=False) == expected, name
        found += len(expected)
    assert found  # the modules hold patterns: the comparison saw some


def _perf(text: str, checker: PythonChecker, walker: type | None) -> list[tuple]:
    """The perf lint's hot-region hits: by `perf_checker.hot_path`'s walker, or by `walker`."""
    out: list[tuple] = []

    def emit(impl: str, node: ast.AST, symbol: str, replacement: str) -> None:
        out.append((impl, id(node), symbol, replacement))

    hot = None
    for region in perf_checker.Structure(checker.functions, checker.loops, checker.backward_lines).hot_regions():
        hot = hot or (perf_checker.hot_path if walker is None else walker)(checker.qualnames, emit, text)
        hot.walk_region(region)
    return out


class _Eager(perf_checker.HotPath):
    """The replaced walker: every attribute checked, each region's tensor names found before its walk."""

    visit_Attribute = perf_checker.HotPath.visit_Call

    def walk_region(self, region: ast.AST) -> None:
        self.region, self._tensors, self.logging = region, perf_checker.tensor_names(region) if self.prints else set(), False
        self.generic_visit(region)


def test_the_hot_path_walker_reports_what_the_eager_one_did(checked):
    found = 0
    for name, text, _tree, checker in checked:
        expected = _perf(text, checker, _Eager)
        assert _perf(text, checker, None) == expected, name
        found += len(expected)
    assert found


def _old_scopes(tree: ast.AST) -> tuple[list[int], list[set[str]], dict[int, int | None], dict[int, int | None]]:
    """The replaced `ImportScopes._walk`: every node entered."""
    functions: list[ast.AST] = []
    declared: list[set[str]] = []
    scope_of: dict[int, int | None] = {}
    line_scope: dict[int, int | None] = {}

    def walk(node: ast.AST, scope: int | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(child)
                declared.append(set())
                walk(child, len(functions) - 1)
                continue
            if isinstance(child, (ast.Global, ast.Nonlocal)) and scope is not None:
                declared[scope].update(child.names)
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                scope_of[id(child)] = scope
                scope_of.update((id(alias), scope) for alias in child.names)
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    line_scope[line] = scope
            walk(child, scope)

    walk(tree, None)
    return [id(f) for f in functions], declared, scope_of, line_scope


def _old_exported(tree: ast.AST, scope_of: dict[int, int | None], package_init: bool) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names.update(import_scopes._strings(node.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("extend", "append")
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "__all__"):
            names.update(s for a in node.args for s in import_scopes._strings(a))
    if package_init:
        names.update(alias.asname or alias.name.split(".")[0] for stmt in ast.walk(tree)
                     if isinstance(stmt, (ast.Import, ast.ImportFrom)) and scope_of.get(id(stmt)) is None
                     for alias in stmt.names if alias.name != "*")
    return names


def _old_name_uses(tree: ast.AST) -> Counter[str]:
    uses: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            uses[node.id] += 1
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            uses[node.arg] += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            uses[node.name] += 1
        elif isinstance(node, ast.ExceptHandler) and node.name:
            uses[node.name] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            uses.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            uses[node.name] += 1
        elif isinstance(node, ast.MatchMapping) and node.rest:
            uses[node.rest] += 1
    return uses


ALL_EDGES = [
    "import a\n__all__ = ['a']\n__all__.extend(['b'])\n__all__.append('c')\n",
    "import a\n__all__ = ['a']\n[__all__.append('x') for n in (1,)]\n",  # one `__all__` inside an expression
    "import a\nx = __all__ = ['a']\n__all__: list = ['d']\n__all__: list\nif a:\n    __all__ += ['e']\n",
    "import a\n__all__ = ['a'] + __all__\ndef f(__all__=None): pass\n",
    "import a\nprint(__all__)\n__all__.remove('a')\n",
]


@pytest.mark.parametrize("package_init", [False, True])
def test_import_scopes_agree_with_the_walk_of_every_node(package_init):
    for name, text in [*MODULES, *(("all-edges.py", text) for text in ALL_EDGES)]:
        tree = ast.parse(text)
        scopes = import_scopes.ImportScopes(tree, name_uses, package_init)
        functions, declared, scope_of, line_scope = _old_scopes(tree)
        assert ([id(f) for f in scopes.functions], scopes.declared, scopes.scope_of, scopes.line_scope) == \
            (functions, declared, scope_of, line_scope), name
        assert name_uses(tree) == _old_name_uses(tree), name
        scopes.uses(None)  # as the scan asks: before `re_exported`
        assert scopes.exported == _old_exported(tree, scope_of, package_init), name
        for index, func in enumerate(scopes.functions):  # read for the ids of names: contexts and operators no matter
            assert scopes.inside(index) == {id(n) for n in ast.walk(func) if not isinstance(n, LEAVES)}, name


def _reference_hits(checker: PythonChecker, soc: str, training: tuple[str, ...]) -> list[tuple]:
    """The replaced `_call_hits` and `_method_hits`: every name looked up in full, every verdict worked out."""
    from migrator.catalogue.coverage import lookup
    from migrator.catalogue.coverage._dtypes import DEFAULT_DTYPES, METADATA_APIS
    from migrator.engine.coverage_checker import AMBIGUOUS_METHODS, _message
    from migrator.ground.model import CoverageInfo

    local = frozenset(DEFAULT_DTYPES | checker.dtypes_used)
    used = local | set(training)
    noted: set[str] = set()

    def verdict(entry, name: str, dtypes: frozenset[str]) -> tuple:
        impl, message, status = _verdict(entry, name, soc, None, {}, dtypes)
        if impl in INFO_ONCE:
            impl = None if name in noted else impl
            noted.add(name)
        return impl, message, status

    out = []
    for name, node in checker.calls:
        if name.startswith(("torch.npu.", "torch_npu.")) or name in METADATA_APIS:
            continue
        entry = lookup(name, soc=soc)
        if entry.known:
            impl, message, status = verdict(entry, name, local if name.startswith(SETUP_PREFIXES) else used)
            out.append((impl, node.func, name, message, CoverageInfo(status, soc, entry.dtypes, entry.note), name, status))
    for receiver, method, node in checker.method_calls:
        known_tensor = receiver is not None and receiver in checker.tensor_names
        name = f"torch.Tensor.{method}"
        if (not known_tensor and method in AMBIGUOUS_METHODS) or name in METADATA_APIS:
            continue
        entry = lookup(name, soc=soc)
        if not entry.known:
            continue
        if known_tensor:
            impl, message, status = verdict(entry, name, used)
            out.append((impl, node.func, name, message, CoverageInfo(status, soc, entry.dtypes, entry.note), name, status))
        elif entry.status in ("unsupported", "cpu_fallback"):
            out.append(("tensor-method-unknown-receiver", node.func, name,
                        _message(entry, name) + " (if the receiver is a tensor)",
                        CoverageInfo(entry.status, soc, entry.dtypes, entry.note), None, None))
    return out


COVERAGE_EDGES = '''
import torch
from torch import nn
idx = torch.zeros(4, dtype=torch.int32)
x = torch.randn(3)
x.masked_fill(idx > 0, 0).kthvalue(1).double()
torch.topk(x, 2, sorted=False)
y.frobnicate_unlisted(x).index_add_(0, idx, x)
nn.init.normal_(x)
torch.npu.synchronize(); x.size(); x.item()
'''


@pytest.mark.parametrize("soc", ["A2", "A3"])
@pytest.mark.parametrize("training", [(), ("bf16",), ("bf16", "fp16")])
def test_coverage_hits_are_the_full_lookups(checked, soc, training):
    catalogue = load_catalogue()
    tree = ast.parse(COVERAGE_EDGES)
    edges = PythonChecker(catalogue, lambda rule: True, tree)
    edges.visit(tree)
    found = 0
    for name, _text, _tree, checker in [*checked, ("coverage-edges.py", COVERAGE_EDGES, tree, edges)]:
        expected = _reference_hits(checker, soc, training)
        assert list(coverage_hits(checker, soc, None, {}, training, training_free=())) == expected, name
        found += len(expected)
    assert found


def test_depends_on_training_is_the_full_comparison(checked):
    from migrator.catalogue.coverage import lookup
    from migrator.catalogue.coverage._dtypes import DEFAULT_DTYPES, TRAINING_DTYPES

    for name, _text, _tree, checker in checked:
        local = frozenset(DEFAULT_DTYPES | checker.dtypes_used)
        every = local | frozenset(TRAINING_DTYPES)
        names = [n for n, _ in checker.calls if not n.startswith(SETUP_PREFIXES)]
        names += [f"torch.Tensor.{m}" for r, m, _ in checker.method_calls if r is not None and r in checker.tensor_names]
        expected = every != local and any(
            (entry := lookup(n, soc="A2")).known and entry.status == "partial"
            and _verdict(entry, n, "A2", None, {}, local) != _verdict(entry, n, "A2", None, {}, every)
            for n in dict.fromkeys(names))
        assert depends_on_training(checker, "A2", None, {}) == expected, name


@pytest.mark.parametrize("name", ["torch.nn.functional.gelu", "torch.Tensor.add", "Tensor.add", "torch.Tensor.nope",
                                  "torch.nn.modules.linear.Linear", "torch.functional.einsum", "torch.ops.aten.add",
                                  "aten::mm", "torch.cuda.synchronize", "torch_npu.npu.x", " `torch.add()` ", "numpy.add"])
def test_listed_is_lookups_known(name):
    from migrator.catalogue.coverage import lookup
    from migrator.catalogue.coverage._table import listed

    assert listed(name, soc="A2") == lookup(name, soc="A2").known


def test_scope_dtypes_binds_from_no_node_outside_its_binder_classes():
    from migrator.engine.dtype_evidence import _BINDERS, ScopeDtypes

    for name, text in MODULES:
        tree = ast.parse(text)
        scope = ScopeDtypes(tree, [], lambda node: set())
        for node in ast.walk(tree):
            if node.__class__ not in _BINDERS:
                scope._bind(node)  # noqa: SLF001 - what skipping it leaves out
        assert scope._values == {}, name  # noqa: SLF001


GATE_EDGES = [
    "import torch\nfrom torch import nonzero as nz\nclass M:\n    def forward(self, x):\n        return nz(x)\n",
    "import torch as t\nclass M:\n    def forward(self, x, keep):\n        return x[x in keep], x[(x)is(None)]\n",
    "import torch\nclass M:\n    def forward(self, x):\n        y = x.to(torch.float64)\n        return y[y\n"
    "          >= 0]\n",
    "import torch\nclass M:\n    @torch.no_grad()\n    def forward(self, x): return x.double()\n",
    "import torch\nclass M:\n    @register(torch.ones(1).item())\n    def forward(self, x):\n        return x\n",
    "import torch\nclass M:\n    def forward(self, x):\n        return x.cpu(), x.tolist(), print(x)\n",
    "import torch\nclass M:\n    def forward(self, x):\n        return torch.argwhere(x)\n",
    "import torch\nclass M:\n    def forward(self, x):\n        return torch.nonzero(x)\n    def training_step(self, x):\n        return x + 1\n",
    "import torch\nwhile True:\n    loss = model(b)\n    loss.backward()\n    mask = b[b != 0]\n",
    "import torch\nclass M:\n    def forward(self, ｘ):\n        return ｘ.ｉtem()\n",  # NFKC: `x.item()`
    # boolean masks only where the checker's traversal records them: a decorator's, an f-string's, a type's slice
    "import torch\nclass M:\n    @register(w[w > 0])\n    def forward(self, x):\n        return x\n",
    "import torch\nclass M:\n    def forward(self, x):\n        return f\"{x[x > 0]}\"\n",
    "from typing import Optional\nclass M:\n    def forward(self, x) -> Optional[x == 1]:\n        return x\n",
    "import torch\nclass M:\n    def forward(self, x, a, b):\n        return x[0] if a > b else x[1:]\n",  # no mask
    "import torch\nclass M:\n    def forward(self, x):\n        return x[\n            (x\n             != 0)]\n",
]


def _perf_hits(tree: ast.AST, text: str, checker: PythonChecker, gated: bool) -> list[tuple]:
    out: list[tuple] = []

    def emit(impl: str, node: ast.AST, symbol: str, replacement: str) -> None:
        out.append((impl, id(node), symbol, replacement))

    structure = perf_checker.Structure(checker.functions, checker.loops, checker.backward_lines,
                                       checker.mask_lines if gated else None)
    lines = (lambda: text.split("\n")) if gated else None
    perf_checker.check(tree, text, checker.qualnames, emit, structure, lines, checker.aliases if gated else None)
    return out



def _with_edges(checked: list, edges: list[str], label: str) -> list:
    """The shared checked modules and each edge case, parsed and checked with every rule on."""
    catalogue = load_catalogue()
    cases = list(checked)
    for index, text in enumerate(edges):
        tree = ast.parse(text)
        checker = PythonChecker(catalogue, lambda rule: True, tree)
        checker.visit(tree)
        cases.append((f"{label}-{index}", text, tree, checker))
    return cases

def test_a_hot_region_the_gate_skips_would_have_reported_nothing(checked):
    cases = _with_edges(checked, GATE_EDGES, "gate-edge")
    found = skipped = 0
    for name, text, tree, checker in cases:
        expected = _perf_hits(tree, text, checker, gated=False)
        assert _perf_hits(tree, text, checker, gated=True) == expected, name
        found += len(expected)
        walker = perf_checker.hot_path(checker.qualnames, lambda *a: None, text)
        gate = perf_checker.RegionGate(walker, text.split("\n"), checker.aliases, checker.mask_lines)
        regions = perf_checker.Structure(checker.functions, checker.loops, checker.backward_lines).hot_regions()
        skipped += sum(not gate.may_hold(region) for region in regions)
    assert found and skipped  # both sides seen: regions with findings, and regions the gate skipped


def test_mask_lines_are_those_of_every_subscript_by_a_comparison(checked):
    """The checker's traversal records each boolean mask's line (the region gate's), except in the helpers
    `migrate fix` wrote (never visited, so never a hot region's): none is missed."""
    cases = _with_edges(checked, GATE_EDGES, "gate-edge")
    masks = 0
    for name, _text, tree, checker in cases:
        helpers = {id(n) for helper in checker.own_helpers for n in ast.walk(helper)}
        expected = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Subscript)
                    and isinstance(n.slice, ast.Compare) and id(n) not in helpers]
        assert sorted(checker.mask_lines) == sorted(expected), name
        masks += len(expected)
    assert masks


WORD_TEXTS = ["", "print", "xprintx\nDataLoader", "é print \udcff softmax", "ｐrint", "rotate_halfsilu\r\nrsqrt",
              "HCCL_ALGO=1", "sync_batchnorm SyncBatchNorm float64double nonzero argwhere"]


@pytest.mark.parametrize("with_re2", [True, False])
def test_words_present_is_the_substring_test_of_each_word(with_re2):
    from migrator.engine.module_check import advice_words
    from migrator.engine.text_words import WordsPresent

    words = advice_words()
    if not with_re2:  # the stand-in searches, as without google-re2
        words = WordsPresent(words.words)
        words._built = True
    seen = set()
    for text in [*WORD_TEXTS, *(text for _name, text in MODULES)]:
        found = words(text)
        assert found == {word for word in words.words if word in text}, text[:80]
        seen |= found
    assert seen == set(words.words)  # every word was found somewhere: the comparison saw each


def test_lines_naming_of_the_words_present_is_that_of_every_word(checked):
    from migrator.engine.module_check import advice_words

    for name, text, _tree, checker in checked:
        present = advice_words()(text)
        for aliases in (checker.aliases, {"r": {"torch.rsqrt"}, "self.s": {"torch.nn.functional.silu"}}):
            with_present = _lines_naming(text, FUSION_WORDS, aliases, present)
            every = _lines_naming(text, FUSION_WORDS, aliases)
            assert with_present.lines == every.lines, name
            assert all(with_present.naming(w).lines == every.naming(w).lines for w in FUSION_WORDS), name


ATTENTION_EDGES = [
    "import torch\nfrom torch import bmm as b2\ndef f(q, k, v):\n    p = torch.softmax(b2(q, k.transpose(-2, -1)), -1)\n"
    "    return b2(p, v)\n",
    "import torch\ndef f(q, k, v):\n    s = torch.matmul(q, k.transpose(-2, -1)) / 8\n    return torch.matmul(s.softmax(-1), v)\n",
    "import torch\ndef f(q, k, v):\n    return (q @ k.mT).softmax(-1) @ v\n",
    "import torch\ndef head(x):\n    return torch.softmax(x, -1)\n",  # softmax alone: no Body
    "import torch\ndef f(q, k, v):\n    return torch.matmul(torch.softmax(torch.matmul(q, k), -1), v)\n",  # no transpose
    "import torch\ndef rotate_half(x):\n    x1, x2 = x.chunk(2, -1)\n    return torch.cat((-x2, x1), -1)\n",  # no product
    "import torch\ndef rope(q, cos, sin):\n    return q * cos + rotate_half(q) * sin\n",
    "import torch\ndef f(q, k, v):\n    q = rotate_half(q)\n"
    "    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)), -1), v)\n",
]


def test_advise_reports_the_fusion_advice_of_every_detector(checked):
    """`module_check.advise` (its gates: the words, a matmul beside a lone softmax) against every detector run
    on every function that names a word."""
    from migrator.engine.module_check import advise

    cases = _with_edges(checked, ATTENTION_EDGES, "attention-edge")
    found = 0
    for name, text, tree, checker in cases:
        expected = _advice(checker, text, every_detector=True)
        out: list[tuple] = []

        def record(impl: str, node: ast.AST, symbol: str, replacement: str, out: list[tuple] = out, **_: object) -> None:
            out.append((impl, id(node), symbol, replacement))

        checker.emit_impl = record  # type: ignore[method-assign]
        try:
            advise(tree, text, checker, lambda text=text: text.split("\n"))
        finally:
            del checker.emit_impl  # the module's shared checkers keep their own method
        assert [hit for hit in out if hit[0].startswith("fusion-")] == expected, name
        found += len(expected)
    assert found


@pytest.mark.parametrize("with_re2", [True, False])
def test_training_dtypes_gate_is_the_substring_test(with_re2):
    from migrator.catalogue.coverage import _dtypes
    from migrator.ground.word_search import WordSet

    gate = _dtypes._CANDIDATE_WORDS if with_re2 else WordSet(_dtypes.TRAINING_WORDS)
    if not with_re2:
        gate._built = True  # the stand-in searches, as without google-re2
    texts = [b"", b"bf1", b"x.half()", b"torch.float16", b"fp16\xff", b"bfloat", *(t.encode() for _n, t in MODULES)]
    held = [gate.found_in(text) for text in texts]
    assert held == [any(word in text for word in _dtypes.TRAINING_WORDS) for text in texts]
    assert any(held) and not all(held)


LOADER_EDGES = [
    "import torch\nfrom torch.utils.data import DataLoader\nclass M:\n    def rollout(self): pass\n"
    "    def loader(self):\n        self.ds = Source(self.rollout)\n        self.ds = Other()\n"
    "        return DataLoader(self.ds, batch_size=2)\n    def again(self):\n        d = Source(self.rollout)\n"
    "        return DataLoader(dataset=d)\n",
    "import os\nos.environ['TASK_QUEUE_ENABLE'] = '0'\nx = y = 1\n",
]


def _old_whole_module(tree: ast.AST, names, emit) -> None:
    """The replaced `check_whole_module`: every assignment's targets unparsed as the walk meets it."""
    loaders: list[ast.Call] = []
    assigned: dict[str, ast.expr] = {}
    defined: set[str] = set()
    for node in walk_nodes(tree):
        if isinstance(node, ast.Call):
            qualnames = names(node.func)
            if qualnames & perf_checker.SYNC_BATCHNORM or (isinstance(node.func, ast.Attribute)
                                                           and node.func.attr == "convert_sync_batchnorm"):
                emit("sync-batchnorm", node, fusion_checker.src(node.func), fusion_checker.src(node.func))
            elif qualnames & perf_checker.DATALOADER and not any(k.arg is None for k in node.keywords):
                loaders.append(node)
            else:
                perf_checker._environment(node, emit)
        elif isinstance(node, ast.Assign):
            assigned.update((fusion_checker.src(target), node.value) for target in node.targets)
            perf_checker._environment(node, emit)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
    for loader in loaders:
        perf_checker._dataloader(loader, emit, perf_checker._sampled_by_own_method(loader, assigned, defined))


def _recorder(out: list[tuple]):
    """An `emit` that appends what it is given (the node by identity)."""
    return lambda impl, node, symbol, replacement: out.append((impl, id(node), symbol, replacement))


def test_module_wide_perf_sites_are_the_old_walks(checked):
    cases = _with_edges(checked, LOADER_EDGES, "loader-edge")
    found = 0
    for name, _text, tree, checker in cases:
        new: list[tuple] = []
        old: list[tuple] = []

        perf_checker.check_whole_module(tree, checker.qualnames, _recorder(new))
        _old_whole_module(tree, checker.qualnames, _recorder(old))
        assert new == old, name
        found += len(old)
    assert found


TRITON_EDGES = [
    "import triton\nimport triton.language as tl\nfrom triton.runtime import driver\n"
    "x = driver.active.get_active_torch_device()\ny = f(triton.runtime.driver.active.get_active_torch_device()).z\n"
    "d = tl.extra.cuda.libdevice.exp(a)\nw = g(tl.extra.cuda.libdevice).h[triton.tools.tensor_descriptor.T].k\n"
    "v = (lambda: tl.extra.cuda)().q\n@triton.jit\ndef k(p):\n    tl.store(p, tl.extra.cuda.libdevice.exp(tl.load(p)))\n",
]


def _old_triton_module(tree: ast.AST, names, emit) -> dict:
    """The replaced `triton_kernels.check_module`: every outermost attribute's value walked."""
    from migrator.engine import triton_kernels

    nodes = walk_nodes(tree)
    found = triton_kernels.kernels(tree, names, nodes)
    inside: set[int] = set()
    for func in found.values():
        triton_kernels.Kernel(func, names, emit).check()
        inside.update(id(n) for n in walk_nodes(func))
    reported: set[str] = set()
    for node in nodes:
        if id(node) not in inside and isinstance(node, ast.Attribute):
            inside.update(id(n) for n in walk_nodes(node.value))
            for qualname in names(node):
                why = triton_kernels.gpu_only(qualname)
                if why is not None and qualname not in reported and not qualname.startswith(triton_kernels.TL):
                    reported.add(qualname)
                    emit("triton-gpu-only", node, qualname, why)
    return found


def test_triton_module_names_are_the_old_walks(checked):
    from migrator.engine import triton_kernels

    cases = _with_edges(checked, TRITON_EDGES, "triton-edge")
    found = 0
    for name, _text, tree, checker in cases:
        new: list[tuple] = []
        old: list[tuple] = []

        kernels = triton_kernels.check_module(tree, checker.qualnames, _recorder(new), walk_nodes(tree))
        assert kernels == _old_triton_module(tree, checker.qualnames, _recorder(old)), name
        assert new == old, name
        found += sum(hit[2].startswith("triton.") for hit in old)
    assert found  # names outside kernels were reported: the loop changed was exercised
