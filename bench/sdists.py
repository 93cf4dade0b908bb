"""Pinned third-party sdists for the benchmarks: download from PyPI, check the sha256, unpack once.

Shared by `scan_bench.py`, `fix_scaling.py` and `real_repos.py`. Everything lands in a cache folder
outside the repository (`$MIGRATE_BENCH_CACHE`, default `~/.cache/ascend-migrate-bench`):
`<cache>/sdist/<file>` and `<cache>/src/<file without .tar.gz>/`. Nothing is ever committed.

The file's address comes from PyPI's simple index (PEP 691 JSON), the file itself from PyPI's file
host; nothing is built or installed (an sdist's `setup.py` may import torch or need CUDA, so
`pip download`, which prepares metadata, cannot fetch all of them). A digest that differs from the
pinned one is refused, for a fresh download and for a cached file alike.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from migrator.ground.safe_write import write_bytes

INDEX = "https://pypi.org/simple/{name}/"
TIMEOUT_S = 60


class BenchError(Exception):
    """A benchmark cannot run (download, digest, unpack): the caller exits 2 with the message."""


class IndexUnreachable(BenchError):
    """PyPI could not be reached (no network, proxy refused): tests skip on this."""


@dataclass(frozen=True)
class Pin:
    name: str  # the PyPI project
    version: str
    filename: str  # the sdist, as PyPI lists it
    sha256: str  # the digest PyPI publishes for that file

    @property
    def tree_name(self) -> str:
        return self.filename.removesuffix(".tar.gz")


def default_cache() -> Path:
    env = os.environ.get("MIGRATE_BENCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ascend-migrate-bench"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _open(url: str, accept: str | None = None):
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # noqa: S310 - fixed https addresses
    except OSError as exc:  # URLError, timeouts, refused connections
        raise IndexUnreachable(f"cannot reach {url}: {exc}") from exc


def _file_url(pin: Pin) -> str:
    with _open(INDEX.format(name=pin.name), "application/vnd.pypi.simple.v1+json") as response:
        index = json.load(response)
    for entry in index.get("files", []):
        if entry.get("filename") == pin.filename:
            published = entry.get("hashes", {}).get("sha256")
            if published != pin.sha256:
                raise BenchError(f"PyPI lists {pin.filename} with sha256 {published}, not the pinned {pin.sha256}")
            return entry["url"]
    raise BenchError(f"PyPI does not list {pin.filename} for {pin.name}")


def fetch(pin: Pin, cache: Path, log=lambda message: None) -> Path:
    """The verified sdist in `cache/sdist/`, downloaded when missing."""
    folder = cache / "sdist"
    target = folder / pin.filename
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        url = _file_url(pin)
        log(f"downloading {pin.filename} ...")
        with _open(url) as response:
            data = response.read()  # an sdist is a few MB: checked whole, then written atomically
        digest = hashlib.sha256(data).hexdigest()
        if digest != pin.sha256:
            raise BenchError(f"refusing {pin.filename}: sha256 {digest} != pinned {pin.sha256}")
        write_bytes(target, data)
    digest = sha256_of(target)
    if digest != pin.sha256:
        raise BenchError(f"refusing {target}: sha256 {digest} != pinned {pin.sha256} (delete the file to download it again)")
    return target


def _safe_members(tar: tarfile.TarFile, dest: Path):
    real = dest.resolve()
    for member in tar.getmembers():
        if not (member.isfile() or member.isdir()):
            continue  # no links, devices or fifos from an archive
        path = (dest / member.name).resolve()
        if path != real and real not in path.parents:
            raise BenchError(f"refusing archive member outside the target folder: {member.name}")
        yield member


def unpack(pin: Pin, sdist: Path, cache: Path, log=lambda message: None) -> Path:
    """Unpack once into `cache/src/<name>`; a stamp file records the digest it came from."""
    dest = cache / "src"
    tree = dest / pin.tree_name
    stamp = tree / ".bench-unpacked"
    if stamp.is_file() and stamp.read_text().strip() == pin.sha256:
        return tree
    if tree.exists():
        shutil.rmtree(tree)
    dest.mkdir(parents=True, exist_ok=True)
    log(f"unpacking {sdist.name} ...")
    with tarfile.open(sdist, "r:gz") as tar:
        members = list(_safe_members(tar, dest))
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, members=members, **kwargs)
    if not tree.is_dir():
        raise BenchError(f"unexpected sdist layout: {tree} missing after unpacking {sdist.name}")
    stamp.write_text(pin.sha256 + "\n")
    return tree


def fetch_tree(pin: Pin, cache: Path | None = None, log=lambda message: None) -> Path:
    """Download (when missing), verify and unpack `pin`; the unpacked tree (read it, never edit it)."""
    cache = (cache or default_cache()).absolute()
    cache.mkdir(parents=True, exist_ok=True)
    return unpack(pin, fetch(pin, cache, log), cache, log)
