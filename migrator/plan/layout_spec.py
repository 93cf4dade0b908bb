"""`--layout tp=8,pp=35,vpp=3,dp=8,cp=1,ep=1,zero=1,recompute=selective,sp=on,mb=1` -> a Layout.

Malformed text (unknown key, not a number, a repeated key) is a LayoutSyntaxError, a usage error (exit 2);
whether the layout can run on the model and cluster is `estimate.layout_problems` (exit 1).
"""

from __future__ import annotations

from .cost import Layout

_INTS = {"tp": "tp", "pp": "pp", "vpp": "vpp", "dp": "dp", "cp": "cp", "ep": "ep", "zero": "zero",
         "mb": "micro_batch", "micro_batch": "micro_batch", "etp": "etp", "last": "last"}
_RECOMPUTE = ("none", "selective", "full")
_ON, _OFF = ("on", "true", "1", "yes"), ("off", "false", "0", "no")


class LayoutSyntaxError(ValueError):
    """The --layout text cannot be read (names the part and what is allowed)."""


def _value(text: str, key: str, name: str, raw: str) -> object:
    """One key's value read from its text: recompute's name, sp's switch, or a whole number in range."""
    if name == "recompute":
        if raw not in _RECOMPUTE:
            raise LayoutSyntaxError(f"--layout {text!r}: recompute is one of {', '.join(_RECOMPUTE)}")
        return raw
    if name in ("sp", "mc2"):
        if raw not in _ON + _OFF:
            raise LayoutSyntaxError(f"--layout {text!r}: {name} is on or off")
        return raw in _ON
    if not raw.isdigit():
        raise LayoutSyntaxError(f"--layout {text!r}: {key} takes a whole number, got {raw!r}")
    number = int(raw)
    if number < (0 if name in ("zero", "etp", "last") else 1) or (name == "zero" and number > 3):
        raise LayoutSyntaxError(f"--layout {text!r}: {key} = {number} is out of range "
                                + ("(0-3)" if name == "zero" else "(at least 0)" if name in ("etp", "last") else "(at least 1)"))
    return number


def _given_values(text: str) -> dict[str, object]:
    """The KEY=VALUE parts of the text by Layout field name."""
    values: dict[str, object] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, raw = part.partition("=")
        key, raw = key.strip().lower(), raw.strip().lower()
        if not sep or not raw:
            raise LayoutSyntaxError(f"--layout {text!r}: {part!r} is not KEY=VALUE")
        name = _INTS.get(key) or ({"recompute": "recompute", "sp": "sp", "mc2": "mc2"}.get(key))
        if name is None:
            raise LayoutSyntaxError(f"--layout {text!r}: unknown key {key!r} (known: tp, pp, vpp, dp, cp, ep, etp, "
                                    "zero, recompute, sp, mc2, mb, last)")
        if name in values:
            raise LayoutSyntaxError(f"--layout {text!r}: {key} given twice")
        values[name] = _value(text, key, name, raw)
    if not values:
        raise LayoutSyntaxError(f"--layout {text!r}: empty")
    return values


def parse_layout(text: str, devices: int | None = None) -> Layout:
    """Keys left out keep Layout's defaults, except dp: devices / (tp x cp x pp) when --devices is given."""
    values = _given_values(text)
    if "dp" not in values and devices:
        inner = int(values.get("tp", 1)) * int(values.get("cp", 1)) * int(values.get("pp", 1))  # type: ignore[call-overload]
        values["dp"] = max(1, devices // inner)
    if "zero" not in values and int(values.get("dp", 1)) * int(values.get("cp", 1)) == 1:  # type: ignore[call-overload]
        values["zero"] = 0
    return Layout(**values)  # type: ignore[arg-type]
