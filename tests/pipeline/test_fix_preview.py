"""`fix --diff` / `fix --check` (a fix that writes nothing) say what a fresh scan of the written files
would say: the same remaining findings, summary counts and unattributed markers, for every SoC the
coverage table knows, with a census in the tree and a tree that trains in bf16."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from migrator import api
from migrator.catalogue.coverage import lookup, socs
from migrator.census import store
from migrator.census.model import Census

REPO = Path(__file__).resolve().parents[2]
N_MARKERS = 260  # more than the summary lists (MAX_LISTED_MARKERS): the count must still be exact


def _tree(tmp_path: Path, name: str) -> Path:
    tree = tmp_path / name
    shutil.copytree(REPO / "samples" / "gpt", tree)
    (tree / "pyproject.toml").write_text('[project]\nname = "gpt"\n')
    # a fixable finding on each line plus a CUDA-looking token no rule claims: every marker of the
    # file moves with the fix, so a preview that kept the old markers would be caught
    (tree / "helpers.py").write_text("import torch\n" + "".join(
        f"x{i} = torch.zeros(1).cuda(); my_cudnn_helper{i} = x{i}\n" for i in range(N_MARKERS)))
    # ops the training step ran, with dtypes: one partial op outside its documented list
    documented = lookup("torch.nn.functional.silu", soc="A2")
    census = Census({"target": ".", "mode": "script", "steps": 1}, "A2", documented.version, "", 0.0, ())
    raw = census.to_json()
    raw["ops"] = [{"level": "api", "op": "torch.nn.functional.silu", "dtypes": ["fp64"], "count": 1,
                   "status": "partial", "verdict": "unsupported", "sites": [{"phase": "forward", "count": 1}]}]
    store.census_path(tree).parent.mkdir(exist_ok=True)
    store.census_path(tree).write_text(json.dumps(raw))
    assert store.traced_apis(tree)
    return tree


def _comparable(result):
    return result.findings, replace(result.summary, root="")


@pytest.mark.parametrize("soc", socs(None))
def test_a_fix_that_writes_nothing_reports_what_a_scan_of_the_written_files_reports(tmp_path, soc):
    options = {"soc": soc, "use_cache": False, "jobs": 1}
    preview_tree, written_tree = _tree(tmp_path, "preview"), _tree(tmp_path, "written")
    preview = api.fix([preview_tree], root=preview_tree, write=False, **options)
    written = api.fix([written_tree], root=written_tree, **options)
    assert preview.changed_files == written.changed_files and "helpers.py" in preview.changed_files
    fresh = api.scan([written_tree], root=written_tree, **options)
    assert _comparable(preview.remaining) == _comparable(fresh)
    assert _comparable(written.remaining) == _comparable(fresh)
    # what the comparison covers is really there: the SoC's table, the census's verdict, bf16, markers
    summary = preview.remaining.summary
    assert summary.coverage and summary.coverage.soc == soc
    assert summary.unattributed_markers >= N_MARKERS > len(summary.unattributed)
    assert any("op-trace.json" in f.message for f in preview.remaining.findings) or soc != "A2"


def test_the_portable_preview_scans_the_runtime_module_the_fix_would_create(tmp_path):
    options = {"use_cache": False, "jobs": 1, "target": "portable"}
    preview_tree, written_tree = _tree(tmp_path, "preview"), _tree(tmp_path, "written")
    preview = api.fix([preview_tree], root=preview_tree, write=False, **options)
    api.fix([written_tree], root=written_tree, **options)
    assert (written_tree / "_migrate_runtime.py").is_file() and not (preview_tree / "_migrate_runtime.py").exists()
    fresh = api.scan([written_tree], root=written_tree, **options)
    assert _comparable(preview.remaining) == _comparable(fresh)
    assert preview.remaining.summary.files_scanned == fresh.summary.files_scanned


SOFTMAX = '''import torch

buf = torch.zeros(1).cuda()


class ScaledMaskedSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs, mask, scale):
        return inputs.cuda()
'''


def test_the_preview_reads_route_evidence_and_scopes_from_the_texts_it_would_write(tmp_path):
    """Framework detection and the scopes a route replaces are read from the planned texts too: the fix
    moves lines (an import added), so evidence read from disk would name old lines and a finding on the
    last line of a replaced class would fall outside the class."""
    fixture = REPO / "tests" / "fixtures" / "routes" / "megatron_vendored"
    trees = {}
    for name in ("preview", "written"):
        trees[name] = tmp_path / name
        shutil.copytree(fixture, trees[name])
        (trees[name] / "megatron" / "core" / "fusions" / "fused_softmax.py").write_text(SOFTMAX)
    options = {"use_cache": False, "jobs": 1, "route": "auto"}
    before = api.scan([trees["written"]], root=trees["written"], **options)
    preview = api.fix([trees["preview"]], root=trees["preview"], write=False, **options)
    api.fix([trees["written"]], root=trees["written"], **options)
    fresh = api.scan([trees["written"]], root=trees["written"], **options)
    assert _comparable(preview.remaining) == _comparable(fresh)
    assert preview.remaining.frameworks == fresh.frameworks
    # what the comparison covers is there: the evidence moved, and the class's last line is covered in both
    assert before.frameworks[0].framework.evidence != fresh.frameworks[0].framework.evidence
    written = (trees["written"] / "megatron" / "core" / "fusions" / "fused_softmax.py").read_text()
    last_line = written.splitlines().index("        return inputs.cuda()") + 1
    assert last_line > SOFTMAX.splitlines().index("        return inputs.cuda()") + 1  # the fix moved it
    last = [f for f in fresh.findings if f.path.endswith("fused_softmax.py") and f.line == last_line]
    assert last and last[0].route is not None and last[0].route.absorbs, last
