#!/usr/bin/env python3
"""Generate the op-coverage table ``op_coverage/torch_npu-<version>.json``.

Deterministic and offline once the pinned torch-npu wheel is in the cache::

    python op_coverage/generate.py            # downloads the wheel once (pip), then offline
    python op_coverage/generate.py --check    # exit 1 if the committed table is stale

Inputs (every one is pinned by sha256 and recorded in the table header):

* the torch-npu 2.14.0 wheel, read as a zip (never installed, never imported):
  ``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml`` (ATen overloads with an NPU
  kernel, custom-op schemas), ``utils/exposed_api.py`` (public custom ops),
  ``npu/__init__.py`` ``__all__`` and ``contrib/transfer_to_npu.py`` (CUDA -> NPU names),
  ``_op_plugin_docs.py`` (products per custom op), ``optim/*.py`` (fused optimizers);
* torch 2.13.0's ``torchgen/packaged/ATen/native/native_functions.yaml`` and
  ``torch/cuda/__init__.py`` (read as text from the installed torch; torch is not imported);
* the Ascend/pytorch native-API support docs (``pytorch_2-13-0/*.md``) and Ascend/op-plugin
  ``derivatives.yaml`` from the shared data snapshot (``--shared-data``, default
  ``../shared/data`` relative to the repository root), checked against its ``SOURCES.md``.

The table keeps facts only (status per SoC, dtype sets, flags, NPU names, short English
limit summaries); the Chinese documentation prose is never copied. See op_coverage/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the generator shares name helpers with the loader
    sys.path.insert(0, str(REPO_ROOT))

from op_coverage.facts import DEFAULT_WHEEL_CACHE, TORCH_NPU_VERSION, WHEEL_FILE, GenerationError  # noqa: E402
from op_coverage.real_inputs import gather_inputs  # noqa: E402
from op_coverage.table_build import build_table  # noqa: E402
from op_coverage.table_output import dump_table  # noqa: E402


def output_name(version: str = TORCH_NPU_VERSION) -> str:
    return f"torch_npu-{version}.json"


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared-data", default=str(REPO_ROOT.parent / "shared" / "data"),
                        help="shared data snapshot (default: ../shared/data relative to the repository root)")
    parser.add_argument("--wheel", type=Path, help=f"path to {WHEEL_FILE} (default: the wheel cache)")
    parser.add_argument("--wheel-cache", type=Path, default=DEFAULT_WHEEL_CACHE,
                        help="where the pinned wheel is cached/downloaded (default: %(default)s)")
    parser.add_argument("--offline", action="store_true", help="never download; fail if the wheel is not cached")
    parser.add_argument("--native-functions", help="torch native_functions.yaml (default: from the installed torch)")
    parser.add_argument("--torch-cuda-init", help="torch/cuda/__init__.py (default: from the installed torch)")
    parser.add_argument("--allow-unpinned-torch", action="store_true",
                        help="accept torch files whose sha256 differs from the pins (output not reproducible)")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "op_coverage",
                        help=f"where to write {output_name()} (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the table would change")
    args = parser.parse_args(argv)
    try:
        table = build_table(gather_inputs(args))
    except GenerationError as exc:
        print(f"generate.py: error: {exc}", file=sys.stderr)
        return 2
    data = dump_table(table)
    target = args.output_dir / output_name()
    if args.check:
        current = target.read_bytes() if target.is_file() else b""
        if current != data:
            print(f"{target} is stale; run: python op_coverage/generate.py", file=sys.stderr)
            return 1
        print(f"{target} is up to date ({len(data)} bytes)")
        return 0
    write_atomic(target, data)
    print(f"wrote {target} ({len(data)} bytes, {table['counts']['entries']} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
