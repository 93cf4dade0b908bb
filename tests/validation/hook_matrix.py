"""Every optional protocol hook, absent and present, through every stage's child runner (issue 24 item 1).

Run as ``python -m tests.validation.hook_matrix SIDE ROOT``: one process per side (the reference layers
of one side only), every variant of :data:`VARIANTS` written under ROOT and run through the real child
machinery (``worker.serve``: job file in, status record out) — S1 on ``SIDE``; on the migrated side also
S0 (fake process group), S2 and S3 (a 1-rank gloo group). Prints ``{variant: {stage: status}}`` as JSON.
"""

from __future__ import annotations

import json
import os
import sys

HOOKS = ("INPUT_KEYS", "make_batch_rank", "parallelize", "sync_grads", "make_optimizer", "train_step",
         "make_scaler")

BASE = '''
import torch
import torch.nn.functional as F


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.tanh(self.fc(x)))


def make_model(dropout=0.0):
    return Net()


def loss_fn(out, batch):
    return F.cross_entropy(out.float(), batch["y"])
'''

HOOK_CODE = {
    "INPUT_KEYS": 'INPUT_KEYS = ("x",)\n',
    "make_batch_rank": '''
def make_batch(step, rank, world_size):
    g = torch.Generator().manual_seed(step * world_size + rank)
    return {"x": torch.randn(4, 8, generator=g), "y": torch.randint(0, 4, (4,), generator=g)}
''',
    "parallelize": '''
def parallelize(model, mesh, stage):
    if stage != "dp":
        raise ValueError(f"no {stage} plan")
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, process_group=mesh.get_group())
''',
    "sync_grads": '''
def sync_grads(model, mesh, stage):
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(1.0)
''',
    "make_optimizer": '''
def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3)
''',
    "train_step": '''
def train_step(model, optimizer, loss, scaler):
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
''',
    "make_scaler": '''
def make_scaler():
    return torch.amp.GradScaler("cpu", init_scale=1024.0)
''',
}

PLAIN_BATCH = '''
def make_batch(step):
    g = torch.Generator().manual_seed(step)
    return {"x": torch.randn(4, 8, generator=g), "y": torch.randint(0, 4, (4,), generator=g)}
'''

# INPUT_KEYS absent: the dict batch goes in as keywords, so the forward must take y too
KWARGS_FORWARD = ("    def forward(self, x):\n", "    def forward(self, x, y=None):\n")


# dropout the model applies whatever make_model is told (issue 24 item 4): neutralised in every stage
ALWAYS_DROPOUT = ("        return self.head(torch.tanh(self.fc(x)))\n",
                  "        return self.head(F.dropout(torch.tanh(self.fc(x)), p=0.5, training=self.training))\n")


def variant_hooks(variant: str) -> tuple[str, ...]:
    """``none``, ``all``, ``dropout`` (all, plus dropout that stays on), ``without-<hook>``."""
    if variant == "none":
        return ()
    if variant in ("all", "dropout"):
        return HOOKS
    return tuple(h for h in HOOKS if h != variant.removeprefix("without-"))


VARIANTS = ("none", "all", "dropout", *(f"without-{h}" for h in HOOKS))


def source(hooks: tuple[str, ...], dropout: bool = False) -> str:
    text = BASE.replace(*ALWAYS_DROPOUT) if dropout else BASE
    if "INPUT_KEYS" not in hooks:
        text = text.replace(*KWARGS_FORWARD)
    text += "".join(HOOK_CODE[h] for h in hooks if h != "make_batch_rank")
    text += HOOK_CODE["make_batch_rank"] if "make_batch_rank" in hooks else PLAIN_BATCH
    return text


def _serve(job, name: str) -> dict:
    from migrator.validation import records
    from migrator.validation.child import worker

    path = os.path.join(job.out, f"{name}.job.json")
    records.write(job, path)
    worker.serve(path)
    status_name = "status_rank0.json" if job.KIND == "parallel" else "status.json"
    with open(os.path.join(job.out, status_name), encoding="utf-8") as fh:
        status = json.load(fh)
    error = status.get("error") or {}
    return {"ok": bool(status.get("ok")), "phase": status.get("phase"), "summary": error.get("summary"),
            "harness_frame": error.get("harness_frame"), "train": sorted(status.get("train") or {}),
            "checks": [c.get("status") for c in status.get("checks") or ()],
            "variants": sorted(status.get("variants") or {}), "notes": list(status.get("notes") or ()),
            "dropout": status.get("dropout") or {}}


def run(side: str, root: str) -> dict:
    from migrator.validation.records import ParallelJob, PlanJob, SideJob

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("HOOK_MATRIX_PORT", "29561"),
                      RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    out: dict[str, dict] = {}
    for variant in VARIANTS:
        tree = os.path.join(root, variant, side)
        os.makedirs(tree, exist_ok=True)
        with open(os.path.join(tree, "validate.py"), "w", encoding="utf-8") as fh:
            fh.write(source(variant_hooks(variant), dropout=variant == "dropout"))
        sys.modules.pop("validate", None)  # every variant imports its own validate.py
        shared = os.path.join(root, variant, "shared")
        common = {"tree": tree, "seed": 0, "threads": 1}
        res = {"S1": _serve(SideJob(side=side, shared=shared, out=shared if side == "original" else
                                    os.path.join(root, variant, "s1"), steps=(0,), wait_timeout=60, **common),
                            "side")}
        if side == "migrated":
            res["S0"] = _serve(PlanJob(world_size=2, out=os.path.join(root, variant, "s0"), **common), "plan")
            for sid, variants in (("S2", ("ddp", "fsdp2")), ("S3", ("tp", "ep"))):
                res[sid] = _serve(ParallelJob(stage=sid, variants=variants, steps=(0,),
                                              out=os.path.join(root, variant, sid.lower()), **common), sid)
        out[variant] = res
        sys.path[:] = [p for p in sys.path if p != tree]
    return out


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2])))
