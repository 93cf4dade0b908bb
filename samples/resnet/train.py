"""
ResNet training with Apex AMP, in the style of NVIDIA's apex/examples/imagenet/main_amp.py.

    python train.py --tiny                                             # smoke test
    python train.py -b 256 --opt-level O1                              # one node, nn.DataParallel
    torchrun --nproc_per_node=8 train.py -b 128 --sync_bn              # apex DDP + SyncBatchNorm
"""

import argparse
import os
import time

import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

try:
    from apex import amp
    from apex.parallel import DistributedDataParallel as DDP
    from apex.parallel import convert_syncbn_model
except ImportError:
    raise ImportError("Please install apex from https://www.github.com/nvidia/apex to run this example.")

from resnet import resnet_cifar
from synthetic_data import SyntheticImages


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
        torch.cuda.set_device(args.local_rank)
        dist.init_process_group(backend="nccl", init_method="env://")
        args.world_size = dist.get_world_size()
    cudnn.benchmark = True
    torch.manual_seed(0)

    model = resnet_cifar(args.arch)
    if args.sync_bn:
        model = convert_syncbn_model(model)
    model = model.cuda()

    lr = args.lr * float(args.batch_size * args.world_size) / 256.0
    optimizer = torch.optim.SGD(model.parameters(), lr, momentum=args.momentum, weight_decay=args.weight_decay)
    model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level,
                                      keep_batchnorm_fp32=args.keep_batchnorm_fp32, loss_scale=args.loss_scale)
    if args.distributed:
        # delay_allreduce: one all-reduce after backward instead of overlapping buckets
        model = DDP(model, delay_allreduce=True)
    else:
        model = nn.DataParallel(model)  # single node: split each batch over the visible GPUs
    criterion = nn.CrossEntropyLoss().cuda()

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
        images = images.cuda(non_blocking=True)
        target = target.cuda(non_blocking=True)
        output = model(images)
        loss = criterion(output, target)

        optimizer.zero_grad()
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()

        if i % args.print_freq == 0:
            # .item() syncs; only pay for it when printing
            reduced = loss.detach().clone()
            if args.distributed:
                dist.all_reduce(reduced)
                reduced /= args.world_size
            torch.cuda.synchronize()
            if args.local_rank == 0:
                acc = (output.argmax(1) == target).float().mean().item() * 100
                print(f"Epoch [{epoch}][{i}/{len(loader)}] loss {reduced.item():.4f} | acc {acc:.1f}% | "
                      f"{(time.time() - end) * 1000 / args.print_freq:.0f} ms/it")
            end = time.time()


if __name__ == "__main__":
    main()
