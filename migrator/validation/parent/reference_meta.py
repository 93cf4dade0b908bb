"""What a `--record`ed reference says about itself (`reference.json` in the archive), and the refusals at
`--compare`: a reference from another program (its digest differs from ORIGINAL here), another torch
release (numerics move between releases), or another archive format."""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata

from migrator import __version__
from migrator.ground import safe_write

from .stage_kit import ValidationSetupError

META_FILE = "reference.json"
FORMAT = 1
_SKIP_DIRS = {"__pycache__", ".git", ".migrate", "node_modules"}


def program_digest(tree: str) -> str:
    """sha256 over the tree's Python files (relative path and content), hidden and cache folders left out."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, "rb") as fh:
                content = hashlib.sha256(fh.read()).hexdigest()
            digest.update(f"{os.path.relpath(path, tree)}\0{content}\n".encode())
    return digest.hexdigest()


def torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def _release(version: str | None) -> str:
    return (version or "").split("+")[0]


def write_meta(shared: str, original: str, device: str | None) -> dict:
    meta = {"format": FORMAT, "program_digest": program_digest(original), "torch": torch_version(),
            "device": device, "migrate": __version__}
    safe_write.write_text(os.path.join(shared, META_FILE), json.dumps(meta, indent=1, sort_keys=True))
    return meta


def check_meta(archive: str, shared: str, original: str, torch_here: str | None = None) -> dict:
    """The reference's meta when it may be compared here; else ValidationSetupError with the reason."""
    path = os.path.join(shared, META_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            meta = json.load(fh)
    except FileNotFoundError:
        raise ValidationSetupError(f"{archive}: no {META_FILE}: recorded by an older migrate; record it again with "
                                   "`migrate validate --record`") from None
    except (OSError, ValueError) as exc:
        raise ValidationSetupError(f"{archive}: {META_FILE} cannot be read ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValidationSetupError(f"{archive}: reference format {meta.get('format') if isinstance(meta, dict) else '?'}"
                                   f", this migrate reads format {FORMAT}: record it again")
    here = program_digest(original)
    if meta.get("program_digest") != here:
        raise ValidationSetupError(f"{archive}: recorded from another program (digest "
                                   f"{str(meta.get('program_digest'))[:12]}, {original} here is {here[:12]}): give "
                                   "the ORIGINAL tree that was recorded, or record this one")
    torch_here = torch_here if torch_here is not None else torch_version()
    if _release(meta.get("torch")) != _release(torch_here):
        raise ValidationSetupError(f"{archive}: recorded with torch {meta.get('torch')}, this side has torch "
                                   f"{torch_here}: numerics differ between torch releases; use torch "
                                   f"{_release(meta.get('torch'))} on both machines")
    return meta
