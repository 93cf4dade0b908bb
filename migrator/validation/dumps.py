"""Read a saved run (``dump.json`` + ``tensors.safetensors``): the dump format is the one thing the
child side (:mod:`.child.recorder` writes it) and the parent side (the comparator, the msprobe export)
both know."""

from __future__ import annotations

import json
import os
from typing import Any

DUMP_FILE = "dump.json"


def load_dump(run_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(dump.json document, {tensor name: tensor}) of a saved run."""
    from safetensors.torch import load_file

    with open(os.path.join(run_dir, DUMP_FILE), encoding="utf-8") as fh:
        doc = json.load(fh)
    tensor_path = os.path.join(run_dir, doc.get("migrate", {}).get("tensor_file", "tensors.safetensors"))
    tensors = load_file(tensor_path) if os.path.exists(tensor_path) else {}
    return doc, tensors
