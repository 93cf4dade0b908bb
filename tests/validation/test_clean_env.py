"""`--clean-env`: a validated program's processes get only the documented allow-list of variables plus
`--env NAME`; without it they inherit everything (issue 38: tokens and cloud keys reached the program)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migrator.validation.parent import launcher
from migrator.validation.records import Job, Status

SHOW_ENV = "import json, os\njson.dump(dict(os.environ), open('env.json', 'w'))\n"


def _child_environment(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "show_env.py").write_text(SHOW_ENV)
    env = launcher.child_env(0, 1, {"PYTHONPATH": str(tmp_path), "MIGRATE_VALIDATE_WARM": "0"})
    out = tmp_path / "out"
    launcher.wait(launcher.start(Job(tree=str(tmp_path), out=str(out)), "env", env, timeout=60,
                                 module="show_env"), Status)
    return json.loads((out / "env.json").read_text())


@pytest.mark.parametrize("clean", [False, True])
def test_a_secret_reaches_the_child_only_without_clean_env(tmp_path: Path, monkeypatch, clean: bool):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    monkeypatch.setenv("MY_DATA_ROOT", "/data")
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "0")
    if clean:
        with launcher.clean_environment(["MY_DATA_ROOT"]):
            env = _child_environment(tmp_path)
    else:
        env = _child_environment(tmp_path)
    assert ("AWS_SECRET_ACCESS_KEY" in env) is (not clean)
    assert env["MY_DATA_ROOT"] == "/data" and env["ASCEND_RT_VISIBLE_DEVICES"] == "0"  # --env NAME; a device variable
    assert env["PATH"] and env["MIGRATE_VALIDATION_CHILD"] == "1"


def test_help_says_the_program_is_not_sandboxed():
    from click.testing import CliRunner

    from migrator.cli import main

    for args in (["validate", "--help"], ["ops", "--help"]):
        text = " ".join(CliRunner().invoke(main, args).output.split())
        assert "not in a sandbox" in text and "--clean-env" in text
