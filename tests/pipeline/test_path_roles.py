"""Path roles (issue 44 item 3): production code before scripts, examples, tests and docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator import api
from migrator.cli import main
from migrator.ground.config import ConfigError
from migrator.ground.path_roles import ROLES, path_roles
from migrator.reporters import effort
from migrator.reporters import text as text_reporter
from migrator.reporters.report import build_context
from migrator.reporters.report import render as render_report

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = '[project]\nname = "pkg"\nversion = "0.1"\n\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'
# the example holds the most findings, and the most serious (errors); the package one warning
EXAMPLE = ('import torch\nimport transformers\nfrom apex import amp\n\n'
           'torch.distributed.init_process_group("nccl")\n'
           'model = torch.nn.DataParallel(torch.nn.Linear(2, 2)).cuda()\n'
           'x = torch.randn(2, device="cuda")\n')
TREE = {
    "src/pkg/__init__.py": "",
    "src/pkg/model.py": "import torch\n\n\ndef to_device(x):\n    return x.cuda()\n",
    "tests/test_model.py": "import torch\n\n\ndef test_it():\n    torch.cuda.synchronize()\n",
    "examples/train.py": EXAMPLE,
    "examples/requirements.txt": "transformers==4.51.3\n",
    "docs/conf.py": 'import torch\ndevice = torch.device("cuda")\n',
}


def _tree(root: Path, config: str = "", extra: dict[str, str] | None = None) -> Path:
    (root / "pyproject.toml").write_text(PYPROJECT + config)
    for name, text in {**TREE, **(extra or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _scan(root: Path):
    return api.scan([root], root=root, use_cache=False)


def test_every_finding_carries_its_files_role(tmp_path):
    result = _scan(_tree(tmp_path))
    assert {f.path: f.role for f in result.findings} == {
        "src/pkg/model.py": "production", "tests/test_model.py": "test", "examples/train.py": "example",
        "docs/conf.py": "docs"}
    assert all(f.to_dict()["role"] == f.role for f in result.findings)


def test_worst_first_puts_production_first_though_the_example_has_more_and_worse(tmp_path):
    result = _scan(_tree(tmp_path))
    example = [f for f in result.findings if f.role == "example"]
    assert len(example) > 3 and any(f.severity == "error" for f in example)  # the premise
    worst = result.worst(3)
    assert worst[0].path == "src/pkg/model.py"
    text = text_reporter.render(result)
    listed = text[text.index("Worst first:"):].splitlines()
    assert listed[1].startswith("  1. src/pkg/model.py:5")


def test_the_report_lists_production_files_and_worst_first(tmp_path):
    tree = _tree(tmp_path)
    data = api.report([tree], root=tree, use_cache=False)
    ctx = build_context(data)
    assert [f["path"] for f in ctx["files"]] == ["src/pkg/model.py", "examples/train.py", "tests/test_model.py",
                                                "docs/conf.py"]
    assert ctx["worst"][0].path == "src/pkg/model.py"
    md = render_report(data, "md")
    worst = md[md.index("**Worst first**"):]
    assert worst.index("src/pkg/model.py") < worst.index("examples/train.py")


def test_a_path_roles_override_changes_the_order(tmp_path):
    config = '\n[tool.migrate]\npath-roles = { "examples/**" = "production", "src/**" = "example" }\n'
    result = _scan(_tree(tmp_path, config))
    assert {f.path: f.role for f in result.findings}["examples/train.py"] == "production"
    assert {f.path: f.role for f in result.findings}["src/pkg/model.py"] == "example"
    assert result.worst(3)[0].path == "examples/train.py"


def test_the_last_matching_override_wins(tmp_path):
    roles = path_roles(tmp_path, (("legacy/**", "example"), ("legacy/core/**", "production")))
    assert roles.role("legacy/a.py") == "example"
    assert roles.role("legacy/core/b.py") == "production"


def test_effort_shows_production_first_and_the_split_by_role(tmp_path):
    extra = {"src/pkg/parallel.py": "import torch\nmodel = torch.nn.DataParallel(torch.nn.Linear(2, 2))\n"}
    findings = _scan(_tree(tmp_path, extra=extra)).findings
    split = effort.by_role(findings)
    assert list(split) == list(ROLES)
    assert split["production"]["files"] == ["src/pkg/parallel.py"] and split["example"]["files"] == ["examples/train.py"]
    line = effort.scope_line(findings)
    assert line.startswith("production ") and line.index("production") < line.index("example")
    assert sum(r["minutes"] for r in split.values()) == effort.total(findings) - effort.optional_minutes(findings)


def test_a_route_found_only_in_an_example_is_not_on_the_first_screen(tmp_path):
    result = _scan(_tree(tmp_path))
    (fw,) = result.frameworks
    assert fw.framework.name == "transformers" and fw.roles == ("example",)
    text = text_reporter.render(result)
    first_screen = text[: text.index("\n\n")]
    assert "transformers" not in first_screen
    later = text[text.index("Framework route (outside production code)"):]
    assert "examples/requirements.txt" in later.splitlines()[1]  # the one-line note names the evidence
    assert later.index("transformers 4.51.3") < later.index("Summary")
    data = api.report([tmp_path], root=tmp_path, use_cache=False)
    md = render_report(data, "md")
    assert "### Framework route\n" not in md and "### Framework route outside production code" in md
    html = render_report(data, "html")
    assert 'id="route"' not in html and html.index('id="route-later"') > html.index("Worst first")


def test_a_route_production_code_imports_is_on_the_first_screen(tmp_path):
    extra = {"src/pkg/hf.py": "import transformers\n"}
    result = _scan(_tree(tmp_path, extra=extra))
    (fw,) = result.frameworks
    assert fw.roles == ("production", "example")
    text = text_reporter.render(result)
    assert text.startswith("Framework route\ntransformers 4.51.3")
    assert "outside production code" not in text


@pytest.mark.parametrize("value, words", [
    ('{ "examples/**" = "sample" }', "'sample' is not a role"),
    ('"examples"', "must be a table"),
    ('{ "[z-a]" = "example" }', "path-roles"),
])
def test_a_bad_role_value_is_a_config_error_naming_the_file(tmp_path, value, words):
    _tree(tmp_path, f"\n[tool.migrate]\npath-roles = {value}\n")
    with pytest.raises(ConfigError) as caught:
        _scan(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "pyproject.toml") in message and words in message
    run = CliRunner().invoke(main, ["scan", str(tmp_path), "--no-cache"])
    assert run.exit_code == 2 and words in run.output


@pytest.mark.parametrize("files, expected", [
    ({"setup.py": "from setuptools import setup, find_packages\nsetup(packages=find_packages(where='lib'), "
                  "package_dir={'': 'lib'})\n", "lib/tools/__init__.py": "", "lib/tools/run.py": ""},
     {"lib/tools/run.py": "script"}),  # setuptools' find leaves out a `tools` package, as ours does
    ({"setup.py": "from setuptools import setup\nsetup(packages=['tools', 'tools.sub'])\n",
      "tools/__init__.py": "", "tools/run.py": ""}, {"tools/run.py": "production"}),
    ({"setup.cfg": "[options]\npackages = find:\npackage_dir =\n    =src\n\n[options.packages.find]\nwhere = src\n",
      "src/app/__init__.py": "", "src/app/tests/test_x.py": "", "src/app/docs/x.py": ""},
     {"src/app/tests/test_x.py": "test", "src/app/docs/x.py": "production"}),
    ({"pyproject.toml": '[tool.setuptools]\npackages = ["examples"]\n', "examples/__init__.py": "",
      "examples/a.py": ""}, {"examples/a.py": "production"}),
    ({"app/__init__.py": "", "app/benchmarks/b.py": "", "benchmarks/b.py": "", "train.py": "",
      "notebooks/n.ipynb": "", "pkg_test.py": "", "conftest.py": ""},
     {"app/benchmarks/b.py": "production", "benchmarks/b.py": "script", "train.py": "production",
      "notebooks/n.ipynb": "example", "pkg_test.py": "test", "conftest.py": "test"}),
])
def test_packaging_metadata_and_conventions_decide_roles(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    roles = path_roles(tmp_path)
    assert {rel: roles.role(rel) for rel in expected} == expected


def test_the_schema_knows_the_roles():
    schema = json.loads((REPO / "migrator" / "ground" / "schema" / "findings.schema.json").read_text())
    assert tuple(schema["$defs"]["role"]["enum"]) == ROLES
