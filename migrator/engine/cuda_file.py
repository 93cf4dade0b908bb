"""KERN003 for one `.cu`/`.cuh` file: its `__global__` kernels, each with its size and what is left for it
(from the extension inventory's routes), and the file's minutes as their sum (`engine/extension_facts.py`)."""

from __future__ import annotations

from migrator.engine import cpp_source
from migrator.engine.extension_facts import ExtensionFacts, helper_minutes, kernel_minutes
from migrator.ground.model import EffortNote

MAX_LISTED = 8  # kernels named in the message; the effort counts them all


def cuda_file_note(head: str, text: str, rel: str, facts: ExtensionFacts) -> tuple[str, EffortNote]:
    """The KERN003 message (the rule's text `head`, then the file's kernels) and the file's effort."""
    functions = cpp_source.functions(text)
    kernels = [f for f in functions if f.is_kernel]
    if not kernels:
        lines = sum(f.body_lines for f in functions)
        minutes = helper_minutes(lines)
        return (f"{head}: no `__global__` kernel ({len(functions)} function(s), {lines} body lines: they go with the "
                "kernels that use them)", EffortNote(minutes, f"no kernel: {lines} function-body lines"))
    parts: list[str] = []
    total = 0.0
    for k in kernels:
        route = facts.route(rel, k.name)
        status = route.status if route is not None else "port"
        minutes = kernel_minutes(status, k.body_lines)
        total += minutes
        parts.append(f"`{k.name}` ({k.body_lines} line{'' if k.body_lines == 1 else 's'}, {status}: {minutes:g} min)")
    listed = "; ".join(parts[:MAX_LISTED]) + (f"; and {len(parts) - MAX_LISTED} more" if len(parts) > MAX_LISTED else "")
    why = f"{len(kernels)} kernel(s): " + ", ".join(sorted({p.split(', ')[1].split(':')[0] for p in parts}))
    return f"{head}: {len(kernels)} kernel(s): {listed}", EffortNote(total, why)
