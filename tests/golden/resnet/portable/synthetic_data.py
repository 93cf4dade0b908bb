"""Synthetic 32x32 RGB classification data (CIFAR-10 shaped), deterministic per index."""

import torch
from torch.utils.data import Dataset


class SyntheticImages(Dataset):
    """Class c is a fixed random "prototype" image plus per-sample noise, so it is learnable."""

    def __init__(self, size=50000, num_classes=10, seed=0, noise=0.5):
        self.size, self.num_classes, self.seed, self.noise = size, num_classes, seed, noise
        g = torch.Generator().manual_seed(seed)
        self.prototypes = torch.randn(num_classes, 3, 32, 32, generator=g)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        label = index % self.num_classes
        image = self.prototypes[label] + self.noise * torch.randn(3, 32, 32, generator=g)
        return image, label
