"""The CUDA extension inventory (KERN021, KERN003 per kernel) on real repositories from pinned PyPI sdists.

    python bench/extension_inventory.py [--cache DIR] [NAME ...]

Per repository: extensions (how many with sources read statically, how many partial), `__global__` kernels,
bindings (how many reach a kernel through the C++ calls), KERN021 call sites found (and distinct bindings
called), bindings with a known equivalent / a reference, and the KERN003 effort by kernel against the old
flat 8 h per `.cu`/`.cuh` file. Downloads go to the cache outside the repository (`bench/sdists.py`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.real_repos import PACKAGES  # noqa: E402
from bench.sdists import BenchError, Pin, fetch_tree  # noqa: E402

# Digests as PyPI publishes them (https://pypi.org/simple/<name>/, PEP 691 JSON), pinned 2026-12-02.
PINS: dict[str, Pin] = {
    "mmcv": Pin("mmcv", "2.2.0", "mmcv-2.2.0.tar.gz",
                "ac479247e808d8802f89eadf04d4118de86bdfe81361ec5aed0cc1bf731c67c9"),
    "mamba-ssm": Pin("mamba-ssm", "2.3.2.post1", "mamba_ssm-2.3.2.post1.tar.gz",
                     "104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028"),
    "causal-conv1d": Pin("causal-conv1d", "1.6.1", "causal_conv1d-1.6.1.tar.gz",
                         "e4a697ec2db3906f012e675125569f8b510b4559bc53e3095143d91369e1221b"),
    "fairseq": PACKAGES["fairseq"].pin,
    "flash-attn": PACKAGES["flash-attn"].pin,
}
OLD_FLAT_MINUTES = 480.0  # KERN003 before: one flat figure per .cu/.cuh file
VENDORED = {"cutlass", "cub", "thrust", "third_party", "third-party", "3rdparty"}


def measure(tree: Path) -> dict[str, object]:
    from migrator import api
    from migrator.engine.extension_inventory import build
    from migrator.reporters import effort

    started = time.process_time()  # CPU seconds: wall time on a shared machine says little
    python_files = [p.relative_to(tree).as_posix() for p in tree.rglob("*.py") if p.is_file()]
    inventory = build(tree, python_files)
    inventory_s = time.process_time() - started
    result = api.scan([tree], root=tree, use_cache=False)
    calls = [f for f in result.findings if f.code == "KERN021"]
    cu_actions = [a for a in effort.actions(result.findings) if a.code == "KERN003"]
    own = [a for a in cu_actions if VENDORED.isdisjoint(a.first.path.split("/"))]
    bindings = [b for e in inventory.extensions for b in e.bindings]
    return {
        "extensions": len(inventory.extensions),
        "cuda_extensions": sum(1 for e in inventory.extensions if e.cuda),
        "partial_sources": sum(1 for e in inventory.extensions if e.decl.partial),
        "kernels": sum(len(e.kernels) for e in inventory.extensions),
        "bindings": len(bindings),
        "bindings_reaching_kernels": sum(1 for b in bindings if b.kernels),
        "call_sites": len(calls),
        "bindings_called": len({f.symbol for f in calls}),
        "known_equivalents": sorted({f"{b.name}->{b.known.kernel}" for b in bindings if b.known}),
        "references": sum(1 for b in bindings if b.reference),
        "cuda_files": len(cu_actions),
        "kernel_minutes": sum(a.minutes for a in cu_actions),
        "flat_minutes": OLD_FLAT_MINUTES * len(cu_actions),
        "own_cuda_files": len(own),  # outside vendored libraries (cutlass...): the repository's own kernels
        "own_kernel_minutes": sum(a.minutes for a in own),
        "own_flat_minutes": OLD_FLAT_MINUTES * len(own),
        "inventory_cpu_s": round(inventory_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(PINS), help=f"repositories (default: {', '.join(PINS)})")
    parser.add_argument("--cache", type=Path, default=None, help="sdist cache (default: bench/sdists.py's)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in PINS]
    if unknown:
        parser.error(f"unknown repository {', '.join(unknown)}; known: {', '.join(PINS)}")
    for name in args.names:
        pin = PINS[name]
        try:
            tree = fetch_tree(pin, args.cache, log=lambda m: print(m, file=sys.stderr))
        except BenchError as exc:
            print(f"extension_inventory: {exc}", file=sys.stderr)
            return 2
        row = measure(tree)
        known = row.pop("known_equivalents")
        print(f"{pin.name} {pin.version}: " + ", ".join(f"{k} {v}" for k, v in row.items()))
        print(f"  known: {', '.join(known) if known else 'none'}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
