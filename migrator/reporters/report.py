"""The reviewer report (`migrate report`): one self-contained HTML page or one Markdown document.

Pure functions of a `migrator.reporters.report_data.ReportData`: `build_context()` turns it into plain data,
jinja2 templates in `migrator/reporters/templates/` render it (HTML autoescaped; inline CSS and
JS, no network; a Content-Security-Policy pins the one script by hash). The Markdown version is
sized for a GitHub PR comment: it drops per-file sections (with a note) until it fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2
    from markdown_it import MarkdownIt

    from migrator.catalogue.loader import Catalogue

import base64
import hashlib
import re
from collections import defaultdict
from functools import lru_cache
from typing import Any

from markupsafe import Markup

from migrator.ground.markdown_text import fence, md_cell, md_code, quote_md, shift_headings
from migrator.ground.model import FAMILIES, CoverageSummary, Finding, OpSummary
from migrator.ground.path_roles import convention_role, role_rank
from migrator.reporters import effort
from migrator.reporters.actions import advice_groups as _advice_groups
from migrator.reporters.actions import manual_groups as _manual_groups
from migrator.reporters.actions import note_groups as _note_groups
from migrator.reporters.actions import optional_imports as _optional_imports
from migrator.reporters.census import annotate_ops
from migrator.reporters.excerpts import _clip_diff, _diff_rows, _excerpt_text, _file_excerpt, _row_key, _summarise_notes
from migrator.reporters.highlight import highlight_block, language, visible
from migrator.reporters.report_data import ReportData
from migrator.reporters.report_paths import breakable, scrub_root, shown_path
from migrator.reporters.routes import headlines as route_headlines
from migrator.reporters.routes import later_headlines
from migrator.reporters.site_progress import SiteProgress, site_progress
from migrator.reporters.validation_view import build as validation_view

FORMATS = ("html", "md")
EXTENSIONS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}
GITHUB_COMMENT_LIMIT = 65536
MAX_ROUTE_ROWS = 300  # findings a framework route handles, listed with the patch row that covers each
MARKDOWN_BUDGET = 64000  # characters, leaving room for a bot's own header
OP_STATUS_ORDER = ("unsupported", "cpu_fallback", "partial", "unverified", "supported")  # worst first
SHOWN_OP_SITES = 3  # call sites listed per op; the rest are counted
SHOWN_SITES = 3  # sites of a manual action or an advice shown before "… and N more" (HTML: the rest folded)
MD_SITES = 10  # the same in Markdown, where the rest is left out (every site is in `scan --format json`)
MD_OPS = 60  # op rows in Markdown (the HTML and `scan --format json` list every op)
MD_EDITS = 100  # applied-edit rows in Markdown (the fix record lists every edit)


def format_for(path: str | None, fmt: str | None) -> str | None:
    if fmt:
        return fmt
    if not path or path == "-":
        return None
    for ext, name in EXTENSIONS.items():
        if path.lower().endswith(ext):
            return name
    return None


def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "highlight": highlight_block}).enable("table")


def md_to_html(text: str) -> Markup:
    """Markdown from the catalogue or a validation file; raw HTML in it is shown as text."""
    return Markup(_markdown().render(visible(text)))


def md_inline_html(text: str) -> Markup:
    return Markup(_markdown().renderInline(visible(text)))


def _first_sentence(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    first = m.group(1) if m else text
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _rule_anchor(code: str) -> str:
    return f"rule-{code.lower()}"


def _ops(coverage: CoverageSummary | None) -> tuple[list[dict[str, Any]] | None, dict[str, int]]:
    """The op-coverage table's rows, worst status first, and the count per status."""
    if coverage is None:
        return None, {}
    ops = sorted(coverage.ops, key=lambda op: (OP_STATUS_ORDER.index(op.status), op.name))
    return [_op_row(op) for op in ops], dict(coverage.by_status)


def _op_row(op: OpSummary) -> dict[str, Any]:
    shown = list(op.sites[:SHOWN_OP_SITES])
    return {"name": op.name, "status": op.status, "dtypes": ", ".join(op.dtypes), "npu_name": op.npu_name or op.runs_as,
            "why": op.why, "count": op.count, "sites": shown, "more_sites": op.count - len(shown)}


