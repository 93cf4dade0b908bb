"""Beyond `.py`: notebooks, container files, cluster scripts and framework configs (scan side).

The demo repository `tests/fixtures/environment/beyond_py/` is checked finding by finding by
tests/engine/test_fixtures.py (`beyond_py.txt`); these tests pin the rules around it: cell numbering,
IPython syntax, bad notebooks, which YAML/JSON files count as configs, and the shell additions."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from migrator import api
from migrator.ground.resources import schema_path
from migrator.reporters import json_report
from tests.conftest import REPO

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "environment" / "beyond_py"


def _scan(root: Path, *paths: Path, **options):
    return api.scan(list(paths) or [root], root=root, use_cache=False, **options)


def _where(result, path: str | None = None) -> list[str]:
    return [f"{f.location()} {f.code}" for f in result.findings if path is None or f.path == path]


def notebook(cells: list, **top) -> str:
    """A notebook as nbformat writes it (indent 1, sorted keys, ensure_ascii off, trailing newline)."""
    def cell(src, kind="code"):
        base = {"cell_type": kind, "id": f"c{abs(hash(str(src))) % 10**8:08d}", "metadata": {}, "source": src}
        if kind == "code":
            base.update(execution_count=None, outputs=[])
        return base

    data = {
        "cells": [cell(*c) if isinstance(c, tuple) else cell(c) for c in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    data.update(top)
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


# ---- notebooks -------------------------------------------------------------------------------


def test_notebook_findings_carry_the_cell_and_a_line_within_it(tmp_path):
    (tmp_path / "nb.ipynb").write_text(notebook([
        ("# title\n", "markdown"),
        lines("import torch\nx = torch.zeros(2).cuda()\n"),
        "y = torch.cuda.device_count()",
    ]))
    result = _scan(tmp_path)
    assert _where(result) == ["nb.ipynb:cell 2:2:5 DEV010", "nb.ipynb:cell 3:1:5 DEV001"]
    data = json.loads(json_report.render(result))
    jsonschema.validate(data, json.loads(schema_path("findings.schema.json").read_text()))
    assert [(f["cell"], f["line"], f["column"]) for f in data["findings"]] == [(2, 2, 5), (3, 1, 5)]


def test_cells_share_one_namespace(tmp_path):
    """`torch` imported in an earlier cell is `torch` in a later one (and vice versa)."""
    (tmp_path / "nb.ipynb").write_text(notebook([
        "import torch.cuda as tc\nimport apex",
        "tc.synchronize()",
    ]))
    assert _where(_scan(tmp_path)) == ["nb.ipynb:cell 1:1:8 DEV008", "nb.ipynb:cell 1:2:8 APEX099", "nb.ipynb:cell 2:1:1 DEV001"]


def test_ipython_syntax_is_understood_not_parsed(tmp_path):
    src = [
        "!nvidia-smi -L\n",
        "%env CUDA_VISIBLE_DEVICES=0,1\n",
        "%pip install -q flash-attn==2.5.8 \\\n",
        "    xformers\n",
        "%matplotlib inline\n",
        "gpus = !nvidia-smi --list-gpus\n",
        "torch.cuda?\n",
        "for i in range(2):\n",
        "    !echo $CUDA_HOME\n",
        "print(gpus)",
    ]
    (tmp_path / "nb.ipynb").write_text(notebook([src]))
    assert _where(_scan(tmp_path)) == [
        "nb.ipynb:cell 1:1:2 KERN009",
        "nb.ipynb:cell 1:2:6 ENV001",
        "nb.ipynb:cell 1:3:17 ENV010",
        "nb.ipynb:cell 1:4:5 ENV010",
        "nb.ipynb:cell 1:6:9 KERN009",
        "nb.ipynb:cell 1:9:12 ENV004",
    ]


def test_cell_magics(tmp_path):
    (tmp_path / "nb.ipynb").write_text(notebook([
        "%%bash\nexport NCCL_DEBUG=INFO\nnvidia-smi",
        "%%time\nimport torch\ntorch.cuda.synchronize()",
        "%%writefile launch.sh\ntorchrun --nproc_per_node gpu train.py",
        "%%writefile helper.py\nimport torch\nx.cuda()",
        "%%html\n<b>torch.cuda</b> CUDA_VISIBLE_DEVICES=1",
        "%%javascript\nconsole.log('cuda')",
    ]))
    assert _where(_scan(tmp_path)) == [
        "nb.ipynb:cell 1:2:8 ENV003",
        "nb.ipynb:cell 1:3:1 KERN009",
        "nb.ipynb:cell 2:3:1 DEV001",
        "nb.ipynb:cell 3:2:27 ENV023",
        "nb.ipynb:cell 4:3:1 DEV010",
    ]


def test_suppression_inside_a_cell_and_unused_ones(tmp_path):
    (tmp_path / "nb.ipynb").write_text(notebook([
        "!nvidia-smi  # migrate: ignore[KERN009]\nx = 1  # migrate: ignore[DEV001]",
    ]))
    result = _scan(tmp_path)
    assert _where(result) == ["nb.ipynb:cell 1:2:8 MIG004"]
    assert result.summary.suppressed == 1


def test_skip_file_in_a_cell_skips_the_notebook(tmp_path):
    (tmp_path / "nb.ipynb").write_text(notebook(["# migrate: skip-file\nx.cuda()"]))
    result = _scan(tmp_path)
    assert result.findings == () and "skip-file" in result.skipped[0].reason


@pytest.mark.parametrize(
    "content, code, where, words",
    [
        ('{"cells": [,]}', "MIG001", "1:12", "invalid JSON"),
        (json.dumps({"nbformat": 3, "worksheets": [], "cells": []}), "MIG001", "1:1", "nbformat 3"),
        (json.dumps({"metadata": {}}), "MIG001", "1:1", "no top-level `cells`"),
    ],
)
def test_bad_notebooks_are_meta_findings(tmp_path, content, code, where, words):
    (tmp_path / "bad.ipynb").write_text(content)
    (tmp_path / "good.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    result = _scan(tmp_path)
    [f] = [f for f in result.findings if f.path == "bad.ipynb"]
    assert (f.code, f"{f.line}:{f.column}", f.cell) == (code, where, None) and words in f.message
    assert _where(result, "good.py") == ["good.py:2:1 DEV001"]
    before = (tmp_path / "bad.ipynb").read_bytes()
    api.fix([tmp_path], root=tmp_path, use_cache=False)
    assert (tmp_path / "bad.ipynb").read_bytes() == before


def test_undecodable_notebook_is_unreadable(tmp_path):
    (tmp_path / "bad.ipynb").write_bytes(b'{"cells": ["caf\xe9"]}')
    [f] = _scan(tmp_path).findings
    assert f.code == "MIG002" and "UTF-8" in f.message


def test_broken_cells_are_reported_per_cell(tmp_path):
    data = json.loads(notebook(["x = (\n", "import torch\ntorch.cuda.synchronize()"]))
    data["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": 42})
    (tmp_path / "nb.ipynb").write_text(json.dumps(data))
    result = _scan(tmp_path)
    assert _where(result) == ["nb.ipynb:cell 1:1:5 MIG001", "nb.ipynb:cell 2:2:1 DEV001", "nb.ipynb:cell 3:1:1 MIG001"]
    assert "nb.ipynb cell 1" in result.findings[0].message


def test_non_python_notebook_is_skipped(tmp_path):
    (tmp_path / "r.ipynb").write_text(notebook(["library(torch)\nx$cuda()"], metadata={"kernelspec": {"language": "R", "name": "ir"}}))
    result = _scan(tmp_path)
    assert result.findings == () and result.skipped[0].reason == "notebook kernel language is r, not Python"


def test_checkpoint_copies_are_not_scanned(tmp_path):
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "nb-checkpoint.ipynb").write_text(notebook(["x.cuda()"]))
    assert _scan(tmp_path).findings == ()


# ---- container files ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Dockerfile", "Containerfile", "Dockerfile.gpu", "train.dockerfile", "dockerfile"])
def test_container_file_names(tmp_path, name):
    (tmp_path / name).write_text("FROM nvidia/cuda:12.1.1-runtime-ubuntu22.04\n")
    assert _where(_scan(tmp_path)) == [f"{name}:1:6 ENV020"]


def test_dockerfile_details(tmp_path):
    (tmp_path / "Dockerfile").write_text(
        "# escape=`\n"
        "FROM python:3.11-slim AS base\n"
        "FROM base AS app\n"
        "FROM pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime\n"
        "FROM tensorflow/tensorflow:latest-gpu\n"
        "RUN apt-get install -y `\n"
        "    # cuDNN for the GPU build\n"
        "    libcudnn8 `\n"
        "    git\n"
        "ENV PATH=/usr/local/cuda/bin:$PATH NVIDIA_VISIBLE_DEVICES=all\n"
        "LABEL description=\"built with cuda\"\n"
        "HEALTHCHECK CMD nvidia-smi || exit 1\n"
    )
    assert _where(_scan(tmp_path)) == [
        "Dockerfile:4:6 ENV020",
        "Dockerfile:5:6 ENV020",
        "Dockerfile:8:5 ENV021",
        "Dockerfile:10:36 ENV004",
        "Dockerfile:12:17 KERN009",
    ]


# ---- cluster and launch scripts ------------------------------------------------------------------


def test_scheduler_directives_launchers_and_containers(tmp_path):
    (tmp_path / "job.sbatch").write_text(
        "#!/bin/bash\n"
        "#SBATCH --gres=gpu:a100:4\n"
        "#SBATCH -G 8\n"
        "#SBATCH --partition=train   # a GPU job (this comment is not a request)\n"
        "#PBS -l select=1:ncpus=8:ngpus=4\n"
        "#BSUB -gpu \"num=4:mode=exclusive_process\"\n"
        "export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH\n"
        "conda install -y nccl\n"
        "srun --gpus-per-task=1 python -m torch.distributed.run --nproc-per-node gpu train.py\n"
        "deepspeed --num_gpus 8 --include localhost:0,1 train.py\n"
        "accelerate launch --multi_gpu --gpu_ids 0,1 train.py\n"
        "docker run --runtime=nvidia --gpus '\"device=0,1\"' img\n"
        "apptainer exec --nv img.sif python train.py\n"
    )
    assert _where(_scan(tmp_path)) == [
        "job.sbatch:2:9 ENV022",
        "job.sbatch:3:9 ENV022",
        "job.sbatch:5:26 ENV022",
        "job.sbatch:6:7 ENV022",
        "job.sbatch:8:18 ENV021",
        "job.sbatch:9:6 ENV022",
        "job.sbatch:9:73 ENV023",
        "job.sbatch:12:12 ENV024",
        "job.sbatch:12:29 ENV024",
        "job.sbatch:13:16 ENV024",
    ]


def test_pip_installs_in_scripts_reuse_the_requirement_checks(tmp_path):
    (tmp_path / "setup.sh").write_text(
        "python -m pip install -U pip && pip install \"flash-attn>=2.5\" --no-build-isolation\n"
        "pip3 install -r requirements.txt -c constraints.txt git+https://github.com/NVIDIA/apex.git\n"
        "uv pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu\n"
        "pip install --extra-index-url=https://download.pytorch.org/whl/cu121 torch\n"
    )
    assert _where(_scan(tmp_path)) == [
        "setup.sh:1:46 ENV010",
        "setup.sh:2:53 ENV010",
        "setup.sh:3:16 OPS008",
        "setup.sh:4:39 ENV011",
    ]


# ---- framework configs -------------------------------------------------------------------------


def test_which_yaml_json_toml_files_are_read(tmp_path):
    (tmp_path / "plain.yaml").write_text("name: demo\nlr: 0.1\n")  # no marker: never parsed
    (tmp_path / "template.yaml").write_text("device: {{ .Values.cuda }}\n  bad: [\n")  # marker, not YAML
    (tmp_path / "tsconfig.json").write_text("// comments\n{\"device\": \"cuda\"}\n")
    (tmp_path / "run.toml").write_text("[train]\ndevice = \"cuda\"\nbackend = 'nccl'\n")
    (tmp_path / "big.json").write_text("[" + ",".join(['"cuda"'] * 500_000) + "]")
    result = _scan(tmp_path)
    assert _where(result) == ["run.toml:2:11 DEV017", "run.toml:3:12 DIST007"]
    skipped = {s.path: s.reason for s in result.skipped}
    assert set(skipped) == {"template.yaml", "tsconfig.json", "big.json"}
    assert skipped["template.yaml"].startswith("not read as a config: invalid YAML")
    assert "MiB" in skipped["big.json"]


def test_config_keys_and_values(tmp_path):
    (tmp_path / "cfg.yaml").write_text(
        "trainer:\n"
        "  device: cuda\n"
        "  accelerator: cuda\n"               # Lightning's own accelerator names: not a device string
        "  devices: [cuda:0, cuda:1]\n"
        "  map_location: cuda:${local_rank}\n"
        "  backend_name: cuda\n"
        "dist:\n"
        "  dist_backend: cpu:gloo,cuda:nccl\n"
        "  note: nccl\n"                       # not a backend key
        "model:\n"
        "  use_flash_attention_2: true\n"
        "  use_flash_attn: false\n"
        "k8s:\n"
        "  env:\n"
        "    - name: CUDA_VISIBLE_DEVICES\n"
        "      value: \"0\"\n"
        "    - NCCL_DEBUG=INFO\n"
        "  docs: set CUDA_VISIBLE_DEVICES to choose GPUs\n"  # prose
    )
    assert _where(_scan(tmp_path)) == [
        "cfg.yaml:2:11 DEV017",
        "cfg.yaml:4:13 DEV017",
        "cfg.yaml:4:21 DEV017",
        "cfg.yaml:5:17 DEV017",
        "cfg.yaml:8:17 DIST007",
        "cfg.yaml:11:26 ATTN021",
        "cfg.yaml:15:13 ENV001",
        "cfg.yaml:17:7 ENV003",
    ]


def test_deepspeed_checks_need_a_deepspeed_config(tmp_path):
    (tmp_path / "ds.json").write_text(json.dumps({"train_batch_size": 8, "amp": {"enabled": True}, "optimizer": {"type": "lamb"}}))
    (tmp_path / "other.json").write_text(json.dumps({"amp": {"enabled": True}, "optimizer": {"type": "Lamb"}}))
    assert _where(_scan(tmp_path)) == ["ds.json:1:25 APEX060", "ds.json:1:73 KERN011"]


def test_yaml_anchor_shared_value_is_reported_once_without_a_fix(tmp_path):
    (tmp_path / "a.yaml").write_text("base: &b\n  device: cuda\ntrain:\n  <<: *b\nother: *b\n---\ndevice: cuda:2\n")
    result = _scan(tmp_path)
    assert _where(result) == ["a.yaml:2:11 DEV017", "a.yaml:7:9 DEV017"]
    shared, plain = result.findings
    assert shared.fix is None and "anchor" in shared.message and plain.fix is not None


def test_yaml_suppression(tmp_path):
    (tmp_path / "a.yaml").write_text("device: cuda  # migrate: ignore[DEV017]\n")
    assert _scan(tmp_path).findings == ()


def test_the_rule_catalogue_is_excluded_from_the_projects_own_scan():
    result = api.scan([REPO / "rules"], root=REPO, use_cache=False)
    assert result.findings == () and result.summary.files_scanned == 0


def test_helpers_for_reporters_map_cell_lines():
    """`cell_lines` gives a finding's source line (baseline fingerprints, excerpts); `raw_line` the line of
    the JSON file (GitHub annotations, SARIF)."""
    from migrator.engine.notebook import cell_lines, raw_line

    text = (FIXTURE / "notebook.ipynb").read_text(encoding="utf-8")
    assert cell_lines(text)[3][3] == 'device = torch.device("cuda")'
    raw = text.splitlines()
    assert raw[raw_line(text, 3, 4) - 1].strip() == '"device = torch.device(\\"cuda\\")\\n",'
    assert raw[raw_line(text, 4, 3) - 1].strip().startswith('"source": "%%time')
    assert raw_line(text, 99, 1) is None and cell_lines("not json") == {}


def test_ipython_syntax_only_at_the_start_of_a_logical_line(tmp_path):
    src = 's = ("%d"\n     % x)\ndoc = """\n!nvidia-smi in a string\nwhat?\n"""\nz = 1 + \\\n  2\n!nvidia-smi\ntorch.cuda?'
    (tmp_path / "nb.ipynb").write_text(notebook([src]))
    # the string stays a string (prose mentioning nvidia-smi: no invocation), no shell finding on line 4
    assert _where(_scan(tmp_path)) == ["nb.ipynb:cell 1:9:2 KERN009"]


def test_every_environment_variable_pattern_passes_the_config_prefilter():
    """A variable the engine knows (python_checker.ENV_TOKEN) must not escape the config byte prefilter."""
    import re

    from migrator.engine.config_checker import CONFIG_PREFILTER
    from migrator.engine.python_checker import ENV_TOKEN

    body = ENV_TOKEN.pattern.removeprefix(r"\b(").removesuffix(r")\b")
    for alternative in body.split("|"):
        name = re.sub(r"\[A-Z0-9_\]\+", "X", alternative)
        assert ENV_TOKEN.fullmatch(name), name
        assert CONFIG_PREFILTER.search(name.encode()), f"{name} escapes CONFIG_PREFILTER"
