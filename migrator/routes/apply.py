"""Apply framework routes to a scan result: mark covered / gated / left findings, count what is left.

`--route auto` applies the route of every detected framework (MindSpeed for megatron-core, DeepSpeed's
NPU accelerator, transformers/accelerate); `--route NAME` applies that route even when the framework
was not detected; `--route none` returns the result unchanged. Each finding is taken by the first
route (in that order) with a matching entry; unmatched findings are residual work as before.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from migrator.ground.framework_imports import ImportLines
from migrator.ground.model import Finding, RouteMark, RunResult, finding_counts
from migrator.routes.detect import CANONICAL_LAYOUT, Framework, SourceText, detect, disk_text, overlaid
from migrator.routes.table import ROUTE_NAMES, Cover, Route, best_cover, load_routes, routes_for

ROUTE_FRAMEWORK = {"mindspeed": "megatron-core", "deepspeed": "deepspeed", "hf": "transformers"}
CHOICES = ("auto", "none", *ROUTE_NAMES)


@dataclass(frozen=True)
class FrameworkRoute:
    """One detected framework and what its route does for this scan (JSON: `frameworks[]`)."""

    framework: Framework
    route: Route | None
    note: str  # why no route / version caveats
    covered: int = 0
    gated: int = 0
    left: int = 0
    flags: tuple[str, ...] = ()
    version_confirmed: bool = True
    roles: tuple[str, ...] = ()  # path roles of the framework's evidence files, production first (set by the scan)

    @property
    def covers(self) -> int:
        return self.covered + self.gated

    @property
    def from_production(self) -> bool:
        """Evidenced by production code, or by nothing a role was given to (`--route NAME`): the first screen's."""
        return not self.roles or "production" in self.roles

    def to_dict(self) -> dict:
        data = {
            **self.framework.to_dict(),
            "route": self.route.name if self.route else None,
            "route_title": self.route.title if self.route else None,
            "route_version": self.route.route_version if self.route else None,
            "note": self.note,
            "covered": self.covered,
            "gated": self.gated,
            "left": self.left,
            "flags": list(self.flags),
        }
        if self.roles:
            data["roles"] = list(self.roles)
        if self.route:
            data["upstream"] = self.route.upstream
            data["licence"] = self.route.licence
            data["requirements"] = [r.to_dict() for r in self.route.requirements]
        return data


def scan_files(root: Path, paths: list[Path] | None = None,
               exclude: tuple[str, ...] = ()) -> list[tuple[str, Path, str]]:
    """The scan's own files (its paths, `exclude`, `.gitignore`): a framework elsewhere under the root is
    not this scan's framework."""
    from migrator.engine.discover import Candidate, discover
    from migrator.ground.globs import compile_globs

    spec = compile_globs(exclude)[0] if exclude else None  # as the scan's own discovery (checked with the settings)
    return [(c.rel, c.path, c.kind) for c in discover(root, list(paths or [root]), spec) if isinstance(c, Candidate)]


def _pick(framework: str, version: str | None) -> tuple[Route | None, bool]:
    """The route for this framework/version, and whether the version is known to fit it."""
    fitting = routes_for(framework, version)
    if fitting:
        return fitting[0], version is not None
    return None, True


