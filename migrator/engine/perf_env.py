"""Environment settings that cost training speed on Ascend, in launch scripts and in Python
(`os.environ["X"] = "v"`, `os.environ.setdefault("X", "v")`, `os.putenv("X", "v")`).

One table, each entry from a source the rule cites: the msprof-analyze advisor's rules (26.2.0,
`rules/en/environment_variable_info.yaml`, `rules/en/synchronize.yaml`) and, for the task queue,
torch_npu's environment variable page (`op_execution/TASK_QUEUE_ENABLE.md`). Nothing is flagged
that the sources do not flag: the advisor data has no rule on `ASCEND_SLOG_PRINT_TO_STDOUT`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvRule:
    variable: str
    impl: str  # the perf rule (rules/perf.yaml)
    flagged: Callable[[str], bool]  # is this value the costly one?
    fix: str  # the setting to use instead (the finding's replacement)


ENV_RULES = (
    # synchronize.yaml and environment_variable_info.yaml: "export ASCEND_LAUNCH_BLOCKING=0"
    EnvRule("ASCEND_LAUNCH_BLOCKING", "ascend-launch-blocking", lambda v: v == "1", "ASCEND_LAUNCH_BLOCKING=0"),
    # environment_variable_info.yaml: "Debug or info level may lead to training performance degradation"
    EnvRule("ASCEND_GLOBAL_LOG_LEVEL", "ascend-debug-log-level", lambda v: v in ("0", "1"), "ASCEND_GLOBAL_LOG_LEVEL=3"),
    # torch_npu TASK_QUEUE_ENABLE.md: 0 turns the dispatch queue off (1 is the default, 2 recommended)
    EnvRule("TASK_QUEUE_ENABLE", "task-queue-disabled", lambda v: v == "0", "TASK_QUEUE_ENABLE=2"),
    # environment_variable_info.yaml: "Recommend unsetting HCCL_ALGO by execute command 'unset HCCL_ALGO'"
    EnvRule("HCCL_ALGO", "hccl-algo-set", lambda v: bool(v), "unset HCCL_ALGO"),
)
BY_VARIABLE = {rule.variable: rule for rule in ENV_RULES}
VARIABLES = tuple(BY_VARIABLE)

# `export X=v`, `X=v torchrun ...`, `env X="v" ...`, `ENV X=v`: the value up to a space, quote or `;`
SHELL_SETTING = re.compile(r"(?<![\w-])(" + "|".join(VARIABLES) + r")=([\"']?)([^\s\"';]*)")


@dataclass(frozen=True)
class EnvSetting:
    rule: EnvRule
    value: str
    column: int  # 1-based: where the variable's name starts
    end_column: int

    @property
    def text(self) -> str:
        return f"{self.rule.variable}={self.value}"


def shell_settings(code: str) -> Iterator[EnvSetting]:
    """The flagged settings on one line of shell code (its comment removed)."""
    for m in SHELL_SETTING.finditer(code):
        rule = BY_VARIABLE[m.group(1)]
        if rule.flagged(m.group(3)):
            yield EnvSetting(rule, m.group(3), m.start() + 1, m.end(3) + 1)


def _constant_text(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool):
        return str(node.value)
    return None


def python_setting(node: ast.AST) -> tuple[EnvRule, str] | None:
    """(rule, value) where `node` sets a flagged variable to a literal value; None otherwise."""
    name = value = None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
        name, value = _constant_text(node.targets[0].slice), _constant_text(node.value)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr in ("setdefault", "putenv") and len(node.args) == 2):
        name, value = _constant_text(node.args[0]), _constant_text(node.args[1])
    rule = BY_VARIABLE.get(name or "")
    if rule is None or value is None or not rule.flagged(value):
        return None
    return rule, value
