"""The report's syntax highlighting (pygments lexers, the page's own classes): what is coloured,
that everything is escaped and made visible, and that a marked span does not change the colours."""

from __future__ import annotations

import re

from migrator.reporters.highlight import highlight, highlight_block, highlight_spans


def _classes(html: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for css, text in re.findall(r'<span class="(tk-\w)">(.*?)</span>', html):
        found.setdefault(css, []).append(text)
    return found


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_python_tokens():
    line = '@torch.no_grad()\ndef f(x=1.5):  # note\n    return "s" if x and not None else 0x1F'
    html = str(highlight(line, "python"))
    got = _classes(html)
    assert {"def", "return", "if", "and", "not", "None", "else"} <= set(got["tk-k"])
    assert got["tk-c"] == ["# note"] and "1.5" in got["tk-n"] and "0x1F" in got["tk-n"]
    assert got["tk-s"] == ["&#34;s&#34;"] and got["tk-d"][0].startswith("@torch")
    assert _text(html).replace("&#34;", '"') == line  # nothing added or lost


def test_shell_c_and_toml_tokens():
    shell = _classes(str(highlight('export CUDA_VISIBLE_DEVICES=$RANK  # one card', "shell")))
    assert shell["tk-k"] == ["export"] and "$RANK" in shell["tk-v"] and shell["tk-c"] == ["# one card"]
    c = _classes(str(highlight("#include <cuda.h>\n__global__ void k(float* x) { x[0] = 0.f; }  // zero", "c")))
    assert "#include" in c["tk-d"] and {"__global__", "void", "float"} <= set(c["tk-k"]) and c["tk-c"] == ["// zero"]
    toml = _classes(str(highlight('[project]\nname = "demo"  # x', "toml")))
    assert toml["tk-s"] == ["&#34;demo&#34;"] and toml["tk-c"] == ["# x"]


def test_markup_escaped_and_control_characters_shown():
    html = str(highlight('x = "</script><img src=x onerror=alert(1)>"  # \x1b[31mred \u202e', "python"))
    assert "<img" not in html and "</script>" not in html and "&lt;/script&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html and "\\x1b" in html and "&lt;U+202E&gt;" in html


def test_marked_span_keeps_the_line_coloured_as_a_whole():
    line = 'y = torch.ones(1).cuda()  # "quoted"'
    start = line.index(".cuda")
    html = str(highlight_spans(line, [(start, start + 7)], "python"))
    assert '<mark class="hit">.cuda()</mark>' in html
    assert _classes(html)["tk-c"] == ["# &#34;quoted&#34;"]  # the comment after the mark is still one comment
    # a mark in the middle of a string: both halves stay strings
    text = 's = "abcdef"'
    split = str(highlight_spans(text, [(7, 9)], "python"))
    assert re.search(r'<mark class="hit"><span class="tk-s">cd</span></mark>', split)
    assert _text(split).replace("&#34;", '"') == text


def test_fenced_block():
    block = highlight_block("import torch\nx = 1\n", "py")
    assert block.startswith('<pre class="code"><code>') and '<span class="tk-k">import</span>' in block
    assert "x = <span" in block and block.endswith("</code></pre>\n")
