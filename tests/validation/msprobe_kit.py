"""Hand-written mindstudio-probe dumps for the msprobe grading tests: one tensor's record (its statistics, and
its `.pt` file in a tensor dump) and one rank folder's three JSON files, as msprobe 26 writes them."""

from __future__ import annotations

import json
from pathlib import Path

import torch


def tensor_record(t: torch.Tensor, name: str = "", folder: Path | None = None, requires_grad: bool = False) -> dict:
    """A tensor slot of dump.json; with `folder` (a tensor dump's rank folder) its data saved as `name`.pt."""
    t = t.float()
    node = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(t.shape), "Max": float(t.max()),
            "Min": float(t.min()), "Mean": float(t.mean()), "Norm": float(t.norm()), "requires_grad": requires_grad}
    if folder is not None:
        torch.save(t.clone(), folder / "dump_tensor_data" / f"{name}.pt")
        node["data_name"] = f"{name}.pt"
    return node


def write_rank(folder: Path, records: dict, construct: dict | None = None, stack: dict | None = None, *,
               level: str = "mix", task: str = "statistics") -> Path:
    """dump.json, construct.json and stack.json of one step and rank (an empty construct.json as level L1 writes)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dump.json").write_text(json.dumps({"task": task, "level": level, "framework": "pytorch",
                                                  "dump_data_dir": None, "data": records}))
    (folder / "construct.json").write_text(json.dumps(construct or {}))
    (folder / "stack.json").write_text(json.dumps(stack or {}))
    return folder
