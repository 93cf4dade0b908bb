"""A saved run (``dump.json`` + ``tensors.safetensors``): the dump format is the one thing the child side
(:mod:`.child.recorder` writes it) and the parent side (the comparator, the msprobe export) both know.

``dump.json`` is msprobe's layout (``data``) plus a ``migrate`` section whose ``events`` are
:class:`DumpEvent` records, written and read through :mod:`.records` (cattrs, strict: an unknown or
missing field is a :class:`~.records.RecordError` naming the run)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

    from migrator.ground.jsonfile import JsonObject

DUMP_FILE = "dump.json"

# forward_input/forward_output: a module's (or a recorded API's floating) inputs and outputs; backward: the
# grad of a module output; param_grad: a parameter's reduced grad; loss: the loss; api: an integer API result
# (routing indices); optimizer: an optimizer's update in isolation; training: a parameter's change after k steps
EventKind = Literal["forward_input", "forward_output", "backward", "param_grad", "loss", "api", "optimizer",
                    "training"]


@dataclass(frozen=True, kw_only=True)
class DumpEvent:
    """One recorded tensor of a run, in recording order (``dump.json``: ``migrate.events``)."""

    name: str  # msprobe-style name; the tensor's key in the safetensors file
    match: str  # the class-free key the two sides' tensors are matched by
    kind: EventKind
    module: str  # the module (path) that produced it, ``_root`` for the model itself
    cls: str  # that module's class name (or the API / optimizer name)
    scope: str | None  # the module it is judged in (None: the loss)
    shape: tuple[int, ...] | None = None  # None only for a missing grad
    dtype: str | None = None  # ``torch.float32`` ...; None only for a missing grad
    stats_only: bool = False  # beyond --max-dump-mb: statistics only, no tensor data
    norm: float | None = None  # the L2 norm (what a statistics-only tensor is compared by)
    missing: bool = False  # a parameter whose grad is None after backward


def events_json(events: Iterable[DumpEvent]) -> list[JsonObject]:
    """The events as ``dump.json`` holds them."""
    from .records import to_json

    return [to_json(event) for event in events]


def migrate_section(doc: JsonObject) -> JsonObject:
    """The tool's own section of a ``dump.json`` document (empty when there is none)."""
    section = doc.get("migrate", {})
    return section if isinstance(section, dict) else {}


def read_events(doc: JsonObject, where: str = "dump.json") -> list[DumpEvent]:
    """The events of a ``dump.json`` document (none when it has no ``migrate`` section)."""
    from .records import RecordError, from_json

    raw = migrate_section(doc).get("events", [])
    if not isinstance(raw, list):
        raise RecordError(f"{where}: migrate.events is not a list")
    return [from_json(event, DumpEvent, f"{where}: event {i}") for i, event in enumerate(raw)]


def load_dump(run_dir: str) -> tuple[JsonObject, dict[str, torch.Tensor]]:
    """(dump.json document, {tensor name: tensor}) of a saved run."""
    from safetensors.torch import load_file

    with open(os.path.join(run_dir, DUMP_FILE), encoding="utf-8") as fh:
        doc = json.load(fh)
    tensor_path = os.path.join(run_dir, doc.get("migrate", {}).get("tensor_file", "tensors.safetensors"))
    tensors = load_file(tensor_path) if os.path.exists(tensor_path) else {}
    return doc, tensors
