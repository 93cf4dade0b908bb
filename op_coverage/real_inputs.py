"""Gather the real inputs: the pinned wheel (pip download, sha256), the installed torch's files (read as
text) and the shared data snapshot checked against its `SOURCES.md`."""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from op_coverage.facts import (
    DERIVATIVES_FILE,
    DOCS_DIR,
    NATIVE_FUNCTIONS_REL,
    TORCH_CUDA_INIT_REL,
    TORCH_NPU_VERSION,
    TORCH_PINNED_SHA256,
    TORCH_VERSION,
    WHEEL_CODEGEN,
    WHEEL_EXPOSED,
    WHEEL_FILE,
    WHEEL_NPU_INIT,
    WHEEL_OP_DOCS,
    WHEEL_OPTIM_INIT,
    WHEEL_PIP_ARGS,
    WHEEL_SHA256,
    WHEEL_TRANSFER,
    GenerationError,
    sha256_bytes,
    sha256_file,
)
from op_coverage.table_inputs import Inputs
from op_coverage.wheel_sources import parse_sources_md


def ensure_wheel(wheel: Path | None, cache_dir: Path, offline: bool) -> Path:
    """The pinned wheel, downloaded with pip into ``cache_dir`` if needed; sha256 verified."""
    path = wheel or cache_dir / WHEEL_FILE
    if not path.is_file():
        if wheel is not None or offline:
            raise GenerationError(
                f"torch-npu wheel not found at {path}; run without --offline to download it, or "
                f"`pip download --no-deps torch-npu=={TORCH_NPU_VERSION} -d {cache_dir}`"
            )
        cache_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "-d", str(cache_dir), *WHEEL_PIP_ARGS]
        print("downloading:", " ".join(cmd), file=sys.stderr)
        result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0 or not path.is_file():
            raise GenerationError(f"pip download of torch-npu=={TORCH_NPU_VERSION} failed:\n{result.stdout[-2000:]}")
    digest = sha256_file(path)
    if digest != WHEEL_SHA256:
        raise GenerationError(
            f"{path}: sha256 {digest} does not match the pinned {WHEEL_SHA256} "
            f"({WHEEL_FILE}); refusing to use it. Delete the file and download it again."
        )
    return path


