"""`migrate plan` on the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.plan import calibration
from tests.conftest import REPO

MIXTRAL = {"num_hidden_layers": 56, "hidden_size": 6144, "num_attention_heads": 48, "num_key_value_heads": 8,
           "intermediate_size": 16384, "vocab_size": 32768, "num_local_experts": 8, "num_experts_per_tok": 2,
           "hidden_act": "silu"}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "mixtral.json"
    path.write_text(json.dumps(MIXTRAL))
    return path


def test_json_plan_to_a_file(config, tmp_path):
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "supernode-384",
                                       "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 1 and doc["model"]["experts"] == 8
    plan = doc["clusters"][0]
    assert plan["top"] and plan["top"][0]["fits"] and plan["fault"]["mtbf_h"] > 0
    assert plan["s0"]["command"].startswith("migrate validate TREE --stages S0")
    assert json.loads(result.output) == doc


def test_json_plan_matches_its_schema(config):
    import jsonschema

    from migrator.ground.resources import schema_path

    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "supernode-384",
                                       "--cluster", "atlas-950-superpod", "--dtype", "fp16", "--format", "json"])
    assert result.exit_code == 2  # no fp16 peak for the 950: still a valid document, with its error
    doc = json.loads(result.output)
    jsonschema.validate(doc, json.loads(schema_path("plan.schema.json").read_text()))
    assert doc["clusters"][1]["error"] and not doc["clusters"][1]["top"]


def test_text_plan_names_memory_comm_bubble_mfu_and_faults(config):
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "supernode-384",
                                       "--cluster", "h100-dgx", "--devices", "768"])
    assert result.exit_code == 0, result.output
    for words in ("memory per device", "communication", "pipeline bubble", "MFU", "faults:", "S0:"):
        assert words in result.output


def test_no_fitting_layout_exits_1(config):
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "h100-dgx"])
    assert result.exit_code == 1 and "no layout fits in memory" in result.output


def test_missing_figures_exit_2_and_the_other_clusters_still_plan(config):
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "atlas-950-superpod",
                                       "--cluster", "supernode-384", "--dtype", "fp16"])
    assert result.exit_code == 2
    assert "not planned: cluster 'atlas-950-superpod': no sourced value for" in result.output
    assert "[tool.migrate.clusters.atlas-950-superpod]" in result.output and "1. TP" in result.output


@pytest.fixture(scope="module")
def gpt_shape():
    """samples/gpt's shape, probed once for the module (a child importing torch; the probe itself is
    test_model.py's test_probe_reads_the_samples_on_the_meta_device)."""
    from migrator.plan.probe import probe_tree

    return probe_tree(str(REPO / "samples" / "gpt"))


@pytest.mark.parametrize("name", ["a2-8x", "supernode-384", "atlas-950-superpod", "atlas-960-superpod"])
def test_every_ascend_profile_plans_the_sample_with_its_figures_flagged(name, gpt_shape, monkeypatch):
    from migrator.plan import probe

    gpt = REPO / "samples" / "gpt"
    probe_tree = probe.probe_tree
    monkeypatch.setattr(probe, "probe_tree", lambda tree, entry=None, **kw: gpt_shape
                        if Path(tree).resolve() == gpt and entry is None else probe_tree(tree, entry, **kw))
    result = CliRunner().invoke(main, ["plan", str(gpt), "--cluster", name])
    assert result.exit_code == 0, result.output
    assert "1. TP" in result.output and "not planned" not in result.output
    assert "figures derived (not first-party):" in result.output


def test_a2_plan_and_explain_print_each_figure_with_its_kind_and_source(config):
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "a2-8x", "--explain"])
    assert result.exit_code in (0, 1), result.output
    assert "figures derived (not first-party): domain_GBps, peak_tflops_bf16, hbm_GBps" in result.output
    peak = calibration.DERIVED_FIGURES["a2-8x"]["peak_tflops_bf16"][0]
    assert f"- peak_tflops_bf16 = {peak:g}, derived: fitted to one published run" in result.output
    assert "Llama 2 7B" in result.output and "arXiv:2506.12708" in result.output  # the run; hbm's paper
    assert "- scale_out_GBps = 25, first-party: " in result.output


