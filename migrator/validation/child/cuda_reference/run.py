"""Run an ORIGINAL CUDA training script on CPU: CUDA-library references + device remap.

    python -m migrator.validation.child.cuda_reference.run SCRIPT [--] [ARGS...]
    torchrun --nproc-per-node 2 -m migrator.validation.child.cuda_reference.run SCRIPT -- ARGS

The script runs as ``__main__`` (via ``runpy``) with its directory first on ``sys.path``, like
``python SCRIPT``. One line on stderr says which references and remaps were used, so a log
shows that the run is a CPU emulation, not the real kernels.
"""

from __future__ import annotations

import argparse
import atexit
import os
import runpy
import sys

from . import device_remap, install


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m migrator.validation.child.cuda_reference.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-reference", action="store_true", help="do not install library stand-ins")
    parser.add_argument("--no-remap", action="store_true", help="do not remap CUDA runtime calls to CPU")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args

    used = [] if ns.no_reference else install()
    if not ns.no_remap:
        device_remap.install()
    rank = os.environ.get("RANK", "0")
    if rank == "0":
        print(f"[cuda_reference] references: {', '.join(used) or 'none'}; "
              f"device remap: {'off' if ns.no_remap else 'cuda->cpu'}", file=sys.stderr)

    script = os.path.abspath(ns.script)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(script))
    atexit.register(_end_process_group)  # registered before the script's own handlers: runs after them
    runpy.run_path(script, run_name="__main__")


def _end_process_group() -> None:
    """Destroy a process group the script left open. That is harmless on NCCL (apex's ImageNet example, the resnet
    sample), but on gloo, the CPU stand-in for nccl, its worker threads can abort the interpreter's teardown after
    a run that succeeded ("terminate called without an active exception", exit 134)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    try:
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - the run is over; say why teardown may still fail
        print(f"[cuda_reference] could not destroy the process group at exit: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
