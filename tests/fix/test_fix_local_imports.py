"""Issue 39 item 1 (part): an import inside a function whose last use there the fix rewrote is removed,
judged in the function it binds its name in (`engine/import_scopes.py`, asked by scan and fix alike); an
import still used stays, a re-export (`__all__`, a package `__init__.py`) stays, and no comment is lost."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from migrator import api
from migrator.cli import main
from migrator.engine.import_scopes import IMPORT_EXPORTED
from migrator.engine.sites import IMPORT_STAYS
from migrator.fix.import_removal import kept_by_untouched_uses, remove_unused_imports, rewritten_names
from tests.rules.examples import without_helpers

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fix_agreement  # noqa: E402

TARGETS = ["npu", "portable"]
LOCAL = ("import torch\n\n\ndef attn(q, k, v):\n    # the fast kernel\n    from flash_attn import flash_attn_func  # CUDA only\n\n"
         "    # causal\n    return flash_attn_func(q, k, v, causal=True)\n")
LOCAL_AFTER = ("import torch\n{npu}\ndef attn(q, k, v):\n    # the fast kernel\n    # CUDA only\n\n    # causal\n"
               "    return _migrate_flash_attn(q, k, v, causal=True)\n")
STILL_USED = ("import torch\n\n\ndef attn(q, k, v):\n    from flash_attn import flash_attn_func\n\n"
              "    kernel = flash_attn_func\n    return flash_attn_func(q, k, v, causal=True), kernel\n")


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _import_findings(root: Path, target: str) -> dict[tuple[str, int], object]:
    scanned = api.scan([root], root=root, target=target, use_cache=False).findings
    return {(f.path, f.line): f for f in scanned if f.code == "ATTN001" and "import" in _line(root / f.path, f.line)}


def _line(path: Path, line: int) -> str:
    return path.read_text().splitlines()[line - 1]


def _declined(outcome) -> dict[tuple[str, int], str]:
    return {(f.path, f.line): why for c in outcome.plan.changes for f, why in c.declined}


def _check(root: Path, target: str) -> int:
    return CliRunner().invoke(main, ["fix", str(root), "--target", target, "--check", "--no-cache", "--no-record",
                                     "--fail-on", "never", "-q"], catch_exceptions=False).exit_code


@pytest.mark.parametrize("target", TARGETS)
def test_a_function_local_import_the_fix_made_unused_is_removed_keeping_comments(tmp_path, target):
    root = _tree(tmp_path, {"m.py": LOCAL})
    [found] = _import_findings(root, target).values()
    assert found.fix is not None and found.declined is None  # scan: the import goes with its last use
    api.fix([root], root=root, target=target, use_cache=False)
    text = (root / "m.py").read_text()
    assert without_helpers(text) == LOCAL_AFTER.format(npu="import torch_npu\n" if target == "npu" else "")
    ast.parse(text)
    again = api.fix([root], root=root, target=target, use_cache=False)
    assert not [c for c in again.plan.changes if c.changed] and (root / "m.py").read_text() == text
    assert _check(root, target) == 0


@pytest.mark.parametrize("target", TARGETS)
def test_a_function_local_import_still_used_in_the_function_stays(tmp_path, target):
    root = _tree(tmp_path, {"m.py": STILL_USED})
    [found] = _import_findings(root, target).values()
    assert found.fix is None and found.declined == IMPORT_STAYS
    outcome = api.fix([root], root=root, target=target, use_cache=False)
    text = (root / "m.py").read_text()
    assert "    from flash_attn import flash_attn_func\n\n    kernel = flash_attn_func\n" in text
    assert _declined(outcome)[("m.py", 5)] == IMPORT_STAYS


@pytest.mark.parametrize("target", TARGETS)
def test_each_function_is_judged_on_its_own_uses(tmp_path, target):
    """`b` still uses its own import; `a`'s is unused once its call is rewritten (the module-wide count kept it)."""
    code = ("def a(q, k, v):\n    from flash_attn import flash_attn_func\n    return flash_attn_func(q, k, v)\n\n\n"
            "def b():\n    from flash_attn import flash_attn_func\n    return flash_attn_func\n")
    root = _tree(tmp_path, {"m.py": code})
    found = _import_findings(root, target)
    assert found[("m.py", 2)].fix is not None and found[("m.py", 7)].declined == IMPORT_STAYS
    outcome = api.fix([root], root=root, target=target, use_cache=False)
    text = (root / "m.py").read_text()
    assert text.count("from flash_attn import flash_attn_func") == 1
    assert "def b():\n    from flash_attn import flash_attn_func\n    return flash_attn_func\n" in text
    assert ("m.py", 2) not in _declined(outcome)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("file, code", [
    ("pkg/__init__.py", "from flash_attn import flash_attn_func\n\n\ndef attn(q, k, v):\n    return flash_attn_func(q, k, v)\n"),
    ("m.py", 'from flash_attn import flash_attn_func\n\n__all__ = ["attn", "flash_attn_func"]\n\n\n'
             "def attn(q, k, v):\n    return flash_attn_func(q, k, v)\n"),
], ids=["package-init", "dunder-all"])
def test_a_re_exported_import_stays_in_scan_and_fix(tmp_path, target, file, code):
    root = _tree(tmp_path, {file: code})
    found = _import_findings(root, target)[(file, 1)]
    assert found.fix is None and found.declined == IMPORT_EXPORTED
    outcome = api.fix([root], root=root, target=target, use_cache=False)
    text = (root / file).read_text()
    assert "from flash_attn import flash_attn_func\n" in text and "_migrate_flash_attn(q, k, v)" in text
    assert _declined(outcome)[(file, 1)] == IMPORT_EXPORTED


