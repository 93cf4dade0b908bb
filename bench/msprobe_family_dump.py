"""Child of `bench/validate_families_msprobe.py`: one training step of a family tree (its `validate.py`
protocol) under msprobe's own `PrecisionDebugger` (PyPI mindstudio-probe), as a user would dump it.

    python bench/msprobe_family_dump.py SIDE TREE OUT TASK LEVEL [WORLD [STEPS]]

SIDE `original` runs under our CUDA references (cuda -> cpu), `migrated` under the torch_npu emulation;
msprobe is imported after either, so on the migrated side it sees a torch_npu and wraps its fused ops
(`NPU.npu_rms_norm.0.forward`) as it does on an Ascend host. Every side builds its own model from seed 0
(msprobe's workflow: same seed, not the same checkpoint), runs `make_batch(0)`, the forward, `loss_fn` and
`train_step` (or `loss.backward()`) inside `start`/`stop`. WORLD 2 starts two gloo ranks and calls the
protocol's `parallelize(model, mesh, "tp")`; msprobe then writes `step0/rank<r>`. STEPS 2 runs steps 0 and
1 on `make_batch(0)` and `make_batch(1)` (msprobe's `step: [0, 1]`): step 1's module records carry the
parameters as step 0's optimizer left them, so a level-L0 dump sees what the optimizer did."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _step(side: str, tree: str, out: str, task: str, level: str, rank: int, world: int, steps: int = 1) -> None:
    sys.path.insert(0, str(REPO))
    from migrator.validation import determinism
    from migrator.validation.child import execute, protocol

    layers = protocol.install_layers(side)
    determinism.apply(0, 1, layers.device)
    import torch
    from msprobe.pytorch import PrecisionDebugger  # after the layers: see the module docstring

    entry = protocol.load_entry(tree)
    config = {"task": task, "dump_path": out, "rank": [], "step": list(range(steps)), "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"]}}
    if task == "statistics":
        config[task]["summary_mode"] = "statistics"
    config_file = f"{out}.rank{rank}.config.json"
    Path(config_file).write_text(json.dumps(config), encoding="utf-8")
    debugger = PrecisionDebugger(config_path=config_file)
    torch.manual_seed(0)
    model = entry.make_model()
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("mp",))
        assert entry.parallelize is not None, f"{tree}: no parallelize() for {world} ranks"
        model = entry.parallelize(model, mesh, "tp") or model
    optimizer = entry.make_optimizer(model) if entry.make_optimizer else None
    scaler = entry.make_scaler() if entry.make_scaler else None
    for step in range(steps):
        batch = entry.batch(step, rank, world)
        args, kwargs = execute.model_inputs(entry, batch)
        debugger.start(model)
        loss = entry.loss_fn(model(*args, **kwargs), batch)
        if entry.train_step is not None and optimizer is not None:
            entry.train_step(model, optimizer, loss, scaler)
        else:
            loss.backward()
        debugger.stop()
        debugger.step()


def _rank(rank: int, world: int, argv: list[str]) -> None:
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        _step(*argv[:5], rank, world, int(argv[5]))  # type: ignore[call-arg]
    finally:
        dist.destroy_process_group()


def main(argv: list[str]) -> None:
    side, tree, out, task, level = argv[:5]
    world = int(argv[5]) if len(argv) > 5 else 1
    steps = int(argv[6]) if len(argv) > 6 else 1
    out = os.path.abspath(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if world == 1:
        _step(side, os.path.abspath(tree), out, task, level, 0, 1, steps)
        return
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    mp.spawn(_rank, args=(world, [side, os.path.abspath(tree), out, task, level, str(steps)]), nprocs=world)


if __name__ == "__main__":
    main(sys.argv[1:])
