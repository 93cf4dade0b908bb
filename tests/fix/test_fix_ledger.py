"""The fix record is a ledger: reruns keep what earlier runs applied and declined; entries go only
when their file is gone or the change is no longer in it; `migrate report` gives the same numbers
however often fix is rerun."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from migrator import api
from migrator.fix.ledger import lines_sha256
from migrator.reporters.report import build_context, render

ATTN = (
    "import torch\n"
    "from flash_attn import flash_attn_func\n"
    "x = y.cuda()\n"
    "o = flash_attn_func(q, k, v, window_size=(1, 1))\n"
    "p = flash_attn_func(q, k, v)\n"
)
TRAIN = "import torch\ntorch.cuda.synchronize()\nx = y.cuda()\nm = torch.nn.DataParallel(m)\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "attn.py").write_text(ATTN)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "b.py").write_text("import torch\nx = y.cuda()\nz = w.cuda()\n")
    return tmp_path


def record(root: Path) -> dict:
    return json.loads((root / ".migrate" / "fix-record.json").read_text())


def counts(root: Path) -> tuple[int, int]:
    r = record(root)
    return sum(len(f["edits"]) for f in r["files"]), len(r["declined"])


def report_numbers(root: Path) -> tuple:
    data = api.report([root], use_cache=False)
    ctx = build_context(data)
    md = re.search(r"\*\*(\d+%)\*\* \((\d+) sites fixed\)", render(data, "md"))
    assert md is not None
    return ctx["migrated_pct"], ctx["applied"], ctx["n_core"], md.groups()


def test_rerun_keeps_edits_declines_and_report_numbers(repo):
    api.fix([repo], use_cache=False)
    first = counts(repo)
    assert first[0] >= 5 and first[1] >= 1  # the regression: a rerun dropped these to the new run's 0
    numbers = report_numbers(repo)
    for _ in range(2):
        outcome = api.fix([repo], use_cache=False)
        assert outcome.changed_files == []
        assert counts(repo) == first
        assert report_numbers(repo) == numbers
    assert all(f.fix is None for f in api.scan([repo], use_cache=False).findings if f.path == "attn.py")


def test_record_paths_are_relative_and_carry_hashes(repo):
    api.fix([repo], use_cache=False)
    r = record(repo)
    assert "root" not in r and all(not Path(f["path"]).is_absolute() for f in r["files"])
    entry = next(f for f in r["files"] if f["path"] == "b.py")
    assert set(entry) >= {"sha256", "sha256_before", "edits"}
    assert [e["new"]["sha256"] for e in entry["edits"]] == [lines_sha256(["x = y.npu()"]), lines_sha256(["z = w.npu()"])]
    assert all("text" not in e["new"] for e in entry["edits"])  # hashes, not the lines
    jsonschema = pytest.importorskip("jsonschema")
    from migrator.ground.resources import schema_path

    jsonschema.validate(r, json.loads(schema_path("fix-record.schema.json").read_text()))


def test_a_reverted_file_is_not_counted_twice(repo):
    api.fix([repo], use_cache=False)
    first = counts(repo)
    (repo / "b.py").write_text("import torch\nx = y.cuda()\nz = w.cuda()\n")  # back to the original
    api.fix([repo], use_cache=False)
    assert counts(repo) == first
    edits = next(f["edits"] for f in record(repo)["files"] if f["path"] == "b.py")
    assert [e["new"]["line"] for e in edits] == [3, 4]  # below the added `import torch_npu`


def test_hand_edits_keep_the_surviving_edits_where_they_are_now(repo):
    api.fix([repo], use_cache=False)
    # one fixed line undone by hand, a line added above the other
    (repo / "b.py").write_text("import torch\n# note\nx = y.cuda()\nz = w.npu()\n")
    api.fix([repo / "attn.py"], root=repo, use_cache=False)  # b.py not even planned this time
    edits = next(f["edits"] for f in record(repo)["files"] if f["path"] == "b.py")
    assert [(e["new"]["line"], e["new"]["sha256"]) for e in edits] == [(4, lines_sha256(["z = w.npu()"]))]
    api.fix([repo], use_cache=False)  # fixes x again (and re-adds torch_npu): one new edit, the old one stays
    edits = next(f["edits"] for f in record(repo)["files"] if f["path"] == "b.py")
    assert (repo / "b.py").read_text().splitlines()[3:] == ["x = y.npu()", "z = w.npu()"]
    assert [(e["new"]["line"], e["new"]["sha256"]) for e in edits] == [(4, lines_sha256(["x = y.npu()"])),
                                                                        (5, lines_sha256(["z = w.npu()"]))]


def test_two_identical_fixed_lines_count_once_each(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "d.py").write_text("import torch\nx = y.cuda()\nx = y.cuda()\n")
    api.fix([tmp_path], use_cache=False)
    (tmp_path / "d.py").write_text("import torch\nx = y.npu()\n")  # one of the two removed by hand
    (tmp_path / "e.py").write_text("import torch\nq = r.cuda()\n")
    api.fix([tmp_path], use_cache=False)
    files = {f["path"]: f["edits"] for f in record(tmp_path)["files"]}
    assert [e["new"]["line"] for e in files["d.py"]] == [2]
    assert len(files["e.py"]) == 1


def test_gone_files_and_gone_sites_leave_the_ledger(repo):
    api.fix([repo], use_cache=False)
    (repo / "b.py").unlink()
    text = (repo / "attn.py").read_text().replace("o = flash_attn_func(q, k, v, window_size=(1, 1))\n", "")
    text = text.replace("from flash_attn import flash_attn_func\n", "")
    (repo / "attn.py").write_text(text)
    api.fix([repo], use_cache=False)
    r = record(repo)
    assert "b.py" not in {f["path"] for f in r["files"]}
    assert not any("window_size" in d["reason"] for d in r["declined"])
    assert {f["path"] for f in r["files"]} == {"attn.py", "train.py"}


def test_a_run_over_other_codes_keeps_the_declines(repo):
    api.fix([repo], use_cache=False)
    declined = record(repo)["declined"]
    api.fix([repo], select=("DEV",), use_cache=False)
    assert record(repo)["declined"] == declined


def test_another_target_starts_a_new_ledger(repo, tmp_path_factory):
    api.fix([repo], use_cache=False)
    (repo / "c.py").write_text("import torch\nx = y.cuda()\n")
    api.fix([repo / "c.py"], root=repo, target="portable", use_cache=False)
    r = record(repo)
    assert r["target"] == "portable" and [f["path"] for f in r["files"]] == ["c.py"]


def test_cli_report_is_stable_across_fix_reruns(repo):
    from tests.conftest import run_cli

    assert run_cli("fix", str(repo), "--no-cache", "-q").returncode in (0, 1)
    outs = []
    for _ in range(3):
        report = run_cli("report", str(repo), "--format", "md", "--no-cache")
        assert report.returncode == 0, report.stderr
        outs.append(re.search(r"\*\*(\d+%)\*\* \((\d+) sites fixed\)", report.stdout).groups())
        assert run_cli("fix", str(repo), "--no-cache", "-q").returncode in (0, 1)
    assert outs[0] == outs[1] == outs[2]


def test_a_record_of_an_older_version_is_kept_by_a_rerun(repo):
    api.fix([repo], use_cache=False)
    old = record(repo)
    for f in old["files"]:  # what earlier versions wrote: no hashes, no edit text, an absolute root
        f.pop("sha256"), f.pop("sha256_before")
        for e in f["edits"]:
            e["new"].pop("sha256")
    old["root"] = repo.as_posix()
    (repo / ".migrate" / "fix-record.json").write_text(json.dumps(old))
    api.fix([repo], use_cache=False)
    new = record(repo)
    assert [len(f["edits"]) for f in new["files"]] == [len(f["edits"]) for f in old["files"]]
    assert "root" not in new


def typed(data: dict):
    """A record given as JSON, read strictly into its dataclasses (not schema-checked: the hashes here are
    short stand-ins)."""
    from migrator.ground.fix_record import FixRecord
    from migrator.ground.serialise import from_data

    return from_data({"schema_version": 1, **data}, FixRecord, "test record")


def as_json(record) -> dict:
    from migrator.ground.serialise import to_data

    return to_data(record)


def merge(old: dict, run: dict, *args) -> dict:
    """`ledger.merge` over records given as JSON, its result as JSON."""
    from migrator.fix import ledger

    return as_json(ledger.merge(typed(old), typed(run), *args))


def test_merge_rule_on_its_own():
    from collections import Counter

    from migrator.fix.ledger import FileState

    edit = {"code": "DEV010", "new": {"line": 2, "end_line": 2, "text": "x = y.npu()"}}
    old = {"target": "npu", "files": [{"path": "a.py", "sha256": "after", "sha256_before": "before", "edits": [edit]}],
           "declined": [{"path": "a.py", "code": "DIST005", "symbol": "s", "reason": "r"}]}
    run = {"target": "npu", "files": [], "declined": []}

    def state(text, digest):
        return lambda rel: FileState(text, digest, text, digest)

    def files(merged):
        return [(f["path"], [e["new"]["line"] for e in f["edits"]]) for f in merged["files"]]

    everywhere = lambda rel, code: True  # noqa: E731
    same = merge(old, run, state("import torch\nx = y.npu()\n", "after"), Counter({("a.py", "DIST005", "s"): 1}), everywhere)
    assert files(same) == [("a.py", [2])] and same["declined"] == old["declined"]
    assert files(merge(old, run, state("import torch\nx = y.cuda()\n", "before"), Counter(), everywhere)) == []
    moved = merge(old, run, state("# hi\nimport torch\nx = y.npu()\n", "edited"), Counter(), everywhere)
    assert files(moved) == [("a.py", [3])] and moved["files"][0]["sha256"] == "edited" and moved["declined"] == []
    assert merge(old, run, lambda rel: None, Counter(), everywhere)["files"] == []  # gone
    not_scanned = merge(old, run, state("x", "other"), Counter(), lambda rel, code: False)
    assert not_scanned["declined"] == old["declined"]


def test_a_site_declined_again_is_listed_once():
    """megatron-core portable: a rerun declined the same import again and the record grew by one."""
    from collections import Counter

    from migrator.fix.ledger import FileState

    site = {"path": "a.py", "code": "DEV001", "symbol": "torch.cuda.device", "reason": "imports are renamed for npu only"}
    old = {"target": "portable", "files": [], "declined": [dict(site)]}
    run = {"target": "portable", "files": [], "declined": [dict(site)]}
    two_findings = Counter({("a.py", "DEV001", "torch.cuda.device"): 2})  # the import and a manual use
    merged = merge(old, run, lambda rel: FileState("x", "d", "x", "d"), two_findings, lambda rel, code: True)
    assert merged["declined"] == [site]
    other_reason = {**site, "reason": "another reason"}
    kept = merge({**old, "declined": [other_reason]}, run, lambda rel: FileState("x", "d", "x", "d"), two_findings,
                 lambda rel, code: True)
    assert kept["declined"] == [site, other_reason]  # a different site of the same symbol stays


def test_a_record_of_an_older_version_with_edit_text_still_relocates():
    from collections import Counter

    from migrator.fix.ledger import FileState

    edit = {"code": "DEV010", "new": {"line": 2, "end_line": 2, "text": "x = y.npu()"}}
    old = {"target": "npu", "files": [{"path": "a.py", "sha256": "after", "sha256_before": "before", "edits": [edit]}],
           "declined": []}
    run = {"target": "npu", "files": [], "declined": []}
    text = "# moved\n# down\nimport torch\nx = y.npu()\n"
    merged = merge(old, run, lambda rel: FileState(text, "edited", text, "edited"), Counter(), lambda r, c: True)
    assert [e["new"]["line"] for e in merged["files"][0]["edits"]] == [4]
    text = "import torch\nx = y.cuda()\n"  # the edit's line is gone
    merged = merge(old, run, lambda rel: FileState(text, "edited", text, "edited"), Counter(), lambda r, c: True)
    assert merged["files"] == []


def test_record_size_does_not_grow_with_line_length(tmp_path):
    """One long line holding many sites: the record stores a hash per edit, not the line per edit."""
    import json as json_module

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    devices = ", ".join(f'"k{i}": "cuda:0"' for i in range(300))
    (tmp_path / "config.json").write_text('{"model": "gpt", "device_map": {' + devices + "}}\n")
    outcome = api.fix([tmp_path], use_cache=False)
    r = record(tmp_path)
    edits = [e for f in r["files"] for e in f["edits"]]
    if not edits:
        pytest.skip(f"no edit on the config: {outcome.changed_files}")
    size = (tmp_path / ".migrate" / "fix-record.json").stat().st_size
    line = len((tmp_path / "config.json").read_text())
    assert size < len(edits) * 1000 < len(edits) * line
    assert json_module.loads((tmp_path / ".migrate" / "fix-record.json").read_text())["files"]
