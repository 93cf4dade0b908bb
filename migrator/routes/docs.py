"""`migrate rule mindspeed|deepspeed|hf`: what a route covers, what it leaves, what the user adds, and the sources."""

from __future__ import annotations

from collections import Counter

from migrator.routes.table import Route, load_routes


def route_markdown(name: str) -> str:
    routes = [r for r in load_routes() if r.name == name]
    return "".join(_one(r) for r in routes)


def _one(route: Route) -> str:
    counts = Counter(c.status for c in route.covers)
    out = [
        f"# Route `{route.name}`: {route.framework} {route.framework_versions} → {route.title}\n\n",
        f"Facts read from {route.upstream} (licence {route.licence})"
        + (f"; patch rows from the shared table `{route.patch_table}`" if route.patch_table else "") + ".\n\n",
        f"Entries: {counts['covered']} covered always, {counts['gated']} only with a flag, "
        f"{counts['left']} left (placeholders, stubs or ops without an NPU build).\n\n",
        "A finding matches an entry by its qualified symbol: exact, inside the target (`target.x`), the module "
        "that holds the target (the route makes it importable), the file path, or the definition the finding sits "
        "in when the route replaces that definition outright (not for `*_wrapper`/`*_decorator` patches).\n\n",
        "## What you add\n\n",
    ]
    out += [f"* **{r.kind}**: `{r.text}` — {r.where} (source: {r.source})\n" for r in route.requirements]
    for status, title in (("covered", "Covered"), ("gated", "Covered only with a flag"), ("left", "Left to you")):
        rows = [c for c in route.covers if c.status == status]
        if not rows:
            continue
        out.append(f"\n## {title}\n\n| target | match | flag / condition | note | source |\n|---|---|---|---|---|\n")
        for c in rows:
            cond = c.flag or c.condition or ("" if c.gate in (None, "always") else c.gate)
            out.append(f"| `{c.target}` | {c.match} | {cond} | {c.note} | {c.source} |\n")
    return "".join(out) + "\n"