@pytest.mark.parametrize("target", TARGETS)
def test_a_function_local_import_of_a_package_init_is_no_re_export(tmp_path, target):
    code = "import torch\n\n\ndef attn(q, k, v):\n    from flash_attn import flash_attn_func\n    return flash_attn_func(q, k, v)\n"
    root = _tree(tmp_path, {"pkg/__init__.py": code})
    api.fix([root], root=root, target=target, use_cache=False)
    assert "flash_attn_func" not in without_helpers((root / "pkg" / "__init__.py").read_text())


def test_the_comments_of_a_removed_import_go_to_the_next_statement_or_stay_at_the_end():
    before = ("# about flash\nfrom apex import amp\n# leading\ntry:\n    # optional\n    from apex import amp\n"
              "except ImportError:\n    pass\namp.init()\n\n\ndef f():\n    # lonely\n    from apex import amp\n"
              "    amp.x()\n    # the end\n    from apex import amp\n")
    after = cst.parse_module(before.replace("amp.init()", "other.init()").replace("amp.x()", "y.x()"))
    new, removed = remove_unused_imports(cst.parse_module(before), after, {"amp"})
    assert removed == {(None, "amp"), (0, "amp")}
    assert new.code == ("# about flash\n# leading\n# optional\nother.init()\n\n\ndef f():\n    # lonely\n"
                        "    y.x()\n    # the end\n")
    ast.parse(new.code)


def test_the_comments_on_a_removed_import_or_name_go_above_its_line():
    before = ("from apex import amp  # mixed precision\nfrom apex.optimizers import (\n    FusedAdam,  # fast\n"
              "    FusedLAMB,  # large batch\n)\n\n\ndef f():\n    import apex  # the module\n    apex.x()\n"
              "    return amp.init(), FusedAdam(), FusedLAMB()\n")
    after = cst.parse_module(before.replace("apex.x()", "y.x()").replace("amp.init()", "o.init()")
                             .replace("FusedLAMB()", "AdamW()"))
    new, removed = remove_unused_imports(cst.parse_module(before), after, {"amp", "FusedLAMB", "apex"})
    assert removed == {(None, "amp"), (None, "FusedLAMB"), (0, "apex")}
    assert new.code == ("# mixed precision\n# large batch\nfrom apex.optimizers import (\n    FusedAdam,  # fast\n)\n\n\n"
                        "def f():\n    # the module\n    y.x()\n    return o.init(), FusedAdam(), AdamW()\n")
    ast.parse(new.code)


def test_a_removed_import_guard_keeps_the_comments_of_its_header_and_handlers_in_order():
    before = ("# leading\ntry:  # optional apex\n    # the amp\n    from apex import amp  # O2\n"
              "except ImportError:  # no apex\n    # fall back\n    pass  # fine\namp.init()\n")
    after = cst.parse_module(before.replace("amp.init()", "other.init()"))
    new, _ = remove_unused_imports(cst.parse_module(before), after, {"amp"})
    assert new.code == "# leading\n# optional apex\n# the amp\n# O2\n# no apex\n# fall back\n# fine\nother.init()\n"


