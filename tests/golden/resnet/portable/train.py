"""
ResNet training with Apex AMP, in the style of NVIDIA's apex/examples/imagenet/main_amp.py.

    python train.py --tiny                                             # smoke test
    python train.py -b 256 --opt-level O1                              # one node, nn.DataParallel
    torchrun --nproc_per_node=8 train.py -b 128 --sync_bn              # apex DDP + SyncBatchNorm
"""

import argparse
import contextlib
import os
import time

import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _migrate_runtime import _migrate_backend, _migrate_device, _migrate_device_module
from resnet import resnet_cifar
from synthetic_data import SyntheticImages


def _migrate_amp_initialize(models, optimizers=None, opt_level="O1", loss_scale=None, **ignored):
    """apex.amp.initialize with native mixed precision. Added by ascend-migrate.

    O0 keeps fp32. O1 (Apex's per-op casting) = float16 autocast around each model's forward plus
    dynamic loss scaling starting at 2**16 as in Apex. As Apex does, each optimizer's step is
    wrapped so that a step whose gradients overflowed is skipped. O2/O3 keep fp16 master weights or
    a pure fp16 model, which native AMP does not reproduce: port those by hand.
    """
    if opt_level not in ("O0", "O1"):
        raise NotImplementedError(f"apex opt_level {opt_level!r} has no exact native equivalent; use O1 or port by hand")
    if loss_scale not in (None, "dynamic"):
        raise NotImplementedError("a static apex loss_scale is not ported automatically; use dynamic scaling")
    enabled = opt_level == "O1"
    scaler = _migrate_amp_scaler(enabled)
    for model in models if isinstance(models, (list, tuple)) else [models]:
        if enabled:
            model.forward = torch.autocast(_migrate_amp_device_type(), dtype=torch.float16)(model.forward)
    for optimizer in optimizers if isinstance(optimizers, (list, tuple)) else [optimizers] if optimizers is not None else []:
        optimizer._migrate_scaler = scaler
        optimizer._migrate_skip_step = False
        optimizer.step = _migrate_skipping_step(optimizer, optimizer.step)
    return (models, optimizers) if optimizers is not None else models


def _migrate_skipping_step(optimizer, step):
    """The optimizer step, skipped once after an overflow. Added by ascend-migrate."""

    def wrapped(*args, **kwargs):
        if optimizer._migrate_skip_step:  # gradients overflowed: skip, as Apex does
            optimizer._migrate_skip_step = False
            return None
        return step(*args, **kwargs)

    return wrapped


@contextlib.contextmanager
def _migrate_amp_scale_loss(loss, optimizer):
    """apex.amp.scale_loss: yields the scaled loss; on exit unscales the gradients and decides whether
    the next optimizer step runs (overflow: skipped, scale reduced). Added by ascend-migrate."""
    scaler = optimizer._migrate_scaler
    yield scaler.scale(loss)
    if scaler.is_enabled():
        scaler.unscale_(optimizer)
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        optimizer._migrate_skip_step = not all(bool(torch.isfinite(g).all()) for g in grads)
        scaler.update()


def _migrate_amp_scaler(enabled):
    """Apex's dynamic loss scaling (initial scale 2**16) on this process's device. Added by ascend-migrate."""
    return torch.amp.GradScaler(_migrate_device().type, init_scale=2.0**16, enabled=enabled)


def _migrate_amp_device_type():
    """The device type the loss scaler works on. Added by ascend-migrate."""
    return _migrate_device().type


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="resnet20")
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("-b", "--batch-size", type=int, default=256, help="per process")
    p.add_argument("--lr", type=float, default=0.1, help="for a global batch of 256, scaled linearly")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("-j", "--workers", type=int, default=4)
    p.add_argument("--print-freq", type=int, default=10)
    p.add_argument("--opt-level", type=str, default="O1")
    p.add_argument("--keep-batchnorm-fp32", type=str, default=None)
    p.add_argument("--loss-scale", type=str, default=None)
    p.add_argument("--sync_bn", action="store_true", help="synchronize BN statistics across processes")
    p.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    p.add_argument("--tiny", action="store_true", help="tiny ResNet, one short epoch: a smoke test")
    args = p.parse_args()
    if args.tiny:
        args.arch, args.epochs, args.batch_size, args.workers, args.print_freq = "resnet-tiny", 1, 16, 0, 1
        args.lr = 0.4  # = 0.025 at batch 16 after linear scaling
    return args


def main():
    args = parse()
    args.distributed = int(os.environ.get("WORLD_SIZE", 1)) > 1
    args.world_size = 1
    if args.distributed:
        _migrate_device_module().set_device(args.local_rank)
        dist.init_process_group(backend=_migrate_backend(), init_method="env://")
        args.world_size = dist.get_world_size()
    cudnn.benchmark = True
    torch.manual_seed(0)

    model = resnet_cifar(args.arch)
    if args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(_migrate_device())

    lr = args.lr * float(args.batch_size * args.world_size) / 256.0
    optimizer = torch.optim.SGD(model.parameters(), lr, momentum=args.momentum, weight_decay=args.weight_decay)
    model, optimizer = _migrate_amp_initialize(model, optimizer, opt_level=args.opt_level,
                                      loss_scale=args.loss_scale)
    if args.distributed:
        # delay_allreduce: one all-reduce after backward instead of overlapping buckets
        model = nn.parallel.DistributedDataParallel(model)
    else:
        model = nn.DataParallel(model)  # single node: split each batch over the visible GPUs
    criterion = nn.CrossEntropyLoss().to(_migrate_device())

    dataset = SyntheticImages(size=8 * args.batch_size if args.tiny else 50000)
    sampler = DistributedSampler(dataset) if args.distributed else None
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler,
                        num_workers=args.workers, pin_memory=True, drop_last=True)

    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        train(loader, model, criterion, optimizer, epoch, args)


def train(loader, model, criterion, optimizer, epoch, args):
    model.train()
    end = time.time()
    for i, (images, target) in enumerate(loader):
        images = images.to(_migrate_device(), non_blocking=True)
        target = target.to(_migrate_device(), non_blocking=True)
        output = model(images)
        loss = criterion(output, target)

        optimizer.zero_grad()
        with _migrate_amp_scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()

        if i % args.print_freq == 0:
            # .item() syncs; only pay for it when printing
            reduced = loss.detach().clone()
            if args.distributed:
                dist.all_reduce(reduced)
                reduced /= args.world_size
            _migrate_device_module().synchronize()
            if args.local_rank == 0:
                acc = (output.argmax(1) == target).float().mean().item() * 100
                print(f"Epoch [{epoch}][{i}/{len(loader)}] loss {reduced.item():.4f} | acc {acc:.1f}% | "
                      f"{(time.time() - end) * 1000 / args.print_freq:.0f} ms/it")
            end = time.time()


if __name__ == "__main__":
    main()
