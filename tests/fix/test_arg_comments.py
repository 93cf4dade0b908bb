"""Rebuilding a call's arguments keeps every comment and the author's lines (fix/transforms/arg_layout.py,
issue 39): dropping flash-attn's `return_attn_probs=False` or `deterministic=False` used to delete the
comment on the argument before it and reflow a one-per-line call."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

from migrator import api


def _fixed(tmp_path: Path, text: str, target: str = "npu") -> str:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(text)
    api.fix([tmp_path], root=tmp_path, target=target, use_cache=False)
    return (tmp_path / "m.py").read_text()


def _comments(text: str) -> list[str]:
    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]


MULTI_LINE = """\
from flash_attn import flash_attn_func


def attn(q, k, v):
    out = flash_attn_func(
        q,
        k,
        v,
        causal=True,  # True in prefill phase, False in subsequent phases
        return_attn_probs=False,
    )
    return out
"""


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_comment_on_the_argument_before_a_dropped_one_stays(tmp_path: Path, target: str) -> None:
    out = _fixed(tmp_path, MULTI_LINE, target)
    assert "return_attn_probs" not in out
    assert (
        "    out = _migrate_flash_attn(\n"
        "        q,\n"
        "        k,\n"
        "        v,\n"
        "        causal=True,  # True in prefill phase, False in subsequent phases\n"
        "    )\n"
    ) in out


def test_dropped_arguments_own_comments_stay(tmp_path: Path) -> None:
    text = (
        "from flash_attn import flash_attn_func\n\n\n"
        "def attn(q, k, v):\n"
        "    return flash_attn_func(q, k, v, causal=True,  # keep me\n"
        "                           deterministic=False,  # and me\n"
        "                           return_attn_probs=False)  # and the line's\n"
    )
    out = _fixed(tmp_path, text)
    assert "deterministic" not in out and "return_attn_probs" not in out
    assert set(_comments(text)) <= set(_comments(out))
    compile(out, "m.py", "exec")


def test_one_line_call_stays_one_line(tmp_path: Path) -> None:
    text = "from flash_attn import flash_attn_func\n\nout = flash_attn_func(q, k, v, causal=True, deterministic=False)\n"
    assert "out = _migrate_flash_attn(q, k, v, causal=True)\n" in _fixed(tmp_path, text)


def test_positional_argument_made_keyword_keeps_its_comment(tmp_path: Path) -> None:
    text = (
        "from flash_attn import flash_attn_func\n\n"
        "out = flash_attn_func(\n"
        "    q, k, v,\n"
        "    0.0,  # dropout\n"
        "    None,  # scale\n"
        "    True,  # causal\n"
        "    (-1, -1),\n"
        ")\n"
    )
    out = _fixed(tmp_path, text)
    assert set(_comments(text)) <= set(_comments(out))
    assert "window_size" not in out and "(-1, -1)" not in out


def test_comments_of_dropped_arguments_keep_their_order(tmp_path: Path) -> None:
    text = ("from flash_attn import flash_attn_func\n\n\ndef f(q, k, v):\n    return flash_attn_func(\n        q, k, v,\n"
            "        causal=True,  # prefill\n        return_attn_probs=False,  # never\n"
            "        deterministic=False,  # speed\n    )\n")
    out = _fixed(tmp_path, text)
    assert "        causal=True,  # prefill\n        # never\n        # speed\n    )\n" in out, out