def read_wheel(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(member -> text, member -> sha256) for the members the generator needs. Zip read only."""
    wanted_prefixes = ("torch_npu/optim/", "torch_npu/npu/")
    wanted = {WHEEL_CODEGEN, WHEEL_EXPOSED, WHEEL_NPU_INIT, WHEEL_TRANSFER, WHEEL_OP_DOCS, WHEEL_OPTIM_INIT}
    texts: dict[str, str] = {}
    shas: dict[str, str] = {}
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        missing = sorted(wanted - names)
        if missing:
            raise GenerationError(f"{path.name} lacks {', '.join(missing)}")
        for name in sorted(names):
            if name in wanted or (name.startswith(wanted_prefixes) and name.endswith(".py")):
                data = zf.read(name)
                texts[name] = data.decode("utf-8")
                if name in wanted:
                    shas[name] = sha256_bytes(data)
    return texts, shas


def find_torch_file(rel: str) -> Path:
    """A file of the installed torch distribution, located without importing torch."""
    import importlib.util

    top = rel.split("/", 1)[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise GenerationError(f"cannot locate the installed '{top}' package (pip install torch=={TORCH_VERSION})")
    root = Path(list(spec.submodule_search_locations)[0]).parent
    path = root / rel
    if not path.is_file():
        raise GenerationError(f"{path} not found in the installed torch")
    return path


def installed_torch_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def gather_inputs(args: argparse.Namespace) -> Inputs:
    wheel_path = ensure_wheel(args.wheel, args.wheel_cache, args.offline)
    wheel, wheel_shas = read_wheel(wheel_path)
    torch_files, torch_meta = _torch_files(args)
    torch_version = installed_torch_version() if not args.native_functions else None
    snapshot = _shared_snapshot(Path(args.shared_data))
    meta = {
        "torch_npu_wheel": {
            "package": "torch-npu",
            "version": TORCH_NPU_VERSION,
            "file": WHEEL_FILE,
            "sha256": WHEEL_SHA256,
            "licence": "BSD-3-Clause",
            "members_sha256": dict(sorted(wheel_shas.items())),
        },
        "torch": {
            "package": "torch",
            "version": TORCH_VERSION,
            "files_sha256": dict(sorted(torch_meta.items())),
            "licence": "BSD-3-Clause",
            "note": "torch-npu 2.14.0's kernel list (codegen yaml) is byte-identical to 2.13.0's; the docs snapshot is for PyTorch 2.13",
        },
        **snapshot.meta,
    }
    if torch_version is not None and torch_version.split("+")[0] != TORCH_VERSION and not args.allow_unpinned_torch:
        raise GenerationError(f"installed torch is {torch_version}, the table is pinned to torch {TORCH_VERSION}")
    return Inputs(
        wheel=wheel,
        native_functions=torch_files[NATIVE_FUNCTIONS_REL],
        torch_cuda_init=torch_files[TORCH_CUDA_INIT_REL],
        docs=snapshot.docs,
        derivatives=snapshot.derivatives,
        meta=meta,
        docs_commit=snapshot.docs_commit,
        op_plugin_commit=snapshot.op_plugin_commit,
    )


def _torch_files(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str]]:
    """(rel -> text, rel -> sha256) of the pinned torch files, refused when their digest differs."""
    torch_files = {}
    torch_meta = {}
    overrides = {NATIVE_FUNCTIONS_REL: args.native_functions, TORCH_CUDA_INIT_REL: args.torch_cuda_init}
    for rel, override in overrides.items():
        path = Path(override) if override else find_torch_file(rel)
        data = path.read_bytes()
        digest = sha256_bytes(data)
        pinned = TORCH_PINNED_SHA256[rel]
        if digest != pinned and not args.allow_unpinned_torch:
            raise GenerationError(
                f"{path}: sha256 {digest} differs from the pinned torch {TORCH_VERSION} file ({pinned}). "
                f"Use a torch {TORCH_VERSION} install (or pass --native-functions/--torch-cuda-init), "
                "or --allow-unpinned-torch to build a non-reproducible table."
            )
        torch_files[rel] = data.decode("utf-8")
        torch_meta[rel] = digest
    return torch_files, torch_meta


@dataclass(frozen=True)
class _Snapshot:
    docs: dict[str, str]
    derivatives: str
    docs_commit: str
    op_plugin_commit: str
    meta: dict  # the header's "inputs" sections for the docs and derivatives


def _shared_snapshot(shared: Path) -> _Snapshot:
    """The docs and derivatives.yaml of the shared data folder, each checked against its SOURCES.md."""
    sources_md = shared / "SOURCES.md"
    if not sources_md.is_file():
        raise GenerationError(f"{sources_md} not found; pass --shared-data pointing at the shared data snapshot")
    sources = parse_sources_md(sources_md.read_text(encoding="utf-8"))

    def verified(rel: str) -> str:
        path = shared / rel
        if not path.is_file():
            raise GenerationError(f"{path} not found in the shared data snapshot")
        data = path.read_bytes()
        row = sources.get(rel)
        if row is None:
            raise GenerationError(f"{rel} is not listed in {sources_md}")
        if sha256_bytes(data) != row["sha256"]:
            raise GenerationError(f"{path}: sha256 differs from {sources_md}; the snapshot was modified")
        return data.decode("utf-8")

    docs_dir = shared / DOCS_DIR
    doc_files = sorted(p.name for p in docs_dir.glob("*.md"))
    if not doc_files:
        raise GenerationError(f"no *.md files in {docs_dir}")
    docs = {name: verified(f"{DOCS_DIR}/{name}") for name in doc_files}
    tree = hashlib.sha256()
    for name in doc_files:
        tree.update(f"{name}\0{sources[f'{DOCS_DIR}/{name}']['sha256']}\n".encode())
    derivatives = verified(DERIVATIVES_FILE)
    docs_commit = sources[f"{DOCS_DIR}/{doc_files[0]}"]["commit"]
    op_plugin_commit = sources[DERIVATIVES_FILE]["commit"]
    meta = {
        "ascend_pytorch_docs": {
            "repository": "Ascend/pytorch",
            "commit": docs_commit,
            "path": "docs/zh/api/native_api/pytorch_2-13-0",
            "files": len(doc_files),
            "files_sha256_digest": tree.hexdigest(),
            "licence": "CC BY 4.0",
        },
        "op_plugin_derivatives": {
            "repository": "Ascend/op-plugin",
            "commit": op_plugin_commit,
            "path": "op_plugin/config/derivatives.yaml",
            "sha256": sources[DERIVATIVES_FILE]["sha256"],
            "licence": "BSD-3-Clause",
            "version_key": "v" + ".".join(TORCH_NPU_VERSION.split(".")[:2]),
        },
    }
    return _Snapshot(docs, derivatives, docs_commit, op_plugin_commit, meta)
