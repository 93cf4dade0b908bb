"""An independent ATen recorder for the census tests: ``python independent_recorder.py TREE STEPS``.

Runs the protocol program of TREE the way the census child documents it (CPU, the original
side's reference layers, AdamW unless the program has make_optimizer, bf16 autocast) under a
plain TorchDispatchMode of its own and prints the sorted ATen overloads it saw, as JSON.
"""

import json
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from migrator.validation.child import protocol

seen = set()


class Recorder(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        namespace, name, overload = str(func).split(".") if str(func).count(".") == 2 else (*str(func).split("."), "default")
        if namespace == "aten":
            seen.add(f"aten::{name}" if overload == "default" else f"aten::{name}.{overload}")
        return func(*args, **(kwargs or {}))


def main(tree: str, steps: int) -> None:
    protocol.install_layers("original")
    entry = protocol.load_entry(tree)
    with Recorder():
        torch.manual_seed(0)
        model = entry.make_model()
        model.train()
        optimizer = entry.make_optimizer(model) if entry.make_optimizer else torch.optim.AdamW(model.parameters(), lr=1e-4)
        for step in range(steps):
            batch = entry.batch(step)
            if isinstance(batch, dict):
                keys = entry.input_keys or tuple(batch)
                args, kwargs = (), {k: batch[k] for k in keys if k in batch}
            else:
                args, kwargs = (tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)), {}
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = entry.loss_fn(model(*args, **kwargs), batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    print(json.dumps(sorted(seen)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
