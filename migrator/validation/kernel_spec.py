"""What `migrate validate --kernel FILE::KERNEL --kernel-args SPEC --grid G` asks for, parsed (no torch).

SPEC is comma-separated `name:dtype[d0,d1,...]` tensors (random, from the seed; `~lo:hi` after the shape
draws integers in [lo, hi) or floats uniform in it) and `name=value` scalars (int, float, True/False, None, a
quoted string for a string constexpr such as `ACTIVATION='relu'`), e.g.
`x:float32[4096],y:float32[4096],out:float32[4096],n=4096,BLOCK=1024`; or a JSON object
`{"x": "float32[4096]", "n": 4096, "w": null, "reduction": "'mean'"}`. The grid is `4096` or `16,8` (at most 3 dimensions).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
TENSOR = re.compile(r"^(?P<dtype>\w+)\[(?P<shape>[\d,\s]*)\](?:~(?P<lo>-?[\d.e+-]+):(?P<hi>-?[\d.e+-]+))?$")


class KernelSpecError(ValueError):
    """A `--kernel` / `--kernel-args` / `--grid` value that cannot be read: the message says which part."""


@dataclass(frozen=True)
class TensorArg:
    name: str
    dtype: str
    shape: tuple[int, ...]
    low: float | None = None  # the range random values are drawn from (None: normal for floats, 0..16 for ints)
    high: float | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class ScalarArg:
    name: str
    value: int | float | bool | str | None  # None: an unused pointer (`weight_ptr=None`); str: a string constexpr


KernelArg = TensorArg | ScalarArg


@dataclass(frozen=True)
class KernelRef:
    path: str
    kernel: str


def parse_kernel(text: str) -> KernelRef:
    path, sep, kernel = text.rpartition("::")
    if not sep or not path or not kernel.isidentifier():
        raise KernelSpecError(f"--kernel {text!r}: expected FILE::KERNEL (e.g. ops/softmax.py::softmax_kernel)")
    return KernelRef(path, kernel)


def parse_grid(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(p) for p in text.strip().strip("()").split(",") if p.strip())
    except ValueError:
        raise KernelSpecError(f"--grid {text!r}: expected integers such as 64 or 16,8") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise KernelSpecError(f"--grid {text!r}: one to three dimensions, each at least 1")
    return dims


def parse_args(text: str) -> tuple[KernelArg, ...]:
    text = text.strip()
    if text.startswith("{"):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise KernelSpecError(f"--kernel-args: not valid JSON ({exc})") from None
        if not isinstance(items, dict):
            raise KernelSpecError("--kernel-args: the JSON form is an object {name: value}")
        return tuple(_arg(str(k), v) for k, v in items.items())
    parts = _split(text)
    out: list[KernelArg] = []
    for part in parts:
        if "=" in part and (":" not in part or part.index("=") < part.index(":")):
            name, _, value = part.partition("=")
            out.append(ScalarArg(_checked(name.strip()), _scalar(name.strip(), value.strip())))
        elif ":" in part:
            name, _, value = part.partition(":")
            out.append(_tensor(name.strip(), value.strip()))
        else:
            raise KernelSpecError(f"--kernel-args: {part!r} is neither name:dtype[shape] nor name=value")
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise KernelSpecError(f"--kernel-args: {sorted({n for n in names if names.count(n) > 1})} given twice")
    return tuple(out)


def _split(text: str) -> list[str]:
    """Split at the commas outside brackets (`x:float32[4,8],n=4` -> two parts)."""
    parts, depth, start, quote = [], 0, 0, ""
    for i, ch in enumerate(text):
        if ch in "'\"" and quote in ("", ch):
            quote = "" if quote else ch
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0 and not quote:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _checked(name: str) -> str:
    if not name.isidentifier():
        raise KernelSpecError(f"--kernel-args: {name!r} is not a parameter name")
    return name


def _arg(name: str, value: object) -> KernelArg:
    _checked(name)
    if isinstance(value, str):
        quoted = _quoted(value)
        return ScalarArg(name, quoted) if quoted is not None else _tensor(name, value)
    if value is None or isinstance(value, bool | int | float):
        return ScalarArg(name, value)
    raise KernelSpecError(f"--kernel-args: {name}: {value!r} is neither a number nor a dtype[shape]")


def _quoted(text: str) -> str | None:
    """`'relu'` / `"relu"` -> relu; None when `text` is not one quoted string."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and text[0] not in text[1:-1]:
        return text[1:-1]
    return None


def _scalar(name: str, text: str) -> int | float | bool | str | None:
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if (quoted := _quoted(text)) is not None:
        return quoted
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    raise KernelSpecError(f"--kernel-args: {name}={text!r} is not a number, True/False, None or a quoted string")


def _tensor(name: str, text: str) -> TensorArg:
    m = TENSOR.match(text.replace(" ", ""))
    if m is None or m.group("dtype") not in DTYPES:
        raise KernelSpecError(f"--kernel-args: {name}:{text!r}: expected dtype[shape] with dtype one of {', '.join(DTYPES)}")
    try:
        shape = tuple(int(d) for d in m.group("shape").split(",") if d)
        low = float(m.group("lo")) if m.group("lo") is not None else None
        high = float(m.group("hi")) if m.group("hi") is not None else None
    except ValueError:
        raise KernelSpecError(f"--kernel-args: {name}:{text!r}: bad shape or range") from None
    if not shape or any(d < 1 for d in shape) or (low is not None and high is not None and high <= low):
        raise KernelSpecError(f"--kernel-args: {name}:{text!r}: a shape of positive sizes (and lo < hi)")
    return TensorArg(name, m.group("dtype"), shape, low, high)
