"""Framework routes: detection (vendored tree, pin, import), what each route covers, --route none."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from migrator import api
from migrator.ground.resources import schema_path
from migrator.routes.detect import pins
from tests.conftest import run_cli

TREES = Path(__file__).resolve().parents[1] / "fixtures" / "routes"
SCHEMA = json.loads(schema_path("findings.schema.json").read_text())


def scan(name: str, route: str = "auto"):
    tree = TREES / name
    return api.scan([tree], root=tree, use_cache=False, route=route)


def by_symbol(result) -> dict[str, object]:
    return {f"{f.path}:{f.line} {f.symbol}": f.route for f in result.findings}


def test_vendored_megatron_tree_gives_version_and_mindspeed_route():
    result = scan("megatron_vendored")
    (fw,) = result.frameworks
    assert (fw.framework.name, fw.framework.version) == ("megatron-core", "0.12.1")
    assert fw.framework.version_source == "vendored megatron/core/package_info.py"
    assert fw.route.title == "MindSpeed 2.1.0_core_r0.12.1"
    marks = by_symbol(result)
    fused_adam = marks["pretrain_gpt.py:3 apex.optimizers.FusedAdam"]
    assert fused_adam.status == "covered"
    assert "requirements_basic.py:65" in fused_adam.source  # the patch row, file:line in MindSpeed
    softmax = marks["megatron/core/fusions/fused_softmax.py:7 scaled_masked_softmax_cuda"]
    assert softmax.status == "covered" and softmax.target == "megatron.core.fusions.fused_softmax.ScaledMaskedSoftmax"
    te = marks["megatron/core/extensions/transformer_engine.py:1 transformer_engine"]
    assert te.status == "gated" and te.flag == "--transformer-impl local"
    stub = marks["pretrain_gpt.py:4 flash_attn.flash_attn_interface.flash_attn_unpadded_func"]
    assert stub.status == "left" and "stub" in stub.note
    assert marks["pretrain_gpt.py:9 torch.cuda.synchronize"] is None  # residual work, fixed as before
    # `te.pytorch.Linear` (a base class after `import transformer_engine as te`) is a finding of its own:
    # MindSpeed leaves it a placeholder; the wrapper file's other TE use is gated with the file
    linear = marks["megatron/core/extensions/transformer_engine.py:4 transformer_engine.pytorch.Linear"]
    assert linear.status == "left" and "placeholder" in linear.note
    # the stub's use as a value (line 10) is a site of its own, left like its import
    assert marks["pretrain_gpt.py:10 flash_attn.flash_attn_interface.flash_attn_unpadded_func"].status == "left"
    assert (fw.covered, fw.gated, fw.left) == (3, 2, 3)


def test_pin_and_import_detection():
    pinned = scan("megatron_pin").frameworks[0]
    assert pinned.framework.version == "0.12.1" and "requirements.txt:1" in pinned.framework.version_source
    imported = scan("megatron_import").frameworks[0]
    assert imported.framework.version is None and imported.framework.version_source == "imports only"
    assert "version unknown" in imported.note and imported.route is not None


def test_pins_from_pyproject_and_setup_py():
    assert pins("pyproject.toml", '[project]\ndependencies = ["deepspeed>=0.19.8"]\n') == [
        ("deepspeed", "0.19.8", "pyproject.toml:2 `deepspeed>=0.19.8`")
    ]
    setup = 'from setuptools import setup\nsetup(install_requires=["torch", "transformers==4.51.3"])\n'
    assert pins("setup.py", setup) == [("transformers", "4.51.3", "setup.py:2 `transformers==4.51.3`")]
    assert pins("requirements.txt", "megatron-core\n") == [("megatron-core", None, "requirements.txt:1 `megatron-core`")]


def test_hf_flash_attention_2_is_covered_from_4_51_only():
    new = scan("hf_new")
    marks = {f.path: f.route for f in new.findings if f.code == "ATTN021"}
    assert set(marks) == {"model.yaml", "train.py"}  # the config key and the from_pretrained keyword
    for mark in marks.values():
        assert mark.status == "covered" and mark.condition.startswith("transformers >= 4.51.0")
    old = scan("hf_old")
    assert [f.route for f in old.findings if f.code == "ATTN021"] == [None, None]
    assert "no route for transformers 4.50.3" in old.frameworks[0].note


def test_deepspeed_ops_without_npu_builder_stay_findings():
    result = scan("deepspeed_ops")
    marks = by_symbol(result)
    assert marks["train.py:4 deepspeed.ops.transformer.DeepSpeedTransformerLayer"].status == "left"
    assert marks["ds_config.json:1 optimizer.type: Lamb"].status == "left"  # no FusedLamb builder on 0.16.4
    newer = by_symbol(scan("deepspeed_new"))  # 0.19.8 (pyproject pin) builds Lamb and the quantizer
    assert newer["ds_config.json:1 optimizer.type: Lamb"].status == "covered"
    assert newer["train.py:2 deepspeed.ops.quantizer.ds_quantizer"].status == "covered"
    assert newer["ds_config.json:1 sparse_attention"].status == "left"


def test_fused_adam_through_deepspeed_is_a_finding_the_route_covers(tmp_path):
    result = scan("deepspeed_ops")
    adam = [f for f in result.findings if f.symbol == "deepspeed.ops.adam.FusedAdam"]
    assert [(f.code, f.line) for f in adam] == [("KERN010", 3), ("KERN010", 7)]  # the import and the call
    assert all(f.route.status == "covered" and "op_builder/npu" in f.route.source for f in adam)
    plain = scan("deepspeed_ops", route="none")  # without the route they stay work to check
    assert [f.severity for f in plain.findings if f.symbol == "deepspeed.ops.adam.FusedAdam"] == ["warning", "warning"]
    # a DeepSpeed config whose optimizer DeepSpeed builds as FusedAdam: a note, covered by the route
    shutil.copytree(TREES / "deepspeed_ops", tmp_path / "t")
    (tmp_path / "t" / "ds_config.json").write_text('{"train_batch_size": 8, "optimizer": {"type": "AdamW"}}\n')
    config = api.scan([tmp_path / "t"], root=tmp_path / "t", use_cache=False)
    (note,) = [f for f in config.findings if f.path == "ds_config.json"]
    assert (note.code, note.severity, note.route.status) == ("KERN015", "info", "covered")
    # summary family counts leave covered findings out (the route headline counts them)
    assert result.summary.by_family["kernels"] == sum(
        1 for f in result.findings if f.family == "kernels" and not f.route.absorbs)
    assert plain.summary.by_family["kernels"] == sum(1 for f in plain.findings if f.family == "kernels")
    from migrator.reporters.report import build_context

    tree = TREES / "deepspeed_ops"
    settings, resolved = api.resolve_settings([tree], root=tree, use_cache=False)
    ctx = build_context(api.report(resolved, settings=settings))
    kernels = next(r for r in ctx["families"] if r["family"] == "kernels")
    assert kernels["total"] == result.summary.by_family["kernels"]
    assert ctx["n_covered"] == sum(1 for f in result.findings if f.route and f.route.absorbs) > 0


def test_route_none_is_todays_result():
    none = scan("megatron_vendored", route="none")
    auto = scan("megatron_vendored")
    assert none.frameworks == () and all(f.route is None for f in none.findings)
    assert [(f.code, f.path, f.line) for f in none.findings] == [(f.code, f.path, f.line) for f in auto.findings]


def test_covered_findings_cost_no_effort_and_do_not_fail(tmp_path):
    from migrator.reporters import effort

    result = scan("hf_new")
    assert effort.total(result.findings) == 0
    assert effort.total(scan("hf_new", route="none").findings) > 0
    tree = TREES / "hf_new"
    assert run_cli("scan", str(tree), "--root", str(tree), "--no-cache").returncode == 0
    assert run_cli("scan", str(tree), "--root", str(tree), "--no-cache", "--route", "none").returncode == 1


def test_json_lists_frameworks_and_validates():
    tree = TREES / "megatron_vendored"
    proc = run_cli("scan", str(tree), "--root", str(tree), "--no-cache", "--format", "json")
    data = json.loads(proc.stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["frameworks"][0]["route"] == "mindspeed"
    assert data["route_summary"]["residual"] < data["route_summary"]["findings"]
    assert data["route_summary"]["residual_effort_minutes"] < data["route_summary"]["effort_without_route_minutes"]


def test_text_and_markdown_lead_with_the_route():
    tree = TREES / "megatron_vendored"
    text = run_cli("scan", str(tree), "--root", str(tree), "--no-cache").stdout
    first = text.splitlines()[1]
    assert first.startswith("megatron-core 0.12.1") and "→ MindSpeed 2.1.0_core_r0.12.1: covers 5 of 9 findings" in first
    assert "(2 only with flags --transformer-impl local)" in first and "residual 4 findings, about" in first
    md = run_cli("report", str(tree), "--root", str(tree), "--no-cache", "--format", "md").stdout
    assert "### Framework route" in md and "basic.py:65" in md  # Markdown escapes the underscore


def test_fix_route_mindspeed_adds_adaptor_and_pin_and_keeps_covered_code(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(TREES / "megatron_vendored", tree)
    outcome = api.fix([tree], root=tree, use_cache=False, route="mindspeed")
    assert not outcome.errors
    lines = (tree / "pretrain_gpt.py").read_text().splitlines()
    assert lines[lines.index("import torch") + 1] == "import mindspeed.megatron_adaptor"
    assert "from apex.optimizers import FusedAdam" in lines  # MindSpeed patches it: not rewritten
    assert "torch.npu.synchronize()" in "\n".join(lines)  # residual work is fixed as usual
    assert (tree / "requirements.txt").read_text().splitlines()[-1].startswith("mindspeed @ git+")
    again = api.fix([tree], root=tree, use_cache=False, route="mindspeed")  # idempotent
    assert not again.changed_files


def test_fix_route_auto_adds_the_adaptor_it_relies_on_and_route_none_rewrites(tmp_path):
    auto, none = tmp_path / "auto", tmp_path / "none"
    for tree in (auto, none):
        shutil.copytree(TREES / "megatron_vendored", tree)
    api.fix([auto], root=auto, use_cache=False)
    assert "import mindspeed.megatron_adaptor" in (auto / "pretrain_gpt.py").read_text()
    api.fix([none], root=none, use_cache=False, route="none")
    text = (none / "pretrain_gpt.py").read_text()
    assert "mindspeed" not in text and "from apex.optimizers import FusedAdam" not in text  # today's rewrite


def test_cli_route_choices_match_the_package():
    from migrator import cli
    from migrator.routes import CHOICES

    assert cli.ROUTE_CHOICES == CHOICES


def test_rule_explains_each_route_with_sources():
    for name, needle in (("mindspeed", "requirements_basic.py:"), ("deepspeed", "op_builder/npu"), ("hf", "4.51.0")):
        proc = run_cli("rule", name)
        assert proc.returncode == 0 and needle in proc.stdout and "## What you add" in proc.stdout


@pytest.mark.network
@pytest.mark.slow
def test_megatron_core_sdist_with_mindspeed_route():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import scan_bench
    import sdists

    try:
        tree = sdists.fetch_tree(scan_bench.MEGATRON)
    except (OSError, sdists.BenchError) as exc:
        pytest.skip(f"the pinned megatron-core sdist cannot be had: {exc}")
    from migrator.reporters import effort

    routed = api.scan([tree], root=tree, use_cache=False)
    plain = api.scan([tree], root=tree, use_cache=False, route="none")
    fw = routed.frameworks[0]
    assert (fw.framework.name, fw.framework.version, fw.route.name) == ("megatron-core", "0.12.1", "mindspeed")
    covered = [f for f in routed.findings if f.route and f.route.status == "covered"]
    assert {"apex.optimizers.FusedAdam", "amp_C.multi_tensor_scale"} <= {f.symbol for f in covered}
    assert all(re.search(r"\(mindspeed/\S+\.py:\d+\)", f.route.source) for f in covered)  # links the patch row
    rest = [f for f in routed.findings if not (f.route and f.route.absorbs)]
    # what the route covers costs nothing; Transformer Engine member uses outside the files MindSpeed patches
    # (fp8 recipes, the dist-checkpoint Float8Tensor, FSDP's fp8 init) stay work (0.12.1: 3 980 -> 2 425 min)
    assert effort.total(rest) < effort.total(plain.findings)
    assert not any(f.family == "apex" and f.symbol.startswith("apex.optimizers") for f in rest)


def test_the_adaptor_goes_only_into_modules_that_import_torch():
    """megatron-core's ssm/mamba_hybrid_layer_allocation.py has a __main__ block and imports megatron
    only when it is not __main__: it is no training entry point, and fix must not touch it."""
    from migrator.routes.fix import ADAPTOR, insert_adaptor

    tool = 'import logging\nif __name__ != "__main__":\n    from megatron.core.utils import x\n\nif __name__ == "__main__":\n    pass\n'
    assert insert_adaptor(tool) is None
    entry = "import os\nimport torch\nfrom megatron.training import pretrain\n"
    assert insert_adaptor(entry).splitlines()[2] == ADAPTOR