def _files(data: ReportData, findings: list[Finding]) -> tuple[list[dict[str, Any]], dict[str, int], set[tuple[str, int | None, int]]]:
    """Every file with a finding or a diff, production code first (then scripts, examples, tests, docs), in
    path order within a role; its index by path; the (path, cell, line) shown in an excerpt."""
    roles = {f.path: effort.role(f) for f in findings}
    paths = sorted({f.path for f in findings} | set(data.diffs or {}),
                   key=lambda p: (role_rank(roles.get(p) or convention_role(p)), p))
    file_index = {p: i for i, p in enumerate(paths)}
    per_file: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        per_file[f.path].append(f)
    files: list[dict[str, Any]] = []
    for p in paths:
        lang = language(p)
        fs = per_file.get(p, [])
        diff = (data.diffs or {}).get(p)
        notes: list[str] = []
        diff_lines = _clip_diff(diff, notes) if diff else None
        files.append(
            {
                "path": p,
                "index": file_index[p],
                "anchor": f"file-{file_index[p]}",
                "lang": lang,
                "findings": fs,
                "manual": sum(1 for f in fs if effort.kind(f) == "action"),
                "diff": _diff_rows(diff_lines, lang) if diff_lines else None,
                "diff_text": visible("\n".join(diff_lines)) if diff_lines else None,
                "excerpt": None if diff else _file_excerpt(data.sources.get(p), data.cells.get(p), fs, lang, notes),
                "capped": _summarise_notes(notes),
            }
        )
    for entry in files:
        entry["excerpt_text"] = _excerpt_text(entry["excerpt"])
    shown: set[tuple[str, int | None, int]] = set()
    for entry in files:
        placed = {(block.get("cell"), row["no"]) for block in entry["excerpt"] or [] for row in block["rows"]}
        shown |= {(entry["path"], cell, n) for cell, n in placed}
        entry["unplaced"] = [f for f in entry["findings"] if (f.cell, f.line) not in placed]
    return files, file_index, shown


def _families(open_findings: list[Finding], actions: list[effort.Action]) -> list[dict[str, Any]]:
    families = []
    for fam in FAMILIES:
        fs = [f for f in open_findings if f.family == fam]
        if not fs:
            continue
        fam_actions = [a for a in actions if a.first.family == fam]
        minutes = sum(a.minutes for a in fam_actions) + effort.optional_minutes(fs)
        families.append(
            {
                "family": fam,
                "total": len(fs),
                "exact": sum(1 for f in fs if f.fix and f.fix.kind == "exact"),
                "numerics": sum(1 for f in fs if f.fix and f.fix.kind == "numerics"),
                "manual": len(fam_actions),
                "minutes": minutes,
                "effort": effort.human(minutes),
            }
        )
    return families


def _rules(catalogue: Catalogue, codes: list[str]) -> list[dict[str, Any]]:
    from migrator.catalogue.docs import rule_markdown

    rules = []
    for code in codes:
        rule = catalogue.get(code)
        if rule is None:
            continue
        md = rule_markdown(rule, heading="###")
        rules.append({"code": code, "name": rule.name, "family": rule.family, "severity": rule.severity,
                      "anchor": _rule_anchor(code), "markdown": md, "fix_kind": rule.fix_kind,
                      "why_short": _first_sentence(rule.docs.why)})
    return rules


