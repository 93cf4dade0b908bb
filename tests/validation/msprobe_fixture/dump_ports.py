"""Dump a tiny training step with msprobe's own PrecisionDebugger, three times in one process:
step0 = the original (golden), step1 = a correct port, step2 = a port that slipped (tanh GELU).

    python dump_ports.py OUT TASK LEVEL        # TASK: statistics | tensor, LEVEL: L0 | L1 | mix
"""

import json
import sys

import torch
from msprobe.pytorch import PrecisionDebugger


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.approximate = "none"

    def forward(self, x):
        hidden = torch.nn.functional.gelu(self.fc1(x), approximate=self.approximate)
        return self.fc2(hidden)


def main(out: str, task: str, level: str) -> None:
    config = {"task": task, "dump_path": out, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"]}}
    if task == "statistics":
        config[task]["summary_mode"] = "statistics"
    with open(f"{out}.config.json", "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    debugger = PrecisionDebugger(config_path=f"{out}.config.json")
    for approximate in ("none", "none", "tanh"):
        torch.manual_seed(0)
        net = Net()
        net.approximate = approximate
        x = torch.randn(64, 8) * 3
        debugger.start(net)
        loss = net(x).pow(2).mean()
        loss.backward()
        debugger.stop()
        debugger.step()


if __name__ == "__main__":
    main(*sys.argv[1:4])
