"""Dump a tiny training step with msprobe's own PrecisionDebugger, four times in one process:
step0 = the original (golden), step1 = a correct port, step2 = a port that slipped (tanh GELU),
step3 = a correct refactor that drops the original's `* 1.0` (every later Tensor.__mul__ counter shifts).

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
        self.unit_scale = True  # the original's no-op multiply

    def forward(self, x):
        h = self.fc1(x)
        if self.unit_scale:
            h = h * 1.0
        hidden = torch.nn.functional.gelu(h, approximate=self.approximate)
        return self.fc2(hidden) * 0.5


def main(out: str, task: str, level: str) -> None:
    config = {"task": task, "dump_path": out, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"]}}
    if task == "statistics":
        config[task]["summary_mode"] = "statistics"
    with open(f"{out}.config.json", "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    debugger = PrecisionDebugger(config_path=f"{out}.config.json")
    for approximate, unit_scale in (("none", True), ("none", True), ("tanh", True), ("none", False)):
        torch.manual_seed(0)
        net = Net()
        net.approximate, net.unit_scale = approximate, unit_scale
        x = torch.randn(64, 8) * 3
        debugger.start(net)
        loss = net(x).pow(2).mean()
        loss.backward()
        debugger.stop()
        debugger.step()


if __name__ == "__main__":
    main(*sys.argv[1:4])
