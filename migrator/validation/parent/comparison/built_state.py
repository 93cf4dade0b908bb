"""S1's "state as built" check (issue 37 item 2): each side's ``make_model`` from the seed, before the
original's weights are loaded into both, compared parameter by parameter and buffer by buffer.

* a constant tensor of the original (``LayerScale.gamma`` = 0.1 everywhere, a zero bias, a mask buffer)
  must be the same constant in the port: exact up to fp32 rounding;
* a random initialisation is compared by its distribution, never by value (the port may draw in another
  order): the mean within 4 standard errors plus 5 % of the spread, the standard deviation within
  10 % plus 4 standard errors, and for tensors of ≥ 1000 values the largest magnitude within 50 %
  (a uniform and a normal draw of the same spread differ there);
* an integer or bool tensor (a relative-position index, a mask buffer) must hold the same values: its
  digest (recorded by the child) exactly;
* a shape or dtype that differs is named too (the weight copy reports names present on one side only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ...facts import CheckRow
from ...records import BuiltTensor
from ...verdict import Verdict

CHECK = "state as built (make_model from the seed, before weights are shared)"
CONSTANT_RTOL = 1e-6
LISTED = 3  # differences named in the message


def built_check(original: Mapping[str, BuiltTensor], migrated: Mapping[str, BuiltTensor]) -> CheckRow | None:
    """The check row (None when a side recorded nothing, e.g. a reference recorded by an older version)."""
    if not original or not migrated:
        return None
    problems = [f"{_label(name, o)}: {why}" for name, o in original.items()
                if (m := migrated.get(name)) is not None and (why := difference(o, m)) is not None]
    compared = sum(1 for name in original if name in migrated)
    if not problems:
        return CheckRow(check=CHECK, status=Verdict.PASS, tensors=compared,
                        message=f"{compared} parameters and buffers built alike")
    more = f" (and {len(problems) - LISTED} more)" if len(problems) > LISTED else ""
    return CheckRow(check=CHECK, status=Verdict.FAIL, tensors=compared, worst_tensor=problems[0].split(":")[0],
                    message="the port builds its model differently: " + "; ".join(problems[:LISTED]) + more)


def difference(o: BuiltTensor, m: BuiltTensor) -> str | None:
    """Why the migrated tensor is not built like the original's, or None."""
    if tuple(o.shape) != tuple(m.shape):
        return f"shape {tuple(o.shape)} vs {tuple(m.shape)}"
    if o.dtype != m.dtype:
        return f"dtype {o.dtype} vs {m.dtype}"
    if o.digest and m.digest:  # integer or bool values: exact
        return None if o.digest == m.digest else f"other {o.dtype} values: {_spread(o)} vs {_spread(m)}"
    if o.min == o.max:  # a constant: exact
        if m.min == m.max and math.isclose(m.min, o.min, rel_tol=CONSTANT_RTOL, abs_tol=1e-12):
            return None
        return f"all {o.min:.6g} vs {_spread(m)}"
    if m.min == m.max:
        return f"{_spread(o)} vs all {m.min:.6g}"
    n = max(math.prod(o.shape), 1)
    if abs(m.mean - o.mean) > 4 * o.std / math.sqrt(n) + 0.05 * o.std:
        return f"mean {o.mean:.4g} vs {m.mean:.4g} (std {o.std:.4g})"
    if abs(m.std - o.std) > o.std * (0.1 + 4 / math.sqrt(2 * n)):
        return f"std {o.std:.4g} vs {m.std:.4g}"
    big_o, big_m = max(abs(o.min), abs(o.max)), max(abs(m.min), abs(m.max))
    if n >= 1000 and big_o > 0 and abs(big_m / big_o - 1) > 0.5:
        return f"largest magnitude {big_o:.4g} vs {big_m:.4g} (another distribution)"
    return None


def _label(name: str, t: BuiltTensor) -> str:
    module, _, attr = name.rpartition(".")
    return f"{module or '(model)'} ({t.cls}).{attr}" if t.cls else name


def _spread(t: BuiltTensor) -> str:
    return f"all {t.min:.6g}" if t.min == t.max else f"mean {t.mean:.4g}, std {t.std:.4g}, range [{t.min:.4g}, {t.max:.4g}]"
