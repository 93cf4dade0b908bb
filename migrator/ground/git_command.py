"""The one place the tool runs git: nothing from the scanned repository (or the user's config) runs.

A repository is untrusted input. Its `.git/config` can name commands that read-only git calls
execute (`core.fsmonitor` on every index read, `filter.<name>.clean`/`process` when `status`
hashes a file, hooks such as `post-index-change`, `core.pager`, `diff.external`, textconv).
Every call here gets, on the command line (which outranks every config file):
- `core.fsmonitor=false`, `core.hooksPath` = an empty folder of our own, `core.pager=cat`,
  `diff.external=`, no credential helper/ssh/askpass, `protocol.allow=never` (no network);
- for the clean/smudge filters any config file names: `filter.<name>.{clean,smudge,process}=`
  (an empty command is no filter); no diff is ever asked for (textconv runs only in diffs);
- an environment without any `GIT_*` variable (hook variables, `GIT_EXTERNAL_DIFF`,
  `GIT_CONFIG_PARAMETERS`, ...), with `GIT_OPTIONAL_LOCKS=0` (never writes the index),
  `GIT_TERMINAL_PROMPT=0`, `GIT_CONFIG_NOSYSTEM=1` and `LC_ALL=C`.
Config files are only read, never written (no `GIT_CONFIG_GLOBAL=/dev/null`: a `git config
--global` under it replaces /dev/null).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

GIT_TIMEOUT_S = 120
_NEUTRAL = (
    "core.fsmonitor=false", "core.pager=cat", "diff.external=", "core.sshCommand=", "core.askPass=",
    "credential.helper=", "protocol.allow=never", "core.gitProxy=", "gpg.program=", "core.editor=true",
    "status.submoduleSummary=false", "submodule.recurse=false", "core.untrackedCache=false",
)
_hooks_dir: str | None = None


def _empty_hooks_dir() -> str:
    """A folder with no hooks in it, ours for this process (removed at exit)."""
    global _hooks_dir
    if _hooks_dir is None or not os.path.isdir(_hooks_dir):
        _hooks_dir = tempfile.mkdtemp(prefix="migrate-nohooks-")
        atexit.register(shutil.rmtree, _hooks_dir, True)
    return _hooks_dir


def git_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", LC_ALL="C",
               GIT_PAGER="cat", PAGER="cat")
    return env


def isolation_options() -> list[str]:
    options = []
    for setting in (*_NEUTRAL, f"core.hooksPath={_empty_hooks_dir()}"):
        options += ["-c", setting]
    return options


def run_git(args: list[str], cwd: Path, *, filters: bool = False,
            timeout: float = GIT_TIMEOUT_S) -> subprocess.CompletedProcess[bytes] | None:
    """`git args` in `cwd`, isolated (module docstring); None where git is missing, fails to start or
    times out. `filters`: the command may hash work-tree files (`status`), so every filter driver
    the config names is switched off first (one more git process, reading config only)."""
    git = shutil.which("git")
    if git is None:
        return None
    env = git_environment()
    base = [git, *isolation_options()]
    try:
        if filters:
            base += _filter_overrides(base, cwd, env, timeout)
        return subprocess.run([*base, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _filter_overrides(base: list[str], cwd: Path, env: dict[str, str], timeout: float) -> list[str]:
    listed = subprocess.run([*base, "config", "-z", "--name-only", "--get-regexp", r"^filter\."], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    names = {key.rsplit(".", 1)[0] for key in os.fsdecode(listed.stdout).split("\0") if key.count(".") >= 2}
    options = []
    for name in sorted(names):
        for what in ("clean", "smudge", "process"):
            options += ["-c", f"{name}.{what}="]
    return options
