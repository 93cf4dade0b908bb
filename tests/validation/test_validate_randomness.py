"""Unit level, no child processes: the dropout comparison (issue 24 item 4), the dropout census on a model,
and the S2 world sizes of script mode (issue 24 item 2)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from migrator.validation import records
from migrator.validation.facts import DropoutFacts
from migrator.validation.parent.comparison import randomness
from migrator.validation.parent.comparison.randomness import NOT_COMPARABLE


def dropout_check(original, migrated, **kwargs):
    """The check on each side's dropout facts as the child writes them, read strictly as the parent reads them."""
    return randomness.dropout_check(records.from_json(original, DropoutFacts, "status.json"),
                                    records.from_json(migrated, DropoutFacts, "status.json"), **kwargs)

SITES = {"blocks.0.attn": [0.1]}


def _side(sites, losses=(4.0, 4.1, 3.9, 4.05), kept=None):
    return {"sites": sites, "neutralised": bool(sites),
            "statistics": {"sites": sites, "losses": list(losses), "kept": kept or {}}}


def test_no_dropout_anywhere_gives_no_row():
    assert dropout_check({"sites": {}}, {"sites": {}}) == (None, [])


def test_same_sites_and_statistics_pass_and_say_the_numerics_were_neutralised():
    row, notes = dropout_check(_side(SITES), _side(SITES, losses=(4.02, 4.08, 3.95, 4.0)))
    assert row["status"] == "pass" and "same sites and rates (blocks.0.attn p=0.1)" in row["message"]
    assert "neutralised on both sides" in notes[0]


@pytest.mark.parametrize("migrated, expected", [
    (_side({"blocks.0.attn": [0.2]}), "dropout rate differs: blocks.0.attn: p=0.2 (migrated) vs p=0.1 (original)"),
    (_side({}), "blocks.0.attn: p=none (migrated) vs p=0.1 (original)"),
    (_side(SITES, losses=(5.0, 5.1, 4.9, 5.05)), "loss with dropout on 5.0"),
    (_side(SITES, kept={"blocks.0.drop": [8000, 10000]}), "keep rate at blocks.0.drop 0.8000 (migrated) vs 0.9000"),
])
def test_a_different_dropout_fails_naming_it(migrated, expected):
    original = _side(SITES, kept={"blocks.0.drop": [9000, 10000]})
    row, _ = dropout_check(original, migrated)
    assert row["status"] == "fail" and expected in row["message"], row


def test_dropout_on_the_migrated_side_only_fails():
    row, notes = dropout_check({"sites": {}}, _side(SITES))
    assert row["status"] == "fail" and "dropout on the migrated side only: blocks.0.attn p=0.1" in row["message"]


def test_script_mode_compares_sites_and_rates_of_the_neutralised_dropout():
    script = {"sites": {"drop": [0.1]}, "neutralised": True}
    row, notes = dropout_check(script, dict(script), script=True)
    assert row["status"] == "pass" and "neutralised on both sides in every run" in notes[0]
    row, _ = dropout_check(script, {"sites": {"drop": [0.2]}}, script=True)
    assert row["status"] == "fail" and "drop: p=0.2 (migrated) vs p=0.1 (original)" in row["message"]
    row, _ = dropout_check({"sites": {}}, script, script=True)
    assert row["status"] == "fail" and "the original script applies none" in row["message"]


def test_neither_neutralised_nor_measured_is_not_comparable():
    row, _ = dropout_check(_side(SITES), {"sites": {}}, real_npu=True)
    assert row["status"] == NOT_COMPARABLE and row["message"].startswith("not comparable: ")
    row, _ = dropout_check(_side(SITES), _side(SITES, losses=(float("nan"),) * 4))
    assert row["status"] == NOT_COMPARABLE


def test_the_census_finds_module_functional_and_fused_dropout_and_neutralises_it():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from migrator.validation.child.dropout import Dropout, fused

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = torch.nn.Dropout(0.25)
            self.fc = torch.nn.Linear(64, 64)

        def forward(self, x):
            x = self.drop(self.fc(x))
            x = F.dropout(x, p=0.5, training=self.training)
            q = x.view(2, 1, 32, 64)
            y = F.scaled_dot_product_attention(q, q, q, None, 0.125 if self.training else 0.0)
            keep = 1.0 - fused("npu_fusion_attention(keep_prob)", 0.125 if self.training else 0.0)
            return y.flatten() * keep

    net = Net().train()
    x = torch.randn(64, 64)
    with Dropout(net, neutral=False) as census:
        net(x)
    facts = census.facts()
    assert facts["sites"] == {"_root": [0.125, 0.5], "drop": [0.25]}
    assert 0.7 < facts["kept"]["drop"] < 0.8  # elementwise: the keep rate is observable
    with torch.no_grad():
        net.eval()
        expected = net(x)
        net.train()
        with Dropout(net, neutral=True):
            neutral = net(x)
    assert torch.allclose(neutral, expected)  # every dropout off, the fused op's keep_prob 1


def test_script_s2_tries_the_next_world_sizes_then_says_could_not_run(monkeypatch):
    from migrator.validation.parent import script_parallel as sp
    from migrator.validation.records import Failure, Status

    opts = SimpleNamespace(world_size=2, nnodes=1)
    assert sp.world_sizes(opts) == [2, 3, 4]
    assert sp.world_sizes(SimpleNamespace(world_size=2, nnodes=2)) == [4]
    tried = []

    def refuses(opts, original, migrated, work, nprocs, progress=None):
        tried.append(nprocs)
        return None, Status(phase="run", error=Failure(summary="AssertionError (at train.py:40 in main: assert ...)"))

    monkeypatch.setattr(sp, "_script_s2_at", refuses)
    s2 = sp.run_script_s2(opts, "o", "m", "w")
    assert tried == [2, 3, 4] and s2.status == "not_run"
    assert s2.summary == "could not run: original fails at 2, 3, 4 ranks: AssertionError (at train.py:40 in main: assert ...)"