def choose(frameworks: list[Framework], choice: str) -> list[tuple[Framework, Route | None, bool, str]]:
    picked: list[tuple[Framework, Route | None, bool, str]] = []
    wanted = {ROUTE_FRAMEWORK[choice]} if choice in ROUTE_FRAMEWORK else None
    names = {f.name for f in frameworks}
    if wanted and not wanted & names:  # --route NAME without evidence: apply it anyway, version unknown
        frameworks = [*frameworks, Framework(ROUTE_FRAMEWORK[choice], None, f"--route {choice}", ())]
    notes = {n["framework"]: n["text"] for n in _notes()} if frameworks else {}  # the table read where it is asked
    for fw in frameworks:
        if wanted and fw.name not in wanted:
            picked.append((fw, None, True, f"not applied (--route {choice})"))
            continue
        if fw.lookalike and not wanted:
            layout = CANONICAL_LAYOUT.get(fw.name)
            without = f" without {fw.lookalike}/{layout}" if layout else ""
            picked.append((fw, None, True, f"vendored framework-like code ({fw.lookalike}/{without}), route not "
                                          "applied: its findings stay work to do"))
            continue
        if fw.name in notes:
            picked.append((fw, None, True, notes[fw.name]))
            continue
        route, confirmed = _pick(fw.name, fw.version)
        if route is None:
            ranges = ", ".join(f"{r.title} ({r.framework} {r.framework_versions})" for r in load_routes() if r.framework == fw.name)
            picked.append((fw, None, True, f"no route for {fw.name} {fw.version}; routes exist for: {ranges}"))
        else:
            note = "" if confirmed else f"{fw.name} version unknown: assuming {route.title} ({route.framework_versions})"
            picked.append((fw, route, confirmed, note))
    return picked


def _notes() -> list[dict]:
    import json

    from migrator.ground.resources import data_dir

    return json.loads((data_dir("framework_routes") / "routes.json").read_text(encoding="utf-8")).get("notes", [])


def _mark(route: Route, cover: Cover, how: str, fw: Framework, confirmed: bool) -> RouteMark:
    status, flag, condition = cover.status, cover.flag, cover.condition
    if condition:
        condition = f"{condition} ({fw.version_source})" if confirmed else f"{condition} (version not confirmed)"
        if not confirmed and status == "covered":
            status, flag = "gated", f"pin {cover.condition}"
    note = cover.note
    if how == "module":
        note = f"the route provides this module (`{cover.target}`: {note}); other members are reported on their own"
    elif how == "enclosing":
        note = f"inside `{cover.target}`, which the route replaces ({note})"
    elif cover.gate and status != "gated" and cover.gate != "always":
        condition = condition or cover.gate
    source = f"{route.upstream}: {cover.source}"
    return RouteMark(status=status, route=route.title, target=cover.target, note=note, source=source,
                     flag=flag, condition=condition)


class Enclosing:
    """Dotted name of the definition around a line (`megatron.core.fusions.fused_softmax.ScaledSoftmax.forward`),
    so a finding inside a function or class the route replaces wholesale is covered with it."""

    def __init__(self, root: Path, source: SourceText = disk_text):
        self.root = root
        self.source = source
        self.spans: dict[str, list[tuple[int, int, str]]] = {}

    def _spans(self, rel: str) -> list[tuple[int, int, str]]:
        if rel not in self.spans:
            out: list[tuple[int, int, str]] = []
            try:
                tree = ast.parse(self.source(rel, self.root / rel))
            except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            module = rel[: -len(".py")].replace("/", ".").removesuffix(".__init__")

            def walk(body: list[ast.stmt], prefix: str) -> None:
                for node in body:
                    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        name = f"{prefix}.{node.name}"
                        out.append((node.lineno, node.end_lineno or node.lineno, name))
                        walk(node.body, name)

            if tree is not None:
                walk(tree.body, module)
            self.spans[rel] = out
        return self.spans[rel]

    def names(self, rel: str, line: int) -> list[str]:
        """Innermost first, each with every dotted suffix (a vendored tree may sit under a sub-folder)."""
        if not rel.endswith(".py"):
            return []
        inside = sorted((s for s in self._spans(rel) if s[0] <= line <= s[1]), key=lambda s: s[0] - s[1])
        names: list[str] = []
        for _, _, dotted in inside:
            parts = dotted.split(".")
            names.extend(".".join(parts[i:]) for i in range(len(parts) - 1))
        return names


def _replacing(route: Route) -> dict[str, Cover]:
    """Patch rows that replace (not wrap) their target, by target; the enclosing-definition match uses them."""
    rows: dict[str, Cover] = {}
    for c in route.covers:
        if c.replacement and not c.replacement.endswith(("wrapper", "decorator")) and c.status != "left":
            rows.setdefault(c.target, c)
    return rows


