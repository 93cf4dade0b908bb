"""Each side imports its own tree and nothing of the other's (issue 37 item 1).

A minGPT-style repository (the package at the root, the script in ``projects/chargpt/``) runs only with the
package importable, and ``PYTHONPATH`` / ``pip install -e .`` point at the ORIGINAL: without isolation the
migrated side imported the original package and a broken port passed ("S1 pass, max rel_l2 0")."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYOUT = Path(__file__).resolve().parent / "programs" / "mingpt_layout"
SCRIPT = "projects/chargpt/train.py"


def _port(src: Path, dest: Path, scale: str = "1.0") -> Path:
    """A hand port of the layout: the NPU device, and the attention scale (1.0 is the correct port)."""
    shutil.copytree(src, dest)
    train = dest / SCRIPT
    train.write_text(train.read_text().replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
                     .replace('"cuda" if torch.cuda.is_available()', '"npu" if torch.npu.is_available()'))
    model = dest / "mingpt" / "model.py"
    model.write_text(model.read_text().replace("ATTENTION_SCALE = 1.0", f"ATTENTION_SCALE = {scale}"))
    return dest


def _isolated_import(tree: Path, other: Path, code: str, env_path: str = "", cwd: Path | None = None) -> str:
    """Run ``code`` after isolating ``tree`` from ``other`` in a fresh interpreter; its stdout."""
    prelude = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from migrator.validation.child.provenance import isolate
        iso = isolate({str(tree)!r}, {str(other)!r})
    """)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": env_path}
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=cwd or tree, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def trees(tmp_path):
    original = tmp_path / "orig"
    shutil.copytree(LAYOUT, original)
    return original, _port(original, tmp_path / "good"), _port(original, tmp_path / "bad", scale="1.5")


def test_a_pythonpath_into_the_original_serves_the_migrated_copy(trees):
    original, _, bad = trees
    out = _isolated_import(bad, original, """
        import mingpt.model
        print(mingpt.model.__file__)
        print(iso.report()["redirected"][0]["path"])
    """, env_path=str(original))
    own, redirected = out.split()
    assert own == str((bad / "mingpt" / "model.py").resolve())
    assert redirected == str(original.resolve())


def test_a_root_package_is_found_without_any_path_setting(trees):
    """The layout that needs `pip install -e .` runs as it does once installed: the tree's own package."""
    _, good, bad = trees
    out = _isolated_import(bad, good, "import mingpt\nprint(mingpt.__file__)\nprint(iso.report()['served'])",
                           cwd=bad.parent)
    assert str((bad / "mingpt" / "__init__.py").resolve()) in out and "('mingpt',)" in out


def test_the_script_folder_still_comes_first(trees):
    """A module beside the script wins over a root module of the same name, as in a plain run."""
    _, good, bad = trees
    (bad / "utils.py").write_text("WHERE = 'root'\n")
    (bad / "projects" / "chargpt" / "utils.py").write_text("WHERE = 'script folder'\n")
    out = _isolated_import(bad, good, f"""
        sys.path.insert(0, {str(bad / 'projects' / 'chargpt')!r})
        import utils
        print(utils.WHERE)
    """)
    assert out.strip() == "script folder"


def test_an_editable_install_hook_into_the_original_is_mapped_or_refused(trees, tmp_path):
    """setuptools' editable installs map names to the original's folders with a meta-path hook."""
    original, _, bad = trees
    (original / "python" / "extra").mkdir(parents=True)
    (original / "python" / "extra" / "__init__.py").write_text("WHERE = 'original'\n")
    (original / "python" / "lonely").mkdir()
    (original / "python" / "lonely" / "__init__.py").write_text("")
    (bad / "python" / "extra").mkdir(parents=True)
    (bad / "python" / "extra" / "__init__.py").write_text("WHERE = 'migrated'\n")
    hook = f"""
        import importlib.machinery
        class EditableHook:  # what `pip install -e` leaves in sys.meta_path
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name in ("extra", "lonely"):
                    return importlib.machinery.PathFinder.find_spec(name, [{str(original / 'python')!r}])
        sys.meta_path.append(EditableHook)
    """
    out = _isolated_import(bad, original, hook + """
        import extra
        print(extra.WHERE)
        try:
            import lonely
        except ImportError as exc:
            print("refused:", exc)
        print(len(iso.report()["foreign"]))
    """)
    lines = out.splitlines()
    assert lines[0] == "migrated"
    assert lines[1].startswith("refused: lonely would be imported from the other side's tree") and "has no copy" in lines[1]
    assert lines[2] == "1"  # the refusal is in the report: the parent refuses the run


