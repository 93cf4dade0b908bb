"""The README's first steps: the transfer_to_npu question answered, portable offered, the opening commands kept."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(title)
    following = re.search(r"^## ", README[start + len(title):], flags=re.MULTILINE)
    return README[start:start + len(title) + (following.start() if following else len(README))]


def test_the_opening_command_blocks_are_unchanged():
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL)[:2]
    assert blocks == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && migrate scan samples/ --exit-zero\n",
        ". .venv/bin/activate && pip install torch==2.13.0 -e '.[test,validate,dev]'\npython -m pytest -n auto\n",
    ]


def test_transfer_to_npu_section_sits_in_port_your_repository_and_says_when_it_is_enough():
    port = _section("## Port your repository")
    assert "### `transfer_to_npu` or a port?" in port
    text = _section("### `transfer_to_npu` or a port?")
    assert "monkey-patches" in text and "torch_npu/contrib/transfer_to_npu.py" in text
    assert "quick trial" in text and "will not maintain" in text
    for gain in ("a diff reviewers read", "no hidden patching", "in CI", "numerics proven"):
        assert gain in text


def test_portable_target_is_chosen_before_the_first_step():
    port = _section("## Port your repository")
    before_steps = port[:port.index("1. **")]
    assert "--target portable" in before_steps and "CUDA and on\nCPU" in before_steps
