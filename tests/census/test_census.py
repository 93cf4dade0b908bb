"""`migrate ops --trace`: the runtime op census of the samples and of a torch.distributions program."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from migrator import api
from migrator.catalogue.coverage import lookup
from migrator.census import store
from migrator.census.model import Census, first_dtype
from migrator.ground.resources import schema_path
from tests.conftest import REPO, run_cli

PROGRAMS = Path(__file__).parent / "programs"
RECORDER = Path(__file__).parent / "independent_recorder.py"


def _copy(tmp_path: Path, source: Path) -> Path:
    tree = tmp_path / source.name
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "pyproject.toml").write_text("[project]\nname = 'traced'\n")  # the tree is its own scan root
    return tree


def _independent(tree: Path, steps: int = 1) -> set[str]:
    proc = subprocess.run([sys.executable, str(RECORDER), str(tree), str(steps)], capture_output=True, text=True,
                          timeout=300, cwd=tree, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def _aten(census: Census) -> set[str]:
    return {o.op for o in census.ops if o.level == "aten"}


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    tree = _copy(tmp_path_factory.mktemp("gpt"), REPO / "samples" / "gpt")
    census, path, _ = api.trace_ops(tree, soc="A2")
    return tree, census, path


@pytest.mark.slow
@pytest.mark.parametrize("sample", ["gpt", "moe", "resnet"])
def test_census_sees_every_aten_op_an_independent_recorder_sees(sample, tmp_path, request):
    if sample == "gpt":  # the module's gpt trace, the one the tests below read
        tree, census, path = request.getfixturevalue("gpt")
    else:
        tree = _copy(tmp_path, REPO / "samples" / sample)
        census, path, _ = api.trace_ops(tree, soc="A2")
    missing = _independent(tree) - _aten(census)
    assert not missing, f"{sample}: census lacks {sorted(missing)}"
    phases = {p for o in census.ops for p in o.phases}
    assert {"forward", "backward", "optimizer"} <= phases
    assert path == tree / ".migrate" / "op-trace.json"


@pytest.mark.slow
def test_verdicts_equal_what_migrate_ops_says(gpt):
    _, census, _ = gpt
    names = sorted({o.op for o in census.ops})
    said = {row["query"]: row for row in api.ops(names, soc="A2")}
    for op in census.ops:
        assert op.status == said[op.op]["status"], op.op
        dtype = first_dtype(op.dtypes)
        if op.dispatched and dtype and op.status in ("supported", "partial"):
            try:
                expected = lookup(op.op, soc="A2", dtype=dtype).status
            except ValueError:  # a dtype the table does not name
                continue
            assert op.verdict == expected, (op.op, op.dtypes)


@pytest.mark.slow
def test_census_file_matches_its_schema_and_loads_back(gpt):
    _, census, path = gpt
    data = json.loads(path.read_text())
    jsonschema.validate(data, json.loads(schema_path("op-trace.schema.json").read_text()))
    assert store.load(path) == census
    assert data["summary"]["distinct"]["aten"] == sum(1 for o in census.ops if o.level == "aten")


@pytest.mark.slow
def test_ops_are_attributed_to_the_users_lines(gpt):
    tree, census, _ = gpt
    layer_norm = [o for o in census.ops if o.op == "torch.nn.functional.cross_entropy"]
    assert layer_norm and layer_norm[0].first_user_site.user.path == "validate.py"
    lines = (tree / "validate.py").read_text().splitlines()
    assert "cross_entropy" in lines[layer_norm[0].first_user_site.user.line - 1]
    backward = [o for o in census.ops if "backward" in o.phases and o.op == "aten::embedding_dense_backward"]
    assert backward, "backward ops are recorded with their phase"


@pytest.mark.slow
def test_library_op_on_cpu_fallback_is_flagged_with_the_user_line(tmp_path):
    assert lookup("aten::lgamma", soc="A2").status == "cpu_fallback"  # what the table says
    tree = _copy(tmp_path, PROGRAMS / "dist")
    proc = run_cli("ops", "--trace", str(tree), "--soc", "A2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "model.py:13" in proc.stdout and "Gamma.log_prob" in proc.stdout
    census = store.load(tree / ".migrate" / "op-trace.json")
    flagged = [o for o in census.findings if o.op == "aten::lgamma"]
    assert flagged and flagged[0].code == "OPS003" and flagged[0].severity == "warning"
    site = flagged[0].first_user_site
    assert (site.user.path, site.user.line) == ("model.py", 13)
    assert site.library.function == "Gamma.log_prob"
    assert run_cli("ops", "--trace", str(tree), "--fail-on", "error").returncode == 0


@pytest.mark.slow
def test_fake_mode_records_shapes_without_running_kernels(tmp_path):
    tree = _copy(tmp_path, REPO / "samples" / "gpt")
    census, _, _ = api.trace_ops(tree, fake=True)
    assert census.program["fake"] is True
    mm = [o for o in census.ops if o.level == "aten" and o.op in ("aten::mm", "aten::addmm", "aten::bmm")]
    assert mm and all(s.shapes for o in mm for s in o.sites)
    assert {"forward", "backward", "optimizer"} <= {p for o in census.ops for p in o.phases}


@pytest.mark.slow
def test_script_census_replaces_static_partial_notes_in_scan_and_report(tmp_path):
    tree = _copy(tmp_path, REPO / "samples" / "gpt")
    before = api.scan([tree], root=tree, use_cache=False)
    # static notes are left only for ops documented without a dtype the program shows (bf16 here)
    notes_before = [f for f in before.findings if f.code == "OPS004"]
    assert all("the program uses" in f.message for f in notes_before)
    effort_before = api.report([tree], root=tree, use_cache=False)
    census, _, _ = api.trace_ops(tree / "train.py", script_args=("--tiny",), steps=1)
    assert census.program["mode"] == "script"
    after = api.scan([tree], root=tree, use_cache=False)
    assert [f for f in after.findings if f.code == "OPS004"] == []
    data = api.report([tree], root=tree, use_cache=False)
    from migrator.reporters import effort
    from migrator.reporters.report import render

    # notes cost nothing in the effort model: the census removes them, and adds effort only for a
    # dtype outside the documented set (then OPS002, an action)
    assert len(effort.notes(data.result.findings)) <= len(effort.notes(effort_before.result.findings))
    assert effort.total(data.result.findings) <= effort.total(effort_before.result.findings) + sum(
        a.minutes for a in effort.actions(data.result.findings) if a.code == "OPS002")
    assert not any(f.code == "OPS004" for f in data.result.findings)
    md = render(data, "md")
    assert "| traced |" in md and "`train.py:131`" in md  # clip_grad_norm_: traced, with its user line


def test_traced_dtype_outside_the_documented_list_becomes_a_scan_finding(tmp_path):
    tree = tmp_path / "prog"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("")
    (tree / "m.py").write_text("import torch.nn.functional as F\ny = F.silu(x)\n")
    documented = lookup("torch.nn.functional.silu", soc="A2")
    assert documented.status == "partial" and "fp64" not in documented.dtypes
    census = Census({"target": ".", "mode": "script", "steps": 1}, "A2", documented.version, "", 0.0, ())
    raw = census.to_json()
    raw["ops"] = [{"level": "api", "op": "torch.nn.functional.silu", "dtypes": ["fp64"], "count": 1,
                   "status": "partial", "verdict": "unsupported", "sites": [{"phase": "forward", "count": 1}]}]
    store.census_path(tree).parent.mkdir()
    store.census_path(tree).write_text(json.dumps(raw))
    found = [f for f in api.scan([tree], root=tree, use_cache=False).findings if f.symbol == "torch.nn.functional.silu"]
    assert [f.code for f in found] == ["OPS002"] and "fp64" in found[0].message


def test_a_broken_census_is_named_and_ignored(tmp_path):
    tree = tmp_path / "prog"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("")
    store.census_path(tree).parent.mkdir()
    store.census_path(tree).write_text('{"format": 1}')
    census, problem = store.load_for_root(tree)
    assert census is None and "op-trace.json" in problem and "schema" in problem
    assert store.traced_apis(tree) == ()


def test_census_cli_and_parent_do_not_import_torch():
    code = ("import sys, migrator.census, migrator.census.store, migrator.census.verdicts, migrator.cli, migrator.api, "
            "migrator.reporters.census; assert 'torch' not in sys.modules, 'torch imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr


def test_bad_target_is_a_clear_error(tmp_path):
    proc = run_cli("ops", "--trace", str(tmp_path))
    assert proc.returncode == 2 and "validate.py" in proc.stderr
    script = tmp_path / "train.py"
    script.write_text("print('x')\n")
    proc = run_cli("ops", "--trace", str(script), "--fake")
    assert proc.returncode == 2 and "--fake needs" in proc.stderr


TRANSFORMERS_PIN = "transformers==5.23.0"


@pytest.fixture(scope="module")
def transformers_path() -> str:
    """Where the pinned transformers imports from: this environment, or a `pip --target` folder kept in
    the benchmarks' cache outside the repository (installed once, then reused by every run)."""
    import importlib.metadata

    try:
        if importlib.metadata.version("transformers") == TRANSFORMERS_PIN.split("==")[1]:
            return ""
    except importlib.metadata.PackageNotFoundError:
        pass
    sys.path.insert(0, str(REPO / "bench"))
    from sdists import default_cache

    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    target = default_cache() / "pip-target" / f"{TRANSFORMERS_PIN.replace('==', '-')}-{py}"
    if target.is_dir():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = target.with_name(f"{target.name}.partial-{os.getpid()}")
    # with its own dependencies (they move: huggingface-hub's change with its releases); transformers
    # does not depend on torch, so the pinned CPU torch of this environment is the one it sees
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(fresh), TRANSFORMERS_PIN],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        shutil.rmtree(fresh, ignore_errors=True)
        pytest.skip(f"{TRANSFORMERS_PIN} cannot be installed: {proc.stderr[-300:]}")
    try:
        os.replace(fresh, target)  # the cache holds a whole install or none
    except OSError:  # another run stored it meanwhile
        shutil.rmtree(fresh, ignore_errors=True)
    return str(target)


@pytest.mark.slow
@pytest.mark.network
def test_census_of_a_tiny_transformers_llama(tmp_path, transformers_path):
    tree = _copy(tmp_path, PROGRAMS / "hf_llama")
    path = os.pathsep.join(filter(None, [str(REPO), transformers_path]))
    census, _, _ = api.trace_ops(tree, soc="A2", extra_env={"PYTHONPATH": path})
    proc = subprocess.run([sys.executable, str(RECORDER), str(tree), "1"], capture_output=True, text=True,
                          timeout=300, cwd=tree, env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    missing = set(json.loads(proc.stdout.strip().splitlines()[-1])) - _aten(census)
    assert not missing, sorted(missing)
    said = {row["query"]: row["status"] for row in api.ops(sorted({o.op for o in census.ops}), soc="A2")}
    assert all(o.status == said[o.op] for o in census.ops)
    # library frames: transformers' layers, attributed to the user line that called the model
    from_library = [o for o in census.ops if o.op == "torch.nn.functional.scaled_dot_product_attention"]
    assert from_library and "transformers/" in from_library[0].sites[0].library.path