def build_context(data: ReportData) -> dict[str, Any]:
    from migrator.catalogue.loader import load_catalogue

    result = data.result
    s = result.summary
    catalogue = load_catalogue()
    findings = list(result.findings)
    actions = effort.actions(findings)  # manual work: no notes, covered findings or automatic fixes
    record = data.fix_record
    applied = len(record.edits) if record else 0
    progress = site_progress(findings, applied)  # every first-screen number comes from this

    files, file_index, shown = _files(data, findings)

    def link(f: Finding) -> str:
        """Anchor of a finding: its source line in the excerpt, else its file section."""
        if (f.path, f.cell, f.line) in shown:
            return f"L{file_index[f.path]}-{_row_key(f.cell, f.line)}"
        return f"file-{file_index[f.path]}"

    open_findings = [f for f in findings if not (f.route and f.route.absorbs)]  # a route covers the others
    families = _families(open_findings, actions)

    manual_groups = _manual_groups(actions, catalogue)
    note_groups = _note_groups(effort.notes(findings))
    advice_groups = _advice_groups(effort.advice(findings), catalogue)
    optional = _optional_imports(effort.optional_imports(findings))

    rules = _rules(catalogue, sorted({f.code for f in findings} | {e.code for e in (record.edits if record else ())}))

    ops, by_status = _ops(s.coverage)
    ops, census = annotate_ops(ops, data.census)
    worst = list(result.worst(3))
    effort_total = effort.total(findings)
    effort_scopes = effort.scope_line(findings)
    ctx = {
        "meta": data.meta,
        "tool": result.tool,
        "summary": s,
        "notes": list(data.notes),
        "n_findings": len(findings),
        "progress": progress,
        "n_core": progress.total,
        "n_meta": sum(1 for f in findings if f.family == "meta"),
        "n_coverage": sum(1 for f in findings if f.family == "coverage"),
        "n_auto": progress.fixable,
        "n_exact": progress.exact,
        "n_numerics": progress.numerics,
        "n_manual": len(actions),
        "findings_page": FINDINGS_PAGE,
        "effort_scopes": effort_scopes,
        "auto_pct": progress.automatic_pct,
        "record": record,
        "applied": applied,
        "migrated_pct": progress.migrated_pct if record else None,
        "effort_total": effort.human(effort_total),
        "effort_minutes": effort_total,
        "effort_model": effort.model_rows(a.code for a in actions),
        "effort_text": effort.MODEL_TEXT,
        "note_groups": note_groups,
        "n_covered": len(findings) - len(open_findings),
        "n_notes": sum(g["count"] for g in note_groups),
        "optional_imports": optional,
        "optional_minutes": effort.human(effort.optional_minutes(findings)),
        "families": families,
        "severity": {sev: s.by_severity.get(sev, 0) for sev in ("error", "warning", "info")},
        "worst": worst,
        "manual_groups": manual_groups,
        "advice_groups": advice_groups,
        "n_advice": sum(g["count"] for g in advice_groups),
        "shown_sites": SHOWN_SITES,
        "md_sites": MD_SITES,
        "md_ops": MD_OPS,
        "md_edits": MD_EDITS,
        "findings": findings,
        "link": link,
        "file_index": file_index,
        "files": files,
        "diffs_label": ("applied" if data.diffs_applied else "proposed") if data.diffs else None,
        "rules": rules,
        "coverage": s.coverage,
        "ops": ops,
        "census": census,
        "ops_by_status": by_status,
        "validation": _relative_sides(validation_view(data.validation), data.meta.root),
        "validation_source": shown_path(data.validation_source, data.meta.root),
        "plan": {"markdown": data.plan.markdown} if data.plan else None,
        "plan_source": shown_path(data.plan_source, data.meta.root),
        "record_source": shown_path(record.source, data.meta.root) if record else None,
        "unattributed": list(s.unattributed),
        "skipped": list(result.skipped),
        "route_lines": route_headlines(result),  # the frameworks production code is built on, first screen
        "route_later": later_headlines(result),  # found only in examples, tests...: after the findings
        "route_rows": [
            {"where": f.location(), "code": f.code, "symbol": f.symbol, "status": f.route.status,
             "flag": f.route.flag or "", "target": f.route.target, "source": f.route.source}
            for f in findings if f.route is not None
        ][:MAX_ROUTE_ROWS],
        "route_rows_total": sum(1 for f in findings if f.route is not None),
    }
    ctx["verdict"] = _verdict(ctx)
    return ctx


def _relative_sides(view: dict[str, Any] | None, root: str) -> dict[str, Any] | None:
    """The validation's original and migrated trees as paths relative to the scanned root."""
    if view:
        for side in ("original", "migrated"):
            if view.get(side):
                view[side] = shown_path(view[side], root)
    return view


FINDINGS_PAGE = 100  # rows of "All findings" shown before "Show all" (a 600-finding page stays under 15 000 px)


