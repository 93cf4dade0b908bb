import torch
from torch import nn
from torch.distributions import Gamma


class GammaHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        rate = nn.functional.softplus(self.proj(x)) + 1e-3
        return Gamma(torch.full_like(rate, 2.0), rate).log_prob(x)


def make() -> nn.Module:
    return GammaHead()
