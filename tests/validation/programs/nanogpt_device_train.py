"""nanoGPT's device and precision choice: `device_type = "cuda" if "cuda" in device else "cpu"`, autocast only on
an accelerator (`nullcontext()` on the CPU), GradScaler for fp16. A test writes the ports from it."""

import argparse
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda")
p.add_argument("--dtype", default="bfloat16")
p.add_argument("--steps", type=int, default=20)
args = p.parse_args()
device = args.device
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.fc = nn.Linear(32, 32)
        self.head = nn.Linear(32, 64)

    def forward(self, x, y):
        h = self.head(F.gelu(self.fc(self.emb(x))))
        return h, F.cross_entropy(h.float().reshape(-1, 64), y.reshape(-1))


torch.manual_seed(1337)
model = Net().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.cuda.amp.GradScaler(enabled=(args.dtype == "float16"))
g = torch.Generator().manual_seed(0)
for _step in range(args.steps):
    x = torch.randint(0, 64, (4, 16), generator=g).to(device)
    with ctx:
        _, loss = model(x[:, :-1], x[:, 1:])
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