def test_strict_refuses_a2_listing_every_figure_that_is_not_measured_or_first_party(config):
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "a2-8x", "--strict"])
    assert result.exit_code == 2, result.output
    assert "--strict: cluster 'a2-8x'" in result.output
    for item in ("peak_tflops_bf16 (derived)", "hbm_GBps (derived)", "domain_GBps (derived)", "hbm_GB (announced)"):
        assert item in result.output
    assert "scale_out_GBps" not in result.output.split("--strict")[1]
    ok = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "a100-dgx", "--devices", "768",
                                   "--strict"])
    assert "--strict" not in ok.output and "1. TP" in ok.output


def test_assume_sets_a_cluster_figure_flagged_user(config):
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "a2-8x", "--explain",
                                       "--assume", "peak_tflops_bf16=300"])
    assert "- peak_tflops_bf16 = 300, user: --assume" in result.output


def test_write_launch_writes_three_valid_scripts(config, tmp_path):
    out = tmp_path / "launch"
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "supernode-384",
                                       "--write-launch", str(out)])
    assert result.exit_code == 0, result.output
    scripts = sorted(p.name for p in out.iterdir())
    assert scripts == ["run_1card.sh", "run_1machine.sh", "run_supernode.sh", "validate_1machine.sh",
                       "validate_supernode.sh", "validate_supernode.slurm"]
    for name in scripts:
        assert subprocess.run(["bash", "-n", str(out / name)]).returncode == 0
    supernode = (out / "run_supernode.sh").read_text()
    assert "torchrun --nnodes" in supernode and "HCCL_CONNECT_TIMEOUT" in supernode and "HCCL_IF_IP" in supernode
    assert "--nproc-per-node 1" in (out / "run_1card.sh").read_text()


def test_write_launch_validate_scripts_call_validate_per_node(config, tmp_path):
    """The validate scripts run `migrate validate` with each node's flags: the same node count and ranks per
    node as the stage's torchrun line; srun's variant passes no node flags (validate joins from its env)."""
    import re

    out = tmp_path / "launch"
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "supernode-384",
                                       "--write-launch", str(out)])
    assert result.exit_code == 0, result.output
    run = re.search(r"--nnodes (\d+) .*--nproc-per-node (\d+)", (out / "run_supernode.sh").read_text())
    assert run is not None
    nnodes, per_node = run.groups()
    per_node_script = (out / "validate_supernode.sh").read_text()
    assert (f"migrate validate \"$TREE\" --stages S2,S3 --nproc-per-node {per_node} --nnodes {nnodes} "
            '--node-rank "$NODE_RANK"') in per_node_script
    assert '--rdzv-endpoint "$MASTER_ADDR:${MIGRATE_RDZV_PORT:-29400}"' in per_node_script
    slurm = (out / "validate_supernode.slurm").read_text()
    assert f"#SBATCH --nodes={nnodes}" in slurm and f"srun --nodes={nnodes} --ntasks-per-node=1" in slurm
    assert "--node-rank" not in slurm and f"--nproc-per-node {per_node}" in slurm
    machine = (out / "validate_1machine.sh").read_text()
    assert "--nnodes" not in machine and "--nproc-per-node" in machine


def test_bad_arguments():
    runner = CliRunner()
    assert runner.invoke(main, ["plan", "--cluster", "supernode-384"]).exit_code == 2
    bad = runner.invoke(main, ["plan", "--model", "nope.json", "--cluster", "supernode-384"])
    assert bad.exit_code == 2 and "nope.json" in bad.output
    unknown = runner.invoke(main, ["plan", "samples/gpt", "--cluster", "nowhere"])
    assert unknown.exit_code == 2


def test_plan_help_imports_no_torch():
    code = ("import sys; from click.testing import CliRunner; from migrator.cli import main; "
            "r = CliRunner().invoke(main, ['plan', '--help']); assert r.exit_code == 0; "
            "print(sorted(m for m in ('torch', 'libcst', 'jinja2', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.slow
def test_moe_sample_top_plan_keeps_ep_and_tp_inside_the_supernode_and_its_s0_passes():
    from migrator import api

    result = api.plan(REPO / "samples" / "moe", ["supernode-384"], global_batch=16, seq=64, check_s0=True, devices=768)
    plan = result.clusters[0]
    best = plan.top[0]
    assert best.layout.tp > 1 and best.layout.ep > 1
    assert best.links["tp"] == "domain" and best.links["ep"] == "domain"
    assert plan.s0["plan_tp"] == best.layout.tp and plan.s0["plan_world_size"] == best.layout.tp * best.layout.ep
    assert plan.s0["status"] == "pass", plan.s0
    assert result.exit_code == 0
