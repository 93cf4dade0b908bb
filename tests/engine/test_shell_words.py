"""Shell words come from shlex (POSIX quoting, operators) and keep the column they are written at;
Dockerfile exec-form lists are read as JSON."""

from __future__ import annotations

from migrator.engine.shell_words import commands, words
from migrator.engine.text_checkers import check_dockerfile, check_shell


def _cmds(text: str) -> list[list[tuple[str, int]]]:
    return [[(w.text, w.offset) for w in c] for c in commands(text)]


def test_quoted_words_point_inside_their_quotes():
    text = "pip install \"flash-attn==2.5\" 'a b' x\\ y"
    assert [(w.text, w.offset) for w in words(text)] == [
        ("pip", 0), ("install", 4), ("flash-attn==2.5", 13), ("a b", 31), ("x y", 36),
    ]


def test_operators_split_commands_but_not_inside_quotes():
    text = 'echo "a && b" && pip install x; (conda install y) | tee log `nvcc` $(pip install z)'
    assert [[w for w, _ in c] for c in commands(text)] == [
        ["echo", "a && b"], ["pip", "install", "x"], ["conda", "install", "y"], ["tee", "log"], ["nvcc"], ["$"],
        ["pip", "install", "z"],
    ]


def test_redirections_and_their_targets_are_left_out():
    assert _cmds("pip install x 2>&1 >/dev/null < in.txt y") == [[("pip", 0), ("install", 4), ("x", 12), ("y", 39)]]
    assert _cmds("pip install flash-attn>=2") == [[("pip", 0), ("install", 4), ("flash-attn", 12)]]  # `>` redirects


def test_unclosed_quote_and_trailing_backslash_still_give_words():
    assert _cmds('pip install "flash-attn') == [[("pip", 0), ("install", 4), ("flash-attn", 13)]]
    assert _cmds("pip install xformers \\") == [[("pip", 0), ("install", 4), ("xformers", 12), (" ", 21)]]


def test_word_not_written_verbatim_is_placed_at_its_first_character():
    text = "pip install 'flash'\"-attn\" triton"
    assert _cmds(text) == [[("pip", 0), ("install", 4), ("flash-attn", 12), ("triton", 27)]]


def test_install_columns_in_scripts():
    hits = list(check_shell(("conda install -c nvidia 'cuda-toolkit=12.1' && pip install \"xformers\" # comment",)))
    assert [(h.key, h.column, h.symbol) for h in hits] == [
        ("impl:cuda-system-package", 26, "cuda-toolkit"),
        ("impl:cuda-only-requirement", 61, "xformers"),
    ]


def test_dockerfile_exec_form_is_read_as_json_even_over_continued_lines():
    lines = (
        "FROM ubuntu:22.04",
        'RUN ["pip", "install", "flash-attn==2.5"]',
        'RUN ["sh", "-c", "pip install xformers && apt-get install -y libnccl2"]',
        'RUN ["pip", \\',
        '     "install", "triton"]',
        'CMD ["python", "train.py", "--device", "cuda"]',
        'RUN ["pip", "install", "a\\u0062c", "mamba-ssm"]',  # an escaped argument is left out, the rest read
    )
    hits = [(h.line, h.column, h.symbol) for h in check_dockerfile(lines)]
    assert hits == [
        (2, 25, "flash-attn"),
        (3, 31, "xformers"),
        (3, 62, "libnccl2"),
        (5, 18, "triton"),
        (7, 37, "mamba-ssm"),
        (6, 41, "cuda"),
    ]