def _verdict(ctx: dict[str, Any]) -> str:
    """The page's first line: what is left for a person and the sites' progress (the cards' numbers), whether
    it was validated."""
    progress: SiteProgress = ctx["progress"]
    if not progress.remaining and not ctx["n_manual"]:
        head = ("Nothing CUDA-only left to port" if not progress.fixed
                else f"Nothing CUDA-only left to port; {progress.head()} ({progress.automatic_pct} automatic)")
    else:
        head = (f"{ctx['n_manual']} manual action{'' if ctx['n_manual'] == 1 else 's'} left (about {ctx['effort_total']})"
                f"; {progress.head()} ({progress.automatic_pct} automatic)")
    validation = ctx["validation"]
    checked = (f"validation {validation['verdict'].replace('_', ' ')}" if validation else "not validated yet")
    return f"{head}; {checked}."


# ---------------------------------------------------------------- rendering


def _shown(value: Any) -> Any:
    """Every `{{ value }}` of both templates: text from the user's tree (names, reasons, symbols) with
    control bytes and undecodable bytes shown as escapes; already-built HTML (`Markup`) as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


@lru_cache(maxsize=2)
def _env(autoescape: bool) -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        finalize=_shown,
        loader=jinja2.PackageLoader("migrator.reporters", "templates"),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        md_html=md_to_html,
        md_inline=md_inline_html,
        md_cell=md_cell,
        md_code=md_code,
        fence=fence,
        quote_md=quote_md,
        visible=visible,
        breakable=breakable,
        ident=lambda name: breakable(name, "./"),
        shift_headings=shift_headings,
        short=lambda sha: (sha or "")[:10],
        first_sentence=_first_sentence,
        num=lambda v: f"{v:g}" if isinstance(v, float) else str(v),
    )
    return env


def _script() -> tuple[str, str]:
    from importlib.resources import files

    js = files("migrator.reporters").joinpath("templates/report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    return js, f"sha256-{digest}"


def render_html(data: ReportData) -> str:
    ctx = build_context(data)
    js, js_hash = _script()
    for r in ctx["rules"]:
        r["html"] = md_to_html(shift_headings(r["markdown"], 1))
    for g in ctx["manual_groups"]:
        g["use_instead_html"] = md_to_html(g["use_instead"]) if g["use_instead"] else ""
    if ctx["validation"]:
        markdown = ctx["validation"]["markdown"]
        ctx["validation"]["markdown_html"] = md_to_html(markdown) if markdown else ""
    if ctx["plan"]:
        ctx["plan"]["markdown_html"] = md_to_html(ctx["plan"]["markdown"])
    page = _env(True).get_template("report.html.j2").render(**ctx, script=Markup(js), script_hash=js_hash)
    return scrub_root(page, data.meta.root)


def render_markdown(data: ReportData, budget: int = MARKDOWN_BUDGET) -> str:
    """GitHub-flavoured Markdown that fits `budget` characters (a PR comment): shortens the rule
    docs first, then drops per-file sections from the end, each time with a note."""
    ctx = build_context(data)
    env = _env(False)
    file_tpl = env.get_template("file_section.md.j2")
    sections = [file_tpl.render(**ctx, file=f) for f in ctx["files"]]
    page = env.get_template("report.md.j2")

    def render(n_files: int, rules_mode: str, max_rows: int | None) -> str:
        text = page.render(
            **ctx,
            file_sections=sections[:n_files],
            omitted_files=len(sections) - n_files,
            rules_mode=rules_mode,
            max_rows=max_rows,
            budget=budget,
        )
        return scrub_root(text, data.meta.root)

    n = len(sections)
    # 1. everything; 2. rule docs as a table (`migrate rule CODE` has them); 3. as many per-file
    # sections as fit; 4. no rule table; 5. fewer rows per list; 6. a hard cut with a note
    for mode in ("full", "compact"):
        text = render(n, mode, None)
        if len(text) <= budget:
            return text
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(render(mid, "compact", None)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    text = render(lo, "compact", None)
    if len(text) <= budget:
        return text
    text = render(0, "none", None)
    if len(text) <= budget:
        return text
    for rows in (200, 100, 50, 20, 5):
        text = render(0, "none", rows)
        if len(text) <= budget:
            return text
    cut = text[: budget - 200].rsplit("\n", 1)[0]
    return cut + "\n\n> **Truncated:** this report is longer than a GitHub comment allows; see the HTML report.\n"


def render(data: ReportData, fmt: str) -> str:
    if fmt == "html":
        return render_html(data)
    if fmt == "md":
        return render_markdown(data)
    raise ValueError(f"unknown report format {fmt!r} (html or md)")
