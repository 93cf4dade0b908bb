"""S3's rank-local activations localise a failing tensor-parallel run (issue 37 items 4 and 6, unit level):
each is compared with the original's tensor cut whole or per part, and a column-parallel output whose
split does not fit what the code after it combines is named (a fused gate/up weight split whole)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from migrator.validation.parent.comparison.compare import Run  # noqa: E402
from migrator.validation.parent.localisation import shards  # noqa: E402

TP = 2
GATE_UP, DOWN_IN = "layers.0.mlp.gate_up_proj.forward.0.output.0", "layers.0.mlp.down_proj.forward.0.input.0"


def _run(tensors: dict) -> Run:
    events, named = [], {}
    for match, value in tensors.items():
        kind = "forward_input" if ".input." in match else "forward_output"
        module = match.split(".forward")[0]
        name = f"Module.{module}.X.{match}"
        events.append({"name": name, "match": match, "kind": kind, "module": module, "cls": "X", "scope": module,
                       "shape": list(value.shape), "dtype": str(value.dtype), "stats_only": False})
        named[name] = value
    return Run({"migrate": {"events": events}}, named)


def _mlp(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def _rank_run(parts: int, rank: int) -> tuple[Run, Run]:
    """(the original's run, rank ``rank``'s) with the fused gate/up output column-split in ``parts`` parts."""
    full = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(5))
    local = shards.shard(full, -1, parts, TP, rank)
    golden = _run({GATE_UP: full, DOWN_IN: _mlp(full)})
    return golden, _run({GATE_UP: local, DOWN_IN: _mlp(local)})


@pytest.mark.parametrize("rank", [0, 1])
def test_a_fused_weight_split_per_part_holds_shards_and_gets_no_cause(rank):
    golden, run = _rank_run(2, rank)
    assert [t.parts for t in shards.rank_local(golden, run, TP, rank)] == [2, 1]
    assert shards.cause(golden, run, TP, rank) is None


@pytest.mark.parametrize("rank", [0, 1])
def test_a_fused_weight_split_whole_is_named_at_its_projection(rank):
    golden, run = _rank_run(1, rank)
    text = shards.cause(golden, run, TP, rank)
    assert text is not None
    assert f"the {DOWN_IN.split('.forward')[0]} (X) input is no shard of the original's" in text
    assert "layers.0.mlp.gate_up_proj (X) before it splits its 16 output features whole" in text
    assert "combines 2 parts of them (16 -> 8 features)" in text and "tp_shard = (0, 2)" in text


def test_a_rank_local_tensor_of_no_layout_is_named_without_a_producer():
    full = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(6))
    golden, run = _run({GATE_UP: full}), _run({GATE_UP: full[..., :8].flip(-1)})
    text = shards.cause(golden, run, TP, 0)
    assert text is not None and "layers.0.mlp.gate_up_proj (X) output is no shard" in text and "before it" not in text


def test_replicated_tensors_are_not_rank_local():
    full = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(7))
    assert shards.rank_local(_run({GATE_UP: full}), _run({GATE_UP: full + 1}), TP, 0) == []


def test_a_rank_local_tensor_after_the_first_failing_tensor_is_not_blamed():
    """Downstream of a failure upstream every rank-local tensor differs: only those before it localise."""
    golden, run = _rank_run(1, 0)
    assert shards.cause(golden, run, TP, 0, before=DOWN_IN) is None
    assert shards.cause(golden, run, TP, 0, before=GATE_UP) is None
    assert shards.cause(golden, run, TP, 0, before="loss") is not None
