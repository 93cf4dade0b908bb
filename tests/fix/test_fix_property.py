"""Property test: on generated programs (hypothesmith) mixed with CUDA snippets, `migrate fix`
never raises, every file it writes parses, untouched files stay byte-identical, and fixing the
output again changes nothing."""

from __future__ import annotations

import ast
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from migrator import api  # noqa: E402

HEADER = "import torch\nimport torch.distributed as dist\nfrom flash_attn import flash_attn_func\n"
SNIPPETS = [
    "x = y.cuda()\n",
    "torch.cuda.synchronize()\n",
    'dist.init_process_group(backend="nccl")\n',
    'dev = torch.device("cuda:0")\n',
    "out = flash_attn_func(q, k, v, causal=True)\n",
    "with torch.cuda.amp.autocast():\n    pass\n",
    'if t.device.type == "cuda":\n    t = t.cpu()\n',
    'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n',
]
UNTOUCHED = b"# not a CUDA file\nvalue = 1\n"


def _valid_python(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError):
        return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    body=hypothesmith.from_grammar().filter(_valid_python),
    snippets=st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=4),
    before=st.booleans(),
)
def test_fix_is_safe_on_generated_programs(body, snippets, before):
    work = Path(tempfile.mkdtemp())
    try:
        (work / "pyproject.toml").write_text("")
        cuda = "".join(snippets)
        text = HEADER + (cuda + body if before else body.rstrip("\n") + "\n" + cuda)
        if not _valid_python(text):
            return  # the generated body ended inside a construct the snippets cannot follow
        (work / "gen.py").write_text(text, encoding="utf-8")
        (work / "other.py").write_bytes(UNTOUCHED)
        outcome = api.fix([work], use_cache=False)  # must not raise
        after = (work / "gen.py").read_text(encoding="utf-8")
        assert _valid_python(after)
        assert (work / "other.py").read_bytes() == UNTOUCHED
        if outcome.errors:
            assert after == text  # a file the fixer could not handle is left exactly as it was
        again = api.fix([work], write=False, use_cache=False)
        assert again.changed_files == [], "fixing the fixed output changed it again"
    finally:
        shutil.rmtree(work, ignore_errors=True)
