"""Beyond `.py` (fix side): `migrate fix` changes only what it can change exactly, and `git diff`
shows nothing else — notebooks keep outputs, metadata, ids and JSON formatting; configs keep
comments, quoting and key order; Dockerfiles and Slurm scripts get only exact renames.

Regenerate the golden diff after a reviewed change with
`UPDATE_GOLDEN=1 python -m pytest tests/fix/test_beyond_py_fix.py` and read it like code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from migrator import api
from migrator.engine.notebook import read_notebook
from migrator.fix import notebook_fixer
from migrator.fix.notebook_fixer import merge, rewrite_sources

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "environment"
DEMO = FIXTURES / "beyond_py"
GOLDEN = FIXTURES / "beyond_py.npu.diff"
NOQA = 'import torch_npu  # noqa: F401  registers the Ascend "npu" device'
NOQA_JSON = NOQA.replace('"', '\\"')
# read as an empty global config; never os.devnull, which `git config --global` would replace
ABSENT_GIT_CONFIG = os.path.join(tempfile.gettempdir(), "migrate-tests-absent.gitconfig")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": ABSENT_GIT_CONFIG, "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", *args], cwd=cwd,
                          check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV}).stdout


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the CUDA version")
    return root


def test_fix_in_a_git_repo_changes_only_what_it_can_change_exactly(demo):
    outcome = api.fix([demo], root=demo, use_cache=False)
    assert outcome.plan.errors == () and all(c.error is None for c in outcome.plan.changes)
    diff = git(demo, "diff", "--no-color", "--no-ext-diff")
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(diff)
    assert diff == GOLDEN.read_text()
    status = sorted(git(demo, "status", "--porcelain").splitlines())
    assert status == [  # .migrate/ carries its own .gitignore (`*`): the record is not untracked noise
        " M Dockerfile", " M conf/anchors.yaml", " M conf/config.yaml", " M notebook.ipynb", " M train.py",
    ]
    assert (demo / ".migrate" / ".gitignore").read_text().splitlines()[-1] == "*"
    # what is left is manual (or the anchored value shared by two mappings)
    left = api.scan([demo], root=demo, use_cache=False)
    assert [f"{f.location()} {f.code}" for f in left.findings if f.fix] == []
    # fix twice == fix once
    again = api.fix([demo], root=demo, use_cache=False)
    assert again.changed_files == []
    assert git(demo, "diff", "--no-color", "--no-ext-diff") == diff


def test_fix_record_names_the_notebook_cell(demo):
    api.fix([demo], root=demo, use_cache=False)
    record = json.loads((demo / ".migrate" / "fix-record.json").read_text())
    edits = {f["path"]: f["edits"] for f in record["files"]}
    cells = sorted({(e["cell"], e["code"]) for e in edits["notebook.ipynb"]})
    assert cells == [(2, "ENV001"), (3, "DEV001"), (3, "DEV010"), (3, "DEV012"), (3, "DIST001"), (4, "DEV001"), (5, "ENV023")]
    [dev012] = [e for e in edits["notebook.ipynb"] if e["code"] == "DEV012"]
    assert dev012["original"]["line"] == 4 and dev012["new"]["line"] == 5  # `import torch_npu` added above it
    assert all("cell" not in e for e in edits["conf/config.yaml"])


def test_untouched_files_stay_byte_identical(demo):
    untouched = ["ds_config.json", "train.slurm", "conf/accelerate.yaml"]
    for rel in untouched:
        os.utime(demo / rel, (1_000_000, 1_000_000))
    before = {rel: (demo / rel).read_bytes() for rel in untouched}
    api.fix([demo], root=demo, use_cache=False)
    assert {rel: (demo / rel).read_bytes() for rel in untouched} == before
    assert all((demo / rel).stat().st_mtime == 1_000_000 for rel in untouched)


def test_portable_target_leaves_configs_and_launch_files_alone(demo):
    outcome = api.fix([demo], root=demo, target="portable", use_cache=False)
    changed = set(outcome.changed_files)
    assert not changed & {"Dockerfile", "conf/config.yaml", "conf/anchors.yaml", "train.slurm", "ds_config.json"}
    declined = {c.path: [why for _, why in c.declined] for c in outcome.plan.changes}
    assert declined["conf/config.yaml"] and all("npu target only" in why for why in declined["conf/config.yaml"])


def test_every_notebook_source_round_trips_byte_identical():
    text = (DEMO / "notebook.ipynb").read_text(encoding="utf-8")
    nb = read_notebook(text)
    assert rewrite_sources(text, nb.data, {c.index: c.source for c in nb.cells}) == text


# ---- notebooks in other JSON styles ---------------------------------------------------------------

CELLS = [
    {"cell_type": "markdown", "id": "m1", "metadata": {"jp-MarkdownHeadingCollapsed": True}, "source": ["# Über GPUs\n", "naïve ✓"]},
    {"cell_type": "code", "execution_count": 3, "id": "c1", "metadata": {"tags": ["parameters"], "zzz": 1, "aaa": 2},
     "outputs": [{"name": "stdout", "output_type": "stream", "text": ["température 42°C\n"]}],
     "source": ["import torch\n", "x = torch.ones(2).cuda()  # déjà\n", "!nvidia-smi\n", "torch.cuda.synchronize()"]},
    {"cell_type": "code", "execution_count": None, "id": "c2", "metadata": {}, "outputs": [],
     "source": "y = x.to(\"cuda:1\")\nprint(torch.cuda.memory_allocated())"},
]


def _styles():
    base = {"metadata": {"kernelspec": {"language": "python", "name": "python3"}, "z_custom": {"b": 1, "a": 2}},
            "nbformat": 4, "nbformat_minor": 4, "cells": CELLS}
    yield "nbformat", json.dumps(base, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    yield "indent2-ascii-no-newline", json.dumps(base, indent=2, ensure_ascii=True)
    yield "compact", json.dumps(base, ensure_ascii=False, separators=(",", ":"))
    yield "crlf", (json.dumps(base, indent=1, ensure_ascii=False) + "\n").replace("\n", "\r\n")
    yield "tabs", json.dumps(base, indent="\t", ensure_ascii=False) + "\n"


STYLES = dict(_styles())


@pytest.mark.parametrize("style", STYLES)
def test_notebook_fix_keeps_the_files_json_style(tmp_path, style):
    original = STYLES[style]
    path = tmp_path / "nb.ipynb"
    path.write_bytes(original.encode("utf-8"))
    api.fix([path], root=tmp_path, use_cache=False)
    after = path.read_bytes().decode("utf-8")
    data_before, data_after = json.loads(original), json.loads(after)
    assert data_after["cells"][1]["source"] == [
        "import torch\n", f"{NOQA}\n", "x = torch.ones(2).npu()  # déjà\n", "!nvidia-smi\n", "torch.npu.synchronize()",
    ]
    assert data_after["cells"][2]["source"] == "y = x.to(\"npu:1\")\nprint(torch.npu.memory_allocated())"
    for data in (data_before, data_after):
        for cell in data["cells"]:
            cell.pop("source")
    assert data_after == data_before  # outputs, metadata, ids, key order (dicts compare by content)
    assert list(json.loads(after)) == list(json.loads(original))  # top-level key order
    # the inverse edit gives back the original bytes: nothing outside the sources moved
    nb = read_notebook(after)
    restored = rewrite_sources(after, nb.data, {2: "".join(CELLS[1]["source"]), 3: CELLS[2]["source"]})
    assert restored == original
    if style == "nbformat":
        changed = [line for line in after.splitlines() if line not in original.splitlines()]
        assert changed == [
            f'    "{NOQA_JSON}\\n",', '    "x = torch.ones(2).npu()  # déjà\\n",', '    "torch.npu.synchronize()"',
            '   "source": "y = x.to(\\"npu:1\\")\\nprint(torch.npu.memory_allocated())"',
        ]


def test_one_torch_npu_import_per_notebook(tmp_path):
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": ["import os\n", "import torch"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": ["torch.cuda.synchronize()"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": ["torch.cuda.empty_cache()"]},
    ]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n")
    api.fix([path], root=tmp_path, use_cache=False)
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert sources == [f"import os\nimport torch\n{NOQA}", "torch.npu.synchronize()", "torch.npu.empty_cache()"]


def test_merge_refuses_a_rewrite_of_a_magic_line():
    view = "pass\nx = 1\n"
    real = "%time x\nx = 1\n"
    assert merge(view, "pass\nx = 2\n", real, frozenset({1})) == "%time x\nx = 2\n"
    assert merge(view, "y = 0\nx = 1\n", real, frozenset({1})) is None
    # a header of other cells' imports: dropped from the result, never edited
    assert merge("import torch\npass\nx = 1\n", "import torch\nimport torch_npu\npass\nx = 1\n", real, frozenset({1}), 1) == (
        "import torch_npu\n%time x\nx = 1\n"
    )
    assert merge("import torch\npass\n", "import numpy\npass\n", "%time x\n", frozenset({1}), 1) is None


def test_a_notebook_rewrite_that_does_not_verify_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "nb.ipynb"
    shutil.copy(DEMO / "notebook.ipynb", path)
    before = path.read_bytes()
    real = notebook_fixer.config_reader.apply_edits

    def sloppy(text, edits):
        return real(text, edits).replace('"nbformat_minor": 5', '"nbformat_minor": 4')

    monkeypatch.setattr(notebook_fixer.config_reader, "apply_edits", sloppy)
    outcome = api.fix([path], root=tmp_path, use_cache=False)
    [change] = [c for c in outcome.plan.changes if c.path == "nb.ipynb"]
    assert change.error and "other changes" in change.error
    assert path.read_bytes() == before


# ---- configs ------------------------------------------------------------------------------------


def test_json_and_toml_configs_keep_their_layout(tmp_path):
    ds = tmp_path / "ds_config.json"
    ds.write_text(
        '{\n\t"train_batch_size": 16,\n\t"optimizer": {"type": "OneBitAdam", "params": {"comm_backend_name": "nccl", "lr": 1e-4}},\n'
        '\t"zero_optimization": {"offload_param": {"device": "cpu"}}\n}'
    )
    toml = tmp_path / "run.toml"
    toml.write_text("# run settings\n[train]\ndevice = \"cuda:0\"  # first GPU\ndist = { backend = 'nccl', port = 29500 }\n")
    api.fix([tmp_path], root=tmp_path, use_cache=False)
    assert ds.read_text() == (
        '{\n\t"train_batch_size": 16,\n\t"optimizer": {"type": "OneBitAdam", "params": {"comm_backend_name": "hccl", "lr": 1e-4}},\n'
        '\t"zero_optimization": {"offload_param": {"device": "cpu"}}\n}'
    )
    assert toml.read_text() == "# run settings\n[train]\ndevice = \"npu:0\"  # first GPU\ndist = { backend = 'hccl', port = 29500 }\n"


def test_yaml_env_rename_and_shared_values(tmp_path):
    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        "defaults: &d\n"
        "  device: cuda\n"
        "a:\n"
        "  <<: *d\n"
        "env:\n"
        "  CUDA_VISIBLE_DEVICES: \"0,1\"   # keep this comment\n"
        "script: |\n"
        "  export CUDA_LAUNCH_BLOCKING=1\n"
        "  python train.py --device cuda\n"
        "---\n"
        "trainer: {device: 'cuda', backend: nccl}\n"
    )
    outcome = api.fix([cfg], root=tmp_path, use_cache=False)
    assert cfg.read_text() == (
        "defaults: &d\n"
        "  device: cuda\n"
        "a:\n"
        "  <<: *d\n"
        "env:\n"
        "  ASCEND_RT_VISIBLE_DEVICES: \"0,1\"   # keep this comment\n"
        "script: |\n"
        "  export ASCEND_LAUNCH_BLOCKING=1\n"
        "  python train.py --device cuda\n"
        "---\n"
        "trainer: {device: 'npu', backend: hccl}\n"
    )
    left = [f"{f.location()} {f.code}" for f in outcome.remaining.findings]
    assert left == ["job.yaml:2:11 DEV017"]


def test_a_config_rewrite_that_does_not_verify_is_refused(tmp_path, monkeypatch):
    from migrator.fix import config_fixer

    cfg = tmp_path / "c.yaml"
    cfg.write_text("device: cuda\nname: x\n")
    real = config_fixer.config_reader.apply_edits
    monkeypatch.setattr(config_fixer.config_reader, "apply_edits", lambda text, edits: real(text, edits).replace("name: x", "name: y"))
    outcome = api.fix([cfg], root=tmp_path, use_cache=False)
    assert cfg.read_text() == "device: cuda\nname: x\n"
    [(finding, why)] = [d for c in outcome.plan.changes for d in c.declined]
    assert finding.code == "DEV017" and "other changes" in why


def test_annotations_go_above_a_continued_shell_command(tmp_path):
    """A comment line inside a `\\` continuation would end the command: the note goes above its first line."""
    script = tmp_path / "job.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:8\napt-get install -y \\\n    libnccl2 \\\n    git\n")
    api.fix([tmp_path], root=tmp_path, annotate=True, use_cache=False)
    expected = (
        "#!/bin/bash\n"
        "# MIGRATE(ENV022): `--gres=gpu:8` asks the scheduler for NVIDIA GPUs\n"
        "#SBATCH --gres=gpu:8\n"
        "# MIGRATE(ENV021): `libnccl2` installs NVIDIA CUDA libraries\n"
        "apt-get install -y \\\n    libnccl2 \\\n    git\n"
    )
    assert script.read_text() == expected
    api.fix([tmp_path], root=tmp_path, annotate=True, use_cache=False)
    assert script.read_text() == expected


def test_notebooks_and_configs_are_not_annotated(demo):
    before = {rel: (demo / rel).read_bytes() for rel in ("ds_config.json", "conf/accelerate.yaml")}
    api.fix([demo], root=demo, annotate=True, use_cache=False)
    assert {rel: (demo / rel).read_bytes() for rel in before} == before
    assert "MIGRATE(" not in (demo / "notebook.ipynb").read_text() and "MIGRATE(" not in (demo / "Dockerfile").read_text()


@pytest.mark.slow
@pytest.mark.network
def test_pre_commit_hooks_read_notebooks_container_files_and_configs(tmp_path, precommit_hooks):
    """The shipped hooks pass notebooks, Dockerfiles, Slurm scripts and configs to migrate."""
    from tests.report.test_precommit import _git, _hook_config, _pre_commit, _run_hooks

    cmd = _pre_commit()
    if cmd is None:
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    hook_repo, home = precommit_hooks
    project = tmp_path / "project"
    shutil.copytree(DEMO, project)
    (project / "README.md").write_text("set device: cuda in conf/\n")  # not a file the hooks read
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "cuda project")
    config = _hook_config(hook_repo, tmp_path / "pre-commit-config.yaml")
    rc, out = _run_hooks(cmd, config, project, home, "migrate-scan")
    assert rc == 1, out
    for where in ("notebook.ipynb:cell 3:7:1:", "Dockerfile:3:6:", "train.slurm:4:9:", "ds_config.json:4:5:", "conf/config.yaml:8:11:"):
        assert where in out, out
    assert "README.md" not in out
