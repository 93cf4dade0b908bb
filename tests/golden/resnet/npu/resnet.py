"""
CIFAR-style ResNet (He et al. 2016, section 4.2) with a 2-layer classifier head.

The head's bias + ReLU can run as a fused CUDA kernel (csrc/fused_bias_relu.cu): built ahead of
time with `python setup.py install`, or JIT-compiled with load_inline on first import. Without
nvcc we fall back to plain PyTorch, which computes the same thing.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "fused_bias_relu.cu")


def _load_fused_ext():
    try:
        import fused_bias_relu_cuda  # prebuilt by setup.py

        return fused_bias_relu_cuda
    except ImportError:
        pass
    if os.environ.get("RESNET_JIT_EXT", "1") != "1" or not torch.npu.is_available():
        return None
    try:
        from torch.utils.cpp_extension import load_inline

        with open(_CSRC) as f:
            cuda_src = f.read()
        return load_inline(
            name="fused_bias_relu_jit",
            cpp_sources="torch::Tensor fused_bias_relu_cuda(torch::Tensor x, torch::Tensor bias);",
            cuda_sources=cuda_src,
            functions=["fused_bias_relu_cuda"],
            extra_cuda_cflags=["-O3", "--use_fast_math"],
            verbose=False,
        )
    except Exception as exc:  # no nvcc / CUDA_HOME / host compiler
        print(f"[resnet] fused bias+ReLU kernel unavailable ({type(exc).__name__}: {exc}); using PyTorch fallback")
        return None


_fused_ext = _load_fused_ext()


class _FusedBiasReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias):
        out = _fused_ext.fused_bias_relu_cuda(x, bias)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (out,) = ctx.saved_tensors
        grad_x = grad_out * (out > 0).to(grad_out.dtype)
        return grad_x, grad_x.reshape(-1, grad_x.shape[-1]).sum(0)


def bias_relu(x, bias):
    if _fused_ext is not None and x.is_npu:
        return _FusedBiasReLU.apply(x, bias.to(x.dtype))
    return F.relu(x + bias)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:  # option B: 1x1 projection shortcut
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, num_blocks=(3, 3, 3), widths=(16, 32, 64), head_dim=128, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        layers, in_planes = [], widths[0]
        for i, (n, w) in enumerate(zip(num_blocks, widths)):
            for j in range(n):
                layers.append(BasicBlock(in_planes, w, stride=2 if (i > 0 and j == 0) else 1))
                in_planes = w
        self.layers = nn.Sequential(*layers)
        self.fc1 = nn.Linear(in_planes, head_dim, bias=False)  # bias lives in the fused kernel
        self.fc1_bias = nn.Parameter(torch.zeros(head_dim))
        self.fc2 = nn.Linear(head_dim, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layers(out)
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc2(bias_relu(self.fc1(out), self.fc1_bias))


def resnet_cifar(arch="resnet20", num_classes=10):
    if arch == "resnet-tiny":  # smoke tests: 3 blocks, narrow
        return ResNet((1, 1, 1), (8, 16, 32), head_dim=32, num_classes=num_classes)
    depth = int(arch.replace("resnet", ""))
    n = (depth - 2) // 6
    return ResNet((n, n, n), num_classes=num_classes)
