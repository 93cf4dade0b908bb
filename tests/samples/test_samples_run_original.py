"""The ORIGINAL CUDA samples run on CPU with the CUDA-library references and the device remap.

Every training run is a subprocess (``python -m migrator.validation.child.cuda_reference.run``), as a
user would start it. Each test starts its own run (one run per test), so `pytest -n auto` spreads
them over the workers. The validate.py hooks are exercised in-process.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
RUNNER = ["-m", "migrator.validation.child.cuda_reference.run"]
LOSS = re.compile(r"\bloss ([-+]?(?:\d+\.\d+|nan|inf))")

_PARITY_WORKER = r"""
# fp32: validate.parallelize(stage) on 2 gloo ranks == the unsharded model (grads un-sharded).
import importlib.util, os, sys, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.set_num_threads(1)
dist.init_process_group("gloo", rank=rank, world_size=2)
spec = importlib.util.spec_from_file_location("moe_validate", sys.argv[1])
v = importlib.util.module_from_spec(spec); spec.loader.exec_module(v)
v.AUX_LOSS_COEF = 0.0  # the balancing loss is per-rank by design (see validate.py)
from train import sync_grads


def worst_grad_error(stage):
    torch.manual_seed(0); ref = v.make_model()
    torch.manual_seed(0); par = v.parallelize(v.make_model(), dist.group.WORLD, stage)
    if stage == "tp":  # TP ranks share the batch; EP ranks each take their own
        mine = full = v.make_batch(0)
    else:
        parts = [v.make_batch(0, r, 2) for r in range(2)]
        mine, full = parts[rank], {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    v.loss_fn(ref(full["idx"]), full).backward()
    v.loss_fn(par(mine["idx"]), mine).backward()
    if stage == "ep":
        sync_grads(par, dist.group.WORLD)
    refs, worst, n_local = dict(ref.named_parameters()), 0.0, 4 // 2
    for name, p in par.named_parameters():
        g = p.grad
        if hasattr(p, "tp_shard"):
            dim, n_parts = p.tp_shard
            gs = [torch.empty_like(g) for _ in range(2)]
            dist.all_gather(gs, g.contiguous())
            g = torch.cat([torch.cat([x.chunk(n_parts, dim)[i] for x in gs], dim) for i in range(n_parts)], dim)
        if getattr(p, "expert_parallel", False):  # local expert e on rank r is global r * n_local + e
            f = name.split(".")
            i = f.index("experts") + 1
            f[i] = str(int(f[i]) + rank * n_local)
            name = ".".join(f)
        r = refs[name].grad
        worst = max(worst, ((g - r).norm() / r.norm()).item())
    return worst


errors = {stage: worst_grad_error(stage) for stage in ("tp", "ep")}
dist.destroy_process_group()
print(" ".join(f"{k}={e:.3g}" for k, e in errors.items()))
"""


def _env(tmp: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        OMP_NUM_THREADS="1",  # several runs share the cores
        TORCH_EXTENSIONS_DIR=str(tmp / "torch_extensions"),  # resnet tries load_inline first
        PYTHONWARNINGS="ignore",
    )
    env.update(extra)
    return env


def _rank_env(rank: int, world: int, port: int) -> dict:
    """What torchrun exports to each worker (env:// rendezvous)."""
    return dict(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jobs() -> dict:
    py = sys.executable
    moe_path = os.pathsep.join([str(REPO), str(SAMPLES / "moe")])
    return {  # name -> (argv, number of ranks launched here, extra env)
        "gpt_fp16": ([py, *RUNNER, "samples/gpt/train.py", "--", "--tiny", "--dtype", "float16"], 0, {}),
        # WORLD_SIZE=1 env: train.py takes its DDP / init_process_group("nccl") path
        "gpt_bf16_packed_ddp": ([py, *RUNNER, "samples/gpt/train.py", "--", "--tiny", "--dtype", "bfloat16",
                                 "--doc-masking"], 1, {}),
        "moe_single": ([py, *RUNNER, "samples/moe/train.py", "--", "--tiny"], 0, {}),
        # the one torchrun launch: proves `torchrun -m migrator.validation.child.cuda_reference.run` works
        "moe_ep2": ([py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *RUNNER,
                     "samples/moe/train.py", "--", "--tiny", "--tp", "1"], 0, {}),
        "resnet": ([py, *RUNNER, "samples/resnet/train.py", "--", "--tiny"], 0, {}),
        "resnet_ddp2_syncbn": ([py, *RUNNER, "samples/resnet/train.py", "--", "--tiny", "--sync_bn"], 2, {}),
        "moe_parity": ([py, "-c", _PARITY_WORKER, str(SAMPLES / "moe" / "validate.py")], 2, {"PYTHONPATH": moe_path}),
    }


@pytest.fixture
def runs(tmp_path):
    """run(name) -> (returncode, stdout of rank 0, stderr of every rank); a multi-rank job fails if any rank fails."""
    def run(name: str) -> tuple[int, str, str]:
        argv, ranks, extra = _jobs()[name]
        port = _free_port()
        rank_envs = [_rank_env(r, ranks, port) for r in range(ranks)] or [{}]
        group = [subprocess.Popen(argv, cwd=REPO, env=_env(tmp_path, **extra, **renv), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for renv in rank_envs]
        try:
            outs = [p.communicate(timeout=300) for p in group]
        finally:
            for p in group:
                if p.poll() is None:
                    p.kill()
        rc = max(abs(p.returncode) for p in group)
        return rc, outs[0][0], "".join(err for _, err in outs)

    return run


def _losses(runs, name, expected_steps):
    rc, out, err = runs(name)
    assert rc == 0, f"{name} failed:\n{out[-2000:]}\n{err[-4000:]}"
    assert "[cuda_reference] references: flash_attn, apex, xformers; device remap: cuda->cpu" in err
    losses = [float(x) for x in LOSS.findall(out)]
    assert len(losses) == expected_steps, out
    assert all(math.isfinite(x) for x in losses), losses
    return losses, out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt_fp16", "gpt_bf16_packed_ddp"])
def test_gpt_trains_and_loss_decreases(runs, name):
    losses, out = _losses(runs, name, 8)
    assert losses[-1] < losses[0] - 0.3, losses
    assert sum(losses[-3:]) < sum(losses[:3]), losses
    if name == "gpt_bf16_packed_ddp":
        assert "world 1" in out  # took the DDP / init_process_group("nccl"->"gloo") path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["moe_single", "moe_ep2"])
def test_moe_trains_single_process_and_expert_parallel(runs, name):
    losses, _ = _losses(runs, name, 6)
    assert losses[-1] < losses[0], losses


@pytest.mark.slow
def test_moe_parallelize_matches_unsharded_fp32(runs):
    rc, out, err = runs("moe_parity")
    assert rc == 0, err[-3000:]
    errors = dict(kv.split("=") for kv in out.split())
    assert set(errors) == {"tp", "ep"} and all(float(e) < 1e-5 for e in errors.values()), errors


@pytest.mark.slow
def test_resnet_trains_with_apex_amp_and_kernel_fallback(runs):
    losses, out = _losses(runs, "resnet", 8)  # nn.DataParallel path
    assert "[resnet] fused bias+ReLU kernel unavailable" in out  # load_inline tried, fallback used


@pytest.mark.slow
def test_resnet_apex_ddp_with_syncbn_on_two_ranks(runs):
    _losses(runs, "resnet_ddp2_syncbn", 4)  # 128 samples / (16 per rank x 2 ranks)


# ---- validate.py hooks, in-process -----------------------------------------------------------

@pytest.fixture
def load_validate():
    """Import a sample's validate.py with the references installed; undo every side effect."""
    from migrator.validation.child import cuda_reference

    saved_path, saved_mods = list(sys.path), set(sys.modules)
    assert cuda_reference.install() == ["flash_attn", "apex", "xformers"]

    def load(sample):
        spec = importlib.util.spec_from_file_location(f"_validate_{sample}", SAMPLES / sample / "validate.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    yield load
    sys.path[:] = saved_path
    cuda_reference.uninstall()
    for name in set(sys.modules) - saved_mods:  # sample-local modules: model, data_utils, resnet, ...
        if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(SAMPLES)):
            del sys.modules[name]


@pytest.mark.parametrize("sample", ["gpt", "moe", "resnet"])
def test_validate_hooks(load_validate, sample):
    v = load_validate(sample)
    torch.manual_seed(0)
    model = v.make_model()
    torch.manual_seed(0)
    twin = v.make_model()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), twin.state_dict().values()))
    for step in (0, 1):  # gpt: step 0 dense (K/V longer than Q), step 1 packed varlen
        batch = v.make_batch(step)
        again = v.make_batch(step)
        assert all(torch.equal(batch[k], again[k]) for k in batch)
        assert all(t.device.type == "cpu" for t in batch.values())
        model.zero_grad(set_to_none=True)
        out = model(**{k: batch[k] for k in v.INPUT_KEYS if k in batch})
        loss = v.loss_fn(out, batch)
        assert loss.dim() == 0 and torch.isfinite(loss)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
        assert sum(g.abs().sum() for g in grads) > 0
    assert not torch.equal(v.make_batch(0)[v.INPUT_KEYS[0]], v.make_batch(2)[v.INPUT_KEYS[0]])