@pytest.mark.parametrize("target", TARGETS)
def test_scan_claims_exactly_the_imports_fix_removes(tmp_path, target):
    program = tmp_path / "local_imports.py"
    program.write_text(LOCAL + "\n\n" + STILL_USED.replace("import torch\n", "").replace("def attn", "def other")
                       + "\n\ndef probe():\n    global flash_attn_varlen_func\n"
                       "    from flash_attn import flash_attn_varlen_func\n")
    report = fix_agreement.measure(program, target, tmp_path / "run")
    assert report.claimed and report.agrees, "\n".join(report.examples())


def test_only_names_spelled_in_a_rewritten_statement_are_judged_for_removal():
    """A fix replaces its node only, so an import-bound name spelled in no statement holding a rewrite keeps
    every use: the removal's three libcst walks are skipped for it (an attribute `.amp` is no use of `amp`)."""
    text = ("import apex\nfrom apex import amp\nx = f(\n    1,\n    apex.thing())\ny = model.amp\nz = amp\n"
            "if amp:\n    pass\n")
    tree = ast.parse(text)
    lines = text.splitlines()
    candidates = {"apex", "amp", "gone"}
    assert rewritten_names(tree, lines, {(4, 4)}, candidates) == {"apex"}  # the statement of lines 3-5
    assert rewritten_names(tree, lines, {(6, 6)}, candidates) == set()
    assert rewritten_names(tree, lines, {(7, 7)}, candidates) == {"amp"}
    assert rewritten_names(tree, lines, {(9, 9)}, candidates) == set()  # inside the `if` body, not its test
    assert rewritten_names(tree, lines, set(), candidates) == set()


ENTRY = ("import torch\n{megatron}\n\ndef report(error):\n    try:\n        pass\n    except Exception:\n        import torch\n\n"
         "        if torch.cuda.is_available():\n            print(error)\n\n\nif __name__ == \"__main__\":\n"
         "    print(torch.cuda.device_count())\n")


@pytest.mark.parametrize("megatron", ["import megatron\n", ""])
def test_only_a_megatron_scripts_module_import_torch_stays_as_the_adaptors_anchor(tmp_path, megatron):
    """The MindSpeed route puts its adaptor below a Megatron script's module-level `import torch`, so that
    one stays, used or not; an `import torch` the fix left unused goes everywhere else (ultralytics'
    `utils/logger.py`: an `except:` imported it for `torch.cuda`; fairseq_cli's scripts on portable). A
    block whose first statement went does not open with the blank line that followed it."""
    root = _tree(tmp_path, {"m.py": ENTRY.format(megatron=megatron)})
    api.fix([root], root=root, target="portable", use_cache=False)
    text = (root / "m.py").read_text()
    tree = ast.parse(text)
    top = [a.name for s in tree.body if isinstance(s, ast.Import) for a in s.names]
    assert ("torch" in top) == bool(megatron)
    report = next(s for s in tree.body if isinstance(s, ast.FunctionDef))
    assert not [n for n in ast.walk(report) if isinstance(n, ast.Import)]
    assert "    except Exception:\n        if " in text
    assert _check(root, "portable") == 0


KEPT_BY_UNTOUCHED = ("import torch\nimport apex\n\n\ndef f():\n    from flash_attn import attn\n    torch.cuda.sync()\n"
                     "    return attn(apex.x)\n\n\ndef g(attn):\n    return torch.zeros(1), attn\n")


def test_a_name_used_on_an_untouched_line_of_its_imports_scope_is_not_judged_for_removal():
    """`torch` keeps its use in g whatever line 7 becomes; apex's only use and f's only `attn` are on the
    rewritten lines, and g's `attn` is another scope's: those stay candidates, and the removal agrees."""
    tree = ast.parse(KEPT_BY_UNTOUCHED)
    assert kept_by_untouched_uses(tree, {(7, 8)}, {"torch", "apex", "attn", "unbound"}) == {"torch"}
    assert kept_by_untouched_uses(tree, {(7, 7)}, {"torch", "apex", "attn"}) == {"torch", "apex", "attn"}
    after = cst.parse_module(KEPT_BY_UNTOUCHED.replace("torch.cuda.sync()", "pass").replace("attn(apex.x)", "0"))
    _, removed = remove_unused_imports(cst.parse_module(KEPT_BY_UNTOUCHED), after, {"torch", "apex", "attn"})
    assert removed == {(None, "apex"), (0, "attn")}  # torch, claimed above, stays
