"""The generated torch-npu release matrix (`ascend_env/torch_npu_matrix.json`, see `ascend_env/generate.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from packaging.version import InvalidVersion, Version

from migrator.ground.resources import data_dir


@dataclass(frozen=True)
class Release:
    torch_npu: str
    torch: str
    cann: tuple[str, ...]
    python: tuple[str, ...] = ()


@cache
def releases() -> tuple[Release, ...]:
    table = json.loads((data_dir("ascend_env") / "torch_npu_matrix.json").read_text(encoding="utf-8"))
    return tuple(Release(r["torch_npu"], r["torch"], tuple(r["cann"]), tuple(r.get("python", ())))
                 for r in table["releases"])


def _key(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        return Version("0")


def release_part(version: str) -> str:
    """`2.13.0+cpu` -> `2.13.0`, `2.7.1.post11` -> `2.7.1`."""
    return ".".join(str(p) for p in _key(version).release[:3])


def find(torch_npu: str) -> Release | None:
    return next((r for r in releases() if r.torch_npu == torch_npu), None)


def newest_for_torch(torch: str) -> Release | None:
    """The newest torch-npu release that pins this torch (by release part, so `2.13.0+cpu` counts)."""
    wanted = release_part(torch)
    matching = [r for r in releases() if r.torch == wanted]
    return max(matching, key=lambda r: _key(r.torch_npu)) if matching else None
