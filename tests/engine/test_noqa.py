"""`# noqa: CODE` suppresses like `# migrate: ignore[CODE]` (issue 44 item 5); a bare `# noqa` does not."""

from __future__ import annotations

from migrator import api


def _scan(tmp_path, body: str):
    (tmp_path / "m.py").write_text("import torch\nx = torch.zeros(2)\n" + body)
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    return [(f.line, f.code) for f in result.findings if f.family != "coverage"], result.summary.suppressed


def test_noqa_with_our_code_suppresses_like_migrate_ignore(tmp_path):
    noqa = _scan(tmp_path, "y = x.cuda()  # noqa: DEV010\n")
    ours = _scan(tmp_path, "y = x.cuda()  # migrate: ignore[DEV010]\n")
    assert noqa == ours == ([], 1)


def test_noqa_lists_with_other_tools_codes(tmp_path):
    for comment in ("# noqa: E501, DEV010", "# noqa:F401,DEV010", "# NOQA: E501 dev010"):
        assert _scan(tmp_path, f"y = x.cuda()  {comment}\n") == ([], 1), comment


def test_bare_noqa_and_other_codes_do_not_suppress_and_are_not_reported(tmp_path):
    for comment in ("# noqa", "# noqa: E501", "# noqa: DEV001"):
        assert _scan(tmp_path, f"y = x.cuda()  {comment}\n") == ([(3, "DEV010")], 0), comment


def test_noqa_applies_to_its_own_line_only(tmp_path):
    assert _scan(tmp_path, "# noqa: DEV010\ny = x.cuda()\n") == ([(4, "DEV010")], 0)
