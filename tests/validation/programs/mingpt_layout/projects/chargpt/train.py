"""minGPT's projects/chargpt layout: run as `python projects/chargpt/train.py` once `mingpt` is importable
(`pip install -e .` or PYTHONPATH at the repository root)."""

import torch
import torch.nn.functional as F
from mingpt.model import GPT

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(6):
    idx = torch.randint(0, 32, (4, 8), device=device)
    logits = model(idx)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, 32), idx[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
