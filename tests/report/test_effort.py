"""The effort model (issue 18): per-rule minutes with provenance, actions not notes, one import per
file and library, optional (guarded) imports listed apart, and the figures on the samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migrator import api
from migrator.catalogue.loader import load_catalogue
from migrator.reporters import effort
from migrator.reporters.report import build_context
from tests.conftest import REPO

TE_IMPORTS = "from transformer_engine.pytorch import Linear, LayerNorm, DotProductAttention\n"
GUARDED = """\
try:
    import transformer_engine as te
    from transformer_engine.pytorch import Linear, LayerNorm
    HAVE_TE = True
except ImportError:
    HAVE_TE = False
"""
REQUIRED = """\
try:
    import transformer_engine as te
except ImportError:
    raise ImportError("this module needs Transformer Engine")
"""


def scan(tmp_path: Path, files: dict[str, str], **kw):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return api.scan([tmp_path], root=tmp_path, use_cache=False, route="none", **kw)


def test_every_rule_has_minutes_and_a_reason():
    for rule in load_catalogue().rules.values():
        assert rule.effort.minutes >= 0 and len(rule.effort.why) >= 10, rule.code
    # a rule's own figure beats the family default, and says so
    assert load_catalogue().get("KERN005").effort.source == "rule"
    assert load_catalogue().get("KERN004").effort.source == "family"


def test_an_import_goes_with_its_use(tmp_path):
    code = "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('x', ['x.cu'])\n"
    result = scan(tmp_path, {"setup.py": code})
    (act,) = effort.actions(result.findings)
    assert act.code == "KERN001" and act.unit == "site" and len(act.findings) == 2


def test_one_library_counts_once_per_repository(tmp_path):
    result = scan(tmp_path, {"a.py": TE_IMPORTS, "b.py": TE_IMPORTS})
    te = [f for f in result.findings if f.code == "KERN005"]
    assert len(te) == 6 and all(f.imported and f.imported.library == "transformer_engine" for f in te)
    acts = effort.actions(result.findings)
    assert [(a.code, a.unit, len(a.findings)) for a in acts] == [("KERN005", "import", 6)]
    assert {f.path for f in acts[0].findings} == {"a.py", "b.py"}
    assert effort.total(result.findings) == load_catalogue().get("KERN005").effort.minutes


def test_guarded_import_with_a_fallback_is_optional_and_listed_apart(tmp_path):
    result = scan(tmp_path, {"guarded.py": GUARDED, "required.py": REQUIRED})
    by_file = {p: [f for f in result.findings if f.path == p] for p in ("guarded.py", "required.py")}
    assert by_file["guarded.py"] and all(f.imported.optional for f in by_file["guarded.py"])
    assert by_file["required.py"] and not any(f.imported.optional for f in by_file["required.py"])  # re-raises
    assert effort.optional_imports(result.findings) == by_file["guarded.py"]
    assert [a.findings for a in effort.actions(result.findings)] == [tuple(by_file["required.py"])]
    # near-zero: once per library, whatever the number of guarded imports
    assert effort.optional_minutes(result.findings) == effort.OPTIONAL_MINUTES
    assert json.loads(api_json(result))["findings"][0]["import"] == {"library": "transformer_engine", "optional": True}


def test_member_uses_after_an_optional_import_go_with_it(tmp_path):
    uses = "\n\ndef step(x):\n    if HAVE_TE:\n        with te.pytorch.fp8_autocast():\n            return x\n    return x\n"
    required = "import transformer_engine as te\n\n\ndef step(x):\n    with te.pytorch.fp8_autocast():\n        return x\n"
    result = scan(tmp_path, {"guarded.py": GUARDED + uses, "required.py": required})
    members = [f for f in result.findings if f.code == "KERN005" and f.imported is None]
    assert {f.path for f in members} == {"guarded.py", "required.py"}  # both uses are found
    charged = {f.path for a in effort.actions(result.findings) for f in a.findings}
    assert charged == {"required.py"}  # the guarded file's use runs only where its optional import succeeded
    assert effort.optional_minutes(result.findings) == effort.OPTIONAL_MINUTES


@pytest.mark.parametrize("handler, optional", [
    ("except (ImportError, OSError):\n    te = None\n", True),
    ("except Exception:\n    pass\n", True),
    ("except ModuleNotFoundError as exc:\n    warnings.warn(str(exc))\n", True),
    ("except ImportError:\n    sys.exit('install transformer_engine')\n", False),
    ("except ValueError:\n    te = None\n", False),
])
def test_which_handlers_are_a_fallback(tmp_path, handler, optional):
    result = scan(tmp_path, {"m.py": "import sys, warnings\ntry:\n    import transformer_engine as te\n" + handler})
    (f,) = [f for f in result.findings if f.code == "KERN005"]
    assert f.imported.optional is optional


def test_info_notes_cost_nothing_and_ops_count_once_per_run(tmp_path):
    code = ("import torch\nimport torch.nn.functional as F\nz = torch.ones(3, dtype=torch.bfloat16)\n"
            "y = F.grid_sample(z, z)\n")  # grid_sample: documented without bf16, which the file uses
    result = scan(tmp_path, {"a.py": code, "b.py": code})
    notes = effort.notes(result.findings)
    assert notes and all(f.severity == "info" for f in notes)
    assert effort.actions(notes) == [] and effort.total(notes) == 0
    unsupported = [f.__class__(**{**f.__dict__, "code": "OPS002", "severity": "warning"}) for f in notes]
    acts = effort.actions(unsupported)  # the same op in two files: one workaround
    assert len(acts) == len({f.symbol for f in unsupported}) < len(unsupported)


def api_json(result) -> str:
    from migrator.reporters import json_report

    return json_report.render(result)


def test_json_effort_block_matches_the_report(tmp_path):
    import jsonschema

    result = scan(tmp_path, {"a.py": TE_IMPORTS, "g.py": GUARDED, "r.py": REQUIRED})
    doc = json.loads(api_json(result))
    schema = json.loads((REPO / "migrator" / "ground" / "schema" / "findings.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    block = doc["effort"]
    assert block["actions"] == len(effort.actions(result.findings)) == 1  # transformer_engine, once for a.py and r.py
    assert block["minutes"] == effort.total(result.findings)
    assert block["optional_imports"] == {"findings": 3, "libraries": ["transformer_engine"], "minutes": effort.OPTIONAL_MINUTES}
    assert {r["code"]: r["actions"] for r in block["by_rule"]} == {"KERN005": 1}
    assert [(r["library"], r["files"]) for r in block["imports"]] == [("transformer_engine", ["a.py", "r.py"])]
    assert block["by_scope"]["production"]["actions"] == 1


def _context(tree: Path, route: str = "auto") -> dict:
    settings, resolved = api.resolve_settings([tree], root=tree, use_cache=False, route=route)
    return build_context(api.report(resolved, settings=settings))


@pytest.mark.parametrize("sample", ["gpt", "moe"])
def test_nanogpt_style_samples_need_at_most_an_hour_or_two(sample):
    """Issue 18: nanoGPT's files were estimated at 4 h, 3.5 h of it info-level op notes."""
    ctx = _context(REPO / "samples" / sample)
    assert ctx["effort_minutes"] <= {"gpt": 60, "moe": 120}[sample]
    assert 0 < ctx["n_manual"] <= ctx["n_core"]  # manual items are actions, at most the CUDA sites
    assert ctx["n_notes"] > 0 and all(g["count"] for g in ctx["note_groups"])


