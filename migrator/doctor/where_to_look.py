"""Where to look for an error code `ascend_env/error_codes.yaml` does not explain, by the code's shape."""

from __future__ import annotations

import re
from functools import cache

import yaml

from migrator.ground.resources import data_dir

# the printed shapes of a code: CANN `E` + module + 4 digits, torch_npu `ERRmmccc`, a 6-digit ACL return code
CODE_SHAPE = re.compile(r"E[0-9A-Z]\d{4}|ERR\d{5}|\d{6}")


def code_key(text: str) -> str:
    """`ez 9999 ` -> `EZ9999`, `507 015` -> `507015`: a code typed in lower case or with stray spaces.
    Text that is no code comes back with its runs of whitespace collapsed."""
    collapsed = " ".join(text.split())
    compact = collapsed.replace(" ", "").upper()
    return compact if CODE_SHAPE.fullmatch(compact) else collapsed


@cache
def _hints() -> tuple[tuple[re.Pattern[str], str, str, str], ...]:
    data = yaml.safe_load((data_dir("ascend_env") / "error_codes.yaml").read_text(encoding="utf-8"))
    return tuple((re.compile(h["pattern"]), h["family"], " ".join(h["look"].split()), " ".join(h["source"].split()))
                 for h in data.get("where_to_look", []))


def where_to_look(code: str) -> str | None:
    """A sentence for an unexplained code of a known shape (`EZ3002`, `507015`), None for other text."""
    code = code_key(code).upper()
    for pattern, family, look, source in _hints():
        if pattern.match(code):
            return f"where to look: {code} has the shape of a {family} code, not explained here yet. {look} (source: {source})"
    return None
