"""Programs for the fix properties: every syntax shape Python 3.8-3.13 allows, each with CUDA uses
inside it, and the property check itself (shared by tests/fix/test_fix_property.py and
bench/fix_property_bench.py).

Properties of `migrate fix` on such a program: it never raises and reports no file error, every file
it writes parses, a file it made no edit in stays byte-identical, and fixing the output again
changes nothing.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

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

# name -> a top-level block in that syntax, with CUDA uses where the shape puts constraints on them
SHAPES = {
    "star-import": "from os import *\nfrom torch.cuda import *\nfrom apex import amp\nm = amp.initialize(m, opt_level='O1')\nz = w.cuda()\n",
    "form-feed": '\x0c\ndef ff():\n\x0c    return torch.zeros(1).to("cuda")\n\n\nclass FF:\n    a = 1\n\x0c    b = "cuda:0"\n',
    "match-case": (
        "def route(d, t):\n"
        "    match d:\n"
        '        case "cuda":\n'
        "            return t.cuda()\n"
        '        case "cuda:0" | "cpu":\n'
        "            return 1\n"
        '        case {"device": "cuda", **rest}:\n'
        "            return rest\n"
        "        case torch.cuda.Stream():\n"
        "            return 2\n"
        "        case [first, *others] if first.is_cuda:\n"
        '            return torch.device("cuda")\n'
        "        case _:\n"
        "            return torch.cuda.current_device()\n"
    ),
    "walrus": 'if (n := torch.cuda.device_count()) > 1:\n    dev = (d := "cuda:0")\n',
    "decorators": (
        "@torch.cuda.amp.custom_fwd\n"
        "def fwd(ctx, x):\n"
        "    return x.cuda()\n"
        "\n\n"
        "@(lambda c: c)\n"
        "class Deco:\n"
        "    @staticmethod\n"
        "    @torch.no_grad()\n"
        "    def m():\n"
        "        return torch.cuda.current_device()\n"
    ),
    "global-nonlocal": (
        "def outer():\n"
        '    dev = "cuda"\n'
        "\n"
        "    def inner():\n"
        "        nonlocal dev\n"
        "        global STREAM\n"
        "        STREAM = torch.cuda.Stream()\n"
        '        dev = "cuda:1"\n'
        "\n"
        "    return inner\n"
    ),
    "async": (
        "async def feed(batches, lock, send):\n"
        "    async with lock:\n"
        "        async for b in batches:\n"
        "            await send(b.cuda())\n"
        "    return [await send(c.cuda()) async for c in batches]\n"
    ),
    "except-star": 'try:\n    torch.cuda.synchronize()\nexcept* RuntimeError:\n    e = torch.zeros(1, device="cuda")\n',
    "positional-only": 'def put(t, /, device="cuda", *, non_blocking=False):\n    return t.cuda(non_blocking=non_blocking)\n',
    "parenthesised-with": "with (\n    torch.cuda.amp.autocast(),\n    torch.cuda.stream(s) as st,\n):\n    p = x.cuda()\n",
    "f-strings": (
        "print(f\"{torch.device(0)} {t.is_cuda!r:>10} {'cuda'} {x.cuda()}\")\n"
        "name = f\"cuda:{rank}\"\n"
        "nested = f'{f\"{torch.cuda.device_count()}\"}'\n"
    ),
    "lambda-comprehension": "moves = [t.cuda() for t in ts if t.is_cuda]\nto_dev = lambda t: t.to(\"cuda\")\n",
    "semicolons-and-suites": 'if x: y = x.cuda(); torch.cuda.synchronize()\nwhile False: d = "cuda"\n',
    "try-import": "try:\n    from flash_attn import flash_attn_varlen_func\nexcept ImportError:\n    flash_attn_varlen_func = None\n",
    "class-body": "class Trainer:\n    device = torch.device(\"cuda\")\n\n    def step(self, b):\n        return b.cuda()\n",
}
SHAPES_312 = {  # PEP 695 type parameters and aliases, PEP 701 f-strings
    "type-params": (
        "type Dev = torch.device\n"
        "\n\n"
        "def to_dev[T](t: T) -> T:\n"
        "    return t.cuda()\n"
        "\n\n"
        "class Box[T]:\n"
        "    def get(self) -> T:\n"
        "        return torch.cuda.current_device()\n"
    ),
    "pep701-f-strings": 'print(f"{"cuda"} {f"{x.cuda()}"} {torch.device("cuda:0")}")\n',
}
SHAPES_313 = {"type-param-defaults": "def with_default[T = int](x: T) -> T:\n    return x.cuda()\n"}  # PEP 696


def shapes_for(version: tuple[int, int] = sys.version_info[:2]) -> dict[str, str]:
    """The shapes the running Python parses (the scanner parses with it)."""
    shapes = dict(SHAPES)
    if version >= (3, 12):
        shapes.update(SHAPES_312)
    if version >= (3, 13):
        shapes.update(SHAPES_313)
    return shapes


CUDA_FREE = b"# not a CUDA file\nvalue = 1\n"


def valid_python(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError):
        return False


def program(body: str, shapes: list[str], snippets: list[str], body_first: bool) -> str:
    cuda = "".join(snippets) + "\n\n".join(shapes)
    return HEADER + (cuda + body if body_first else body.rstrip("\n") + "\n" + cuda)


def check_fix_properties(work: Path, text: str, target: str = "npu", neighbour: bytes = CUDA_FREE) -> Counter:
    """Fix `gen.py` (holding `text`) next to `other.py` (`neighbour`) in `work`; assert the properties.

    Returns counts of what happened (applied and declined sites, declined reasons)."""
    from migrator import api

    (work / "pyproject.toml").write_text("")
    (work / "gen.py").write_text(text, encoding="utf-8")
    (work / "other.py").write_bytes(neighbour)
    outcome = api.fix([work], target=target, use_cache=False)  # must not raise
    assert outcome.errors == [], outcome.errors
    after = (work / "gen.py").read_text(encoding="utf-8")
    assert valid_python(after), "fix wrote a file that does not parse"
    changes = {c.path: c for c in outcome.plan.changes}
    for name, change in changes.items():
        if change.runtime_module:  # the portable target's one module per tree: exactly the tested source
            from migrator.fix import runtime_module

            assert change.after == runtime_module.text() and name.endswith(runtime_module.MODULE_FILE)
        elif not change.edits:
            assert change.after == change.before, f"{name} changed without an edit"
    if "other.py" not in changes or not changes["other.py"].edits:
        assert (work / "other.py").read_bytes() == neighbour, "a file without edits was rewritten"
    again = api.fix([work], target=target, write=False, use_cache=False)
    assert again.changed_files == [], f"fixing the fixed output changed it again: {again.changed_files}"
    counts: Counter = Counter()
    for change in changes.values():
        counts["applied"] += len(change.edits)
        for _, reason in change.declined:
            counts["declined"] += 1
            counts[f"declined: {reason}"] += 1
    return counts


def program_strategy(generated_bodies: bool = True):
    """Hypothesis strategy of (program text, target): shapes and CUDA snippets in random order and
    number, around a hypothesmith-generated module when `generated_bodies`."""
    from hypothesis import strategies as st

    shapes = shapes_for()
    body = st.just("")
    if generated_bodies:
        import hypothesmith

        body = hypothesmith.from_grammar().filter(valid_python)
    return st.tuples(
        body,
        st.lists(st.sampled_from(sorted(shapes)), max_size=4).map(lambda names: [shapes[n] for n in names]),
        st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=4),
        st.booleans(),
        st.sampled_from(["npu", "portable"]),
    ).map(lambda t: (program(t[0], t[1], t[2], t[3]), t[4]))
