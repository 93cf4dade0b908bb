"""Write recorded runs in msprobe's own layout, so ``msprobe compare`` and its visualiser can read them.

Layout (numerics.md §1.1, §3.6): ``<DIR>/<run>/step<k>/rank<r>/dump.json`` plus
``dump_tensor_data/<data_name>`` (one ``torch.save``'d tensor per record, loadable with
``torch.load(weights_only=True)``), ``stack.json`` (empty: call stacks are not recorded) and
``construct.json`` (module → parent module). ``<run>`` names the stage, side or variant and dtype
policy, e.g. ``s1-original-fp32``, ``s1-migrated-bf16``, ``s2-ddp-bf16``, ``s2-ref_micro-fp32``.

msprobe matches names exactly; the migrated side's class names differ where the migration swapped a
module (``FusedRMSNorm`` → ``_MigrateRMSNorm``), so compare such pairs with msprobe's fuzzy
matching, or use ``migrate validate``'s own class-free matching. msprobe compares rank i with rank
i in the same dtype only; the ratio-to-golden and N-vs-1 checks are ``migrate validate``'s.
"""

from __future__ import annotations

import json
import os
import re

from migrator.ground import safe_write

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^rank(\d+)$")


def _runs(work: str) -> list[tuple[str, int, int, str]]:
    """(run id, step, rank, folder) for every recorded run under ``work``."""
    found = []
    for folder, _dirs, files in os.walk(work):
        if "dump.json" not in files or "tensors.safetensors" not in files:
            continue
        parts = os.path.relpath(folder, work).split(os.sep)
        step = rank = None
        rest = []
        for p in parts:
            if (m := _STEP.match(p)) and step is None:
                step = int(m.group(1))
            elif (m := _RANK.match(p)) and rank is None:
                rank = int(m.group(1))
            else:
                rest.append(p)
        found.append(("-".join(rest) or "run", step or 0, rank or 0, folder))
    return sorted(found)


def export_run(run_dir: str, dest: str) -> int:
    """Export one recorded run into ``dest`` (= ``.../step<k>/rank<r>``); returns the tensor count."""
    import torch

    from ...dumps import DUMP_FILE, load_dump, read_events

    doc, tensors = load_dump(run_dir)
    data_dir = os.path.join(dest, "dump_tensor_data")
    os.makedirs(data_dir, exist_ok=True)
    count = 0
    for name, tensor in tensors.items():
        torch.save(tensor.clone(), os.path.join(data_dir, f"{name}.pt"))
        count += 1
    out = dict(doc)
    out["dump_data_dir"] = os.path.abspath(data_dir)
    construct: dict[str, str] = {}
    for e in read_events(doc, os.path.join(run_dir, DUMP_FILE)):
        if e.kind.startswith("forward") and e.module and e.scope and e.scope != e.module:
            construct.setdefault(f"Module.{e.module}.{e.cls}.forward", f"Module.{e.scope}")
    safe_write.write_text(os.path.join(dest, "dump.json"), json.dumps(out, indent=1, default=str))
    safe_write.write_text(os.path.join(dest, "stack.json"), json.dumps({}))
    safe_write.write_text(os.path.join(dest, "construct.json"), json.dumps(construct, indent=1))
    return count


def export_tree(work: str, dest: str) -> int:
    """Export every recorded run under ``work``; returns the number of runs written."""
    runs = _runs(work)
    for run_id, step, rank, folder in runs:
        export_run(folder, os.path.join(dest, run_id, f"step{step}", f"rank{rank}"))
    return len(runs)
