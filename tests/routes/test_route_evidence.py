"""Routes by evidence and by scope: a look-alike package is no framework, a framework outside the scanned
paths (or excluded) is not this scan's, and the adaptor import goes only where it is needed."""

from __future__ import annotations

import shutil
from pathlib import Path

from migrator import api
from tests.conftest import REPO, run_cli

TREES = Path(__file__).resolve().parents[1] / "fixtures" / "routes"


def _copy(tmp_path: Path, name: str) -> Path:
    tree = tmp_path / name
    shutil.copytree(TREES / name, tree)
    return tree


def test_a_vendored_look_alike_is_reported_and_its_findings_stay():
    tree = TREES / "megatron_lookalike"
    result = api.scan([tree], root=tree, use_cache=False)
    (fw,) = result.frameworks
    assert fw.route is None and fw.framework.lookalike == "megatron"
    assert "vendored framework-like code" in fw.note and "route not applied" in fw.note
    apex = [f for f in result.findings if f.symbol == "apex.optimizers.FusedAdam"]
    assert len(apex) == 2 and all(f.route is None for f in apex)  # not "covered": the copy calls Apex itself
    plain = api.scan([tree], root=tree, use_cache=False, route="none")
    assert [(f.code, f.path, f.line) for f in result.findings] == [(f.code, f.path, f.line) for f in plain.findings]


def test_a_look_alike_gets_no_adaptor_and_files_without_findings_are_not_edited(tmp_path):
    tree = _copy(tmp_path, "megatron_lookalike")
    outcome = api.fix([tree], root=tree, use_cache=False)
    assert not outcome.errors
    assert "mindspeed" not in (tree / "pretrain.py").read_text()
    assert "tools.py" not in outcome.changed_files and "megatron/utils.py" not in outcome.changed_files


def test_the_adaptor_goes_only_into_entry_points_with_a_finding(tmp_path):
    tree = _copy(tmp_path, "megatron_vendored")
    (tree / "tools").mkdir()
    quiet = "import torch\nfrom megatron.core import parallel_state\n\nif __name__ == '__main__':\n    print(parallel_state)\n"
    (tree / "tools" / "inspect_ckpt.py").write_text(quiet)  # an entry point with no finding at all
    outcome = api.fix([tree], root=tree, use_cache=False)
    assert "import mindspeed.megatron_adaptor" in (tree / "pretrain_gpt.py").read_text()
    assert (tree / "tools" / "inspect_ckpt.py").read_text() == quiet
    assert "tools/inspect_ckpt.py" not in outcome.changed_files


def test_portable_guards_the_adaptor_so_the_cuda_run_is_unchanged(tmp_path):
    tree = _copy(tmp_path, "megatron_vendored")
    api.fix([tree], root=tree, use_cache=False, target="portable")
    lines = (tree / "pretrain_gpt.py").read_text().splitlines()
    at = lines.index("import torch")
    assert lines[at + 1] == "import importlib.util"
    assert lines[at + 2].startswith('if importlib.util.find_spec("torch_npu") is not None:')
    assert lines[at + 3].strip().startswith("import mindspeed.megatron_adaptor")
    again = api.fix([tree], root=tree, use_cache=False, target="portable")
    assert "pretrain_gpt.py" not in again.changed_files  # the guarded import is recognised


def test_a_framework_outside_the_scanned_path_is_not_detected(tmp_path):
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "app" / "train.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    shutil.copytree(TREES / "megatron_vendored", root / "third_party" / "mega")  # a route outside app/
    inside = api.scan([root / "app"], root=root, use_cache=False)
    assert inside.frameworks == ()
    whole = api.scan([root], root=root, use_cache=False)
    assert [fw.framework.name for fw in whole.frameworks] == ["megatron-core"]
    excluded = api.scan([root], root=root, use_cache=False, exclude=("third_party/",))
    assert excluded.frameworks == ()
    plan = api.fix([root / "app"], root=root, use_cache=False, write=False)
    assert {c.path for c in plan.plan.changes if c.changed} == {"app/train.py"}  # no route edit outside app/


def test_scan_samples_reports_no_route_from_outside_samples():
    proc = run_cli("scan", str(REPO / "samples"), "--no-cache", "--format", "json")
    import json

    data = json.loads(proc.stdout)
    assert data.get("frameworks", []) == []
    assert all(f["path"].startswith("samples/") for f in data["findings"])


def test_a_route_covering_nothing_is_one_line(tmp_path):
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "requirements.txt").write_text("deepspeed==0.16.4\n")
    (tree / "train.py").write_text("import torch\nimport deepspeed\ntorch.cuda.synchronize()\n")
    text = run_cli("scan", str(tree), "--root", str(tree), "--no-cache").stdout
    route_lines = [ln for ln in text.splitlines()[1:] if ln.startswith(("deepspeed", "  you add", "  note"))]
    assert len(route_lines) == 1 and "covers none of the 1 findings" in route_lines[0]


def test_the_installed_distribution_gives_the_version_when_nothing_in_the_tree_does(monkeypatch):
    from importlib import metadata

    real = metadata.version

    def version(name):
        return "0.12.1" if name == "megatron-core" else real(name)

    monkeypatch.setattr(metadata, "version", version)
    tree = TREES / "megatron_import"  # imports megatron.core, no pin, no vendored copy
    (fw,) = api.scan([tree], root=tree, use_cache=False).frameworks
    assert (fw.framework.version, fw.framework.version_source) == ("0.12.1", "installed distribution 0.12.1")
    assert fw.route is not None and fw.version_confirmed