@pytest.mark.parametrize("sample", ["gpt", "moe", "resnet"])
def test_golden_port_leaves_exactly_the_estimated_work_of_the_original(sample):
    """Calibration (docs/effort.md): what `migrate fix` produced (tests/golden) still holds every action
    the estimate counted for the original, and nothing the fixer did is counted (an Apex import the
    fixer drops with its rewritten uses included)."""
    original = _context(REPO / "samples" / sample)
    ported = _context(REPO / "tests" / "golden" / sample / "npu")
    assert original["n_auto"] > 0
    assert ported["effort_minutes"] == original["effort_minutes"]
    assert ported["n_manual"] == original["n_manual"]


def test_report_explains_the_model_and_lists_optional_imports(tmp_path):
    from migrator.reporters.report import render_html, render_markdown

    scan(tmp_path, {"g.py": GUARDED, "r.py": REQUIRED,
                    "n.py": "import torch\ny = torch.ones(3).bfloat16()\nz = torch.nn.functional.grid_sample(y, y)\n"})
    settings, resolved = api.resolve_settings([tmp_path], root=tmp_path, use_cache=False, route="none")
    data = api.report(resolved, settings=settings)
    md = render_markdown(data)
    html = render_html(data)
    for page in (md, html):
        assert "How this is estimated" in page and "Optional imports" in page
        assert "replace the Transformer Engine modules" in page  # the rule's own reason, from the catalogue
    assert "<details><summary>Notes: " in md and 'id="notes"' in html  # notes collapsed