def _module_suffixes(rel: str) -> list[str]:
    parts = rel[: -len(".py")].replace("/", ".").removesuffix(".__init__").split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]


def _parents(rows: dict[str, Cover]) -> frozenset[str]:
    """Every dotted parent of a row's target (`a.b.C` -> `a`, `a.b`): a file whose module is none of
    them holds no replaced definition."""
    return frozenset(".".join(parts[:i]) for t in rows for parts in [t.split(".")] for i in range(1, len(parts)))


def _enclosing_cover(rows: dict[str, Cover], parents: frozenset[str], enclosing: Enclosing,
                     f: Finding) -> tuple[Cover, str] | None:
    """A patch row that replaces the definition the finding sits in (files are parsed only when a row names them)."""
    if not rows or not f.path.endswith(".py"):
        return None
    if parents.isdisjoint(_module_suffixes(f.path)):
        return None
    for name in enclosing.names(f.path, f.line):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):  # the definition itself, then the class around a method
            cover = rows.get(".".join(parts[:i]))
            if cover is not None:
                return cover, "enclosing"
    return None


def apply_routes(result: RunResult, root: Path, choice: str = "auto", paths: list[Path] | None = None,
                 exclude: tuple[str, ...] = (), overlay: Mapping[str, bytes] | None = None,
                 framework_imports: Mapping[str, ImportLines] | None = None,
                 files: Sequence[tuple[str, Path, str]] | None = None) -> RunResult:
    """Each finding a route covers marked, and the routes of the frameworks detected; ``overlay``: the texts a
    scan read instead of the files (`fix --diff`), read here too, so evidence lines and scopes match;
    ``framework_imports``: the import lines the scan found in the files it read (`detect`); ``files``: the
    scan's files as `scan_files` finds them, where the scan has them."""
    if choice == "none":
        return result
    source = overlaid(overlay)
    found = list(files) if files is not None else scan_files(root, paths, exclude)
    frameworks = detect(root, found, source, framework_imports)
    picked = choose(frameworks, choice)
    active = [(fw, route, confirmed) for fw, route, confirmed, _ in picked if route is not None]
    counts: dict[int, dict[str, int]] = {id(r): {"covered": 0, "gated": 0, "left": 0} for _, r, _ in active}
    flags: dict[int, list[str]] = {id(r): [] for _, r, _ in active}
    findings: list[Finding] = []
    enclosing = Enclosing(root, source)
    replacing = {id(route): _replacing(route) if route.patch_table else {} for _, route, _ in active}
    parents = {key: _parents(rows) for key, rows in replacing.items()}
    for f in result.findings:
        for fw, route, confirmed in active:
            hit = best_cover(route, f.symbol, f.path, f.code) or _enclosing_cover(
                replacing[id(route)], parents[id(route)], enclosing, f)
            if hit:
                mark = _mark(route, hit[0], hit[1], fw, confirmed)
                counts[id(route)][mark.status] += 1
                if mark.flag and mark.flag not in flags[id(route)]:
                    flags[id(route)].append(mark.flag)
                f = replace(f, route=mark)
                break
        findings.append(f)
    none = {"covered": 0, "gated": 0, "left": 0}
    routes = tuple(
        FrameworkRoute(fw, route, note, covered=(c := counts[id(route)] if route else none)["covered"], gated=c["gated"],
                       left=c["left"], flags=tuple(flags[id(route)]) if route else (), version_confirmed=confirmed)
        for fw, route, confirmed, note in picked
    )
    counts_now = finding_counts(findings)  # covered findings are not manual work
    summary = replace(result.summary, by_family=counts_now["by_family"], by_severity=counts_now["by_severity"],
                      by_fix_kind=counts_now["by_fix_kind"])
    return replace(result, findings=tuple(findings), summary=summary, frameworks=routes)


def residual(findings: Iterable[Finding]) -> list[Finding]:
    """Findings no route absorbs (left ones included): the work that remains."""
    return [f for f in findings if not (f.route and f.route.absorbs)]