def test_a_refused_import_is_a_refused_run_naming_the_module():
    from migrator.validation.records import ImportedFrom, Provenance, Status

    facts = Provenance(tree="/m", other="/o", foreign=(ImportedFrom(module="mingpt", path="/o/mingpt/__init__.py"),))
    why = facts.refusal("migrated")
    assert why is not None and "mingpt" in why and "/o/mingpt/__init__.py" in why and "/m" in why
    from migrator.validation.parent.launcher import ChildResult

    result = ChildResult(name="x", statuses=[Status(ok=True, side="migrated", provenance=facts)], expected=1,
                         empty=Status(), returncode=0, timed_out=False, seconds=1.0, log_tail="")
    assert not result.ok and result.failure().phase == "entry" and "mingpt" in result.failure().error.summary


@pytest.mark.slow
def test_a_broken_port_fails_though_the_original_package_is_on_pythonpath(trees, monkeypatch):
    pytest.importorskip("torch")
    from migrator import api

    original, _, bad = trees
    monkeypatch.setenv("PYTHONPATH", str(original))
    result = api.validate(original, migrated=str(bad), script=SCRIPT, curve_steps=3, stages=["S1"])
    assert result.exit_code == 1, result.text()
    assert result.stage("S1").status == "fail"
    assert any("mingpt" in n and str(bad.resolve()) in n for n in result.notes), result.notes


@pytest.mark.slow
def test_the_correct_port_passes_with_or_without_the_path_set(trees, monkeypatch):
    pytest.importorskip("torch")
    from migrator import api

    original, good, _ = trees
    monkeypatch.setenv("PYTHONPATH", str(original))
    result = api.validate(original, migrated=str(good), script=SCRIPT, curve_steps=3, stages=["S1"])
    assert result.exit_code == 0, result.text()
    monkeypatch.delenv("PYTHONPATH")
    result = api.validate(original, migrated=str(good), script=SCRIPT, curve_steps=3, stages=["S1"])
    assert result.exit_code == 0, result.text()


def test_a_missing_module_names_the_folder_and_the_flag(tmp_path):
    from migrator.validation.child.errors import summarize

    (tmp_path / "python" / "mingpt").mkdir(parents=True)
    (tmp_path / "python" / "mingpt" / "__init__.py").write_text("")
    try:
        import mingpt_not_installed_anywhere  # noqa: F401
    except ModuleNotFoundError as exc:
        exc.name = "mingpt.model"
        text = summarize(exc, str(tmp_path))
    assert "mingpt is in this tree under python/: pass --pythonpath python" in text
    text = summarize(ModuleNotFoundError("No module named 'nope'", name="nope"), str(tmp_path))
    assert "nope is neither in this tree nor installed" in text


def _nested(tree: Path) -> Path:
    (tree / "python").mkdir()
    shutil.move(str(tree / "mingpt"), str(tree / "python" / "mingpt"))
    return tree


@pytest.mark.slow
def test_pythonpath_gives_each_side_its_own_nested_package(trees):
    pytest.importorskip("torch")
    from migrator import api
    from migrator.ground.usage_error import UsageError

    original, good, bad = (_nested(t) for t in trees)
    result = api.validate(original, migrated=str(bad), script=SCRIPT, curve_steps=3, stages=["S1"])
    assert result.exit_code == 2 and "--pythonpath python" in result.text(), result.text()
    result = api.validate(original, migrated=str(bad), script=SCRIPT, curve_steps=3, stages=["S1"],
                          pythonpath=("python",))
    assert result.exit_code == 1, result.text()  # the broken port's own package ran
    result = api.validate(original, migrated=str(good), script=SCRIPT, curve_steps=3, stages=["S1"],
                          pythonpath=("python",))
    assert result.exit_code == 0, result.text()
    with pytest.raises(UsageError, match="relative to the tree root"):
        api.validate(original, migrated=str(good), script=SCRIPT, stages=["S1"], pythonpath=("/abs",))


def test_module_files_resolve_as_realpath_resolves_them(tmp_path, monkeypatch):
    """The report resolves each folder once (torch's ~2,000 module files): the same paths as
    ``os.path.realpath`` of every file, through linked folders, linked files, chains and relative paths."""
    import os

    from migrator.validation.child import provenance

    real = tmp_path / "real"
    (real / "pkg").mkdir(parents=True)
    (real / "pkg" / "a.py").write_text("")
    (real / "pkg" / "b.py").symlink_to(real / "pkg" / "a.py")
    (tmp_path / "linked").symlink_to(real)
    (tmp_path / "chain.py").symlink_to(tmp_path / "linked" / "pkg" / "b.py")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    monkeypatch.chdir(tmp_path / "linked" / "pkg")
    files = [str(real / "pkg" / "a.py"), str(tmp_path / "linked" / "pkg" / "a.py"),
             str(tmp_path / "linked" / "pkg" / "b.py"), "a.py", "b.py", str(tmp_path / "chain.py"),
             str(tmp_path / "linked" / "pkg" / ".." / "pkg" / "a.py"), str(tmp_path / "dangling.py")]
    resolve = provenance._RealFiles()
    assert [resolve(f) for f in files] == [os.path.realpath(f) for f in files]
    assert resolve(files[1]) == str(real / "pkg" / "a.py") and len(resolve.folders) < len(files)
