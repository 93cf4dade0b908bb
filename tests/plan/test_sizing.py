"""Without --devices a plan takes the smallest device count that fits and splits the global batch (issue 40)."""

from __future__ import annotations

from click.testing import CliRunner

from migrator.cli import main
from migrator.plan.clusters import load
from migrator.plan.configs import from_dict
from migrator.plan.runner import plan
from migrator.plan.search import Job, _ranked, layouts
from migrator.plan.sizing import candidate_sizes
from tests.conftest import REPO

LLAMA_3B = from_dict({"hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
                      "num_attention_heads": 24, "num_key_value_heads": 8, "vocab_size": 128256,
                      "hidden_act": "silu", "tie_word_embeddings": True}, "llama-3b", "test")


def _fits_at(job: Job, cluster, world: int) -> bool:
    return any(e.fits for e in _ranked(job, cluster, layouts(job, world)))


def test_sizes_step_in_powers_of_two_inside_a_machine_then_whole_machines():
    assert candidate_sizes(load(["supernode-384"])[0]) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768]
    assert candidate_sizes(load(["a2-8x"])[0]) == [1, 2, 4, 8]


def test_a_3b_model_is_not_spread_over_the_whole_supernode():
    cluster = load(["supernode-384"])[0]
    result = plan(LLAMA_3B, [cluster], global_batch=1024, seq=4096)
    cp = result.clusters[0]
    assert cp.world < 768 and cp.world in candidate_sizes(cluster)
    assert cp.top and cp.top[0].fits and cp.top[0].layout.world == cp.world
    assert any(f"uses {cp.world} of 768 devices: the smallest size" in w for w in cp.why)


def test_the_default_is_the_smallest_size_with_a_fitting_layout():
    cluster = load(["supernode-384"])[0]
    seventy = from_dict({"hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                         "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256,
                         "hidden_act": "silu"}, "llama-70b", "test")
    job = Job(seventy, 1024, 4096)
    cp = plan(seventy, [cluster], global_batch=1024, seq=4096).clusters[0]
    sizes = candidate_sizes(cluster)
    below = sizes[sizes.index(cp.world) - 1]
    assert cp.world > 16 and _fits_at(job, cluster, cp.world) and not _fits_at(job, cluster, below)
    assert any(f"on {below} the smallest layout needs" in w for w in cp.why)


def test_an_explicit_devices_is_kept():
    cp = plan(LLAMA_3B, load(["supernode-384"]), global_batch=1024, seq=4096, devices=768).clusters[0]
    assert cp.world == 768 and cp.top[0].layout.world == 768


def test_the_cli_says_why_it_chose_the_size():
    out = CliRunner().invoke(main, ["plan", "--model", str(REPO / "tests" / "plan" / "data" / "llama-3-70b.json"),
                                    "--cluster", "supernode-384"])
    assert "(32 devices;" in out.output and "uses 32 of 768 devices: the smallest size" in out.output, out.output
