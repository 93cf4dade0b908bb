"""The msprof-analyze advisor's AICPU rules (26.2.0, Apache-2.0), shipped as
`op_coverage/msprof_advisor/aicpu_rules.yaml` (a byte copy of `msprof_analyze/advisor/rules/en/aicpu_rules.yaml`).

Two kinds of rule, as the advisor has them:

* `DataTypeChecker` (per CANN version): the dtypes an operator type runs with on the AI Core; an input or
  output dtype outside the list "may cause AICPU issues". `__ALL__` covers every type but its `ignore_type`s.
* `ExampleGuideChecker`: operator types the advisor has a replacement guide for (index, indexput,
  nonzero; argmin only below CANN 7.0.RC1, where its guide says to update).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

RULES_FILE = "msprof_advisor/aicpu_rules.yaml"
SOURCE = "msprof-analyze 26.2.0 advisor/rules/en/aicpu_rules.yaml"
ALL = "__ALL__"
ARGMIN_FIXED_IN = "7.0.RC1"  # the argmin guide: "update your cann-toolkit to at least 7.0.RC1"

# census dtype names (migrator.catalogue.coverage.normalize_dtype) -> the advisor's names
ADVISOR_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "dt_bf16", "fp64": "float64"}
# what the advisor's "Try to convert to {}" suggests for a dtype outside a list
CONVERT_TO = {"float64": "float32", "uint16": "int32", "uint32": "int32", "uint64": "int64", "int16": "int32",
              "complex64": "two float32 tensors", "complex128": "two float32 tensors"}
# ATen op (without `aten::`, overload and trailing `_`) -> the advisor's operator type
OP_TYPE = {"_to_copy": "cast", "to": "cast", "eq": "equal", "equal": "tensorequal", "nonzero": "nonzero",
           "mul": "mul", "index": "index", "index_put": "indexput", "_index_put_impl": "indexput", "argmin": "argmin"}


class AdvisorRulesError(ValueError):
    """The shipped rule file is missing or malformed, or the CANN version is not in it."""


@dataclass(frozen=True)
class DataTypeRule:
    versions: tuple[str, ...]
    op_types: tuple[str, ...]
    ignore: tuple[str, ...]
    inputs: frozenset[str]
    outputs: frozenset[str]


@dataclass(frozen=True)
class GuideRule:
    checker: str  # IndexPutChecker, NonzeroChecker, CastChecker
    op_types: tuple[str, ...]
    url: str


@dataclass(frozen=True)
class AicpuRules:
    data_types: tuple[DataTypeRule, ...]
    guides: tuple[GuideRule, ...]

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(sorted({v for r in self.data_types for v in r.versions}, key=version_key))


def version_key(version: str) -> tuple[int, ...]:
    """`7.0.RC1` < `7.0.0` < `8.0.RC1`: a release candidate comes before its release."""
    parts = version.split(".")
    numbers = [int(p) for p in parts[:2] if p.isdigit()]
    last = parts[2] if len(parts) > 2 else "0"
    rc = re.fullmatch(r"RC(\d+)", last, re.IGNORECASE)
    return (*numbers, 0, int(rc.group(1))) if rc else (*numbers, 1, int(last) if last.isdigit() else 0)


def _names(raw: object) -> tuple[str, ...]:
    return tuple(str(x).lower() if str(x) != ALL else ALL for x in (raw or ()))  # type: ignore[attr-defined]


@lru_cache(maxsize=1)
def load() -> AicpuRules:
    import yaml

    from migrator.ground.resources import data_dir

    path = data_dir("op_coverage") / RULES_FILE
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        data_types = tuple(
            DataTypeRule(tuple(str(v) for v in spec["cann_version"]), _names(spec["op_type"]),
                         _names(spec.get("ignore_type")), frozenset(_names(spec["input"])),
                         frozenset(_names(spec["output"])))
            for item in raw["CommonChecker"] for spec in [item["DataTypeChecker"]])
        guides = tuple(GuideRule(name, _names(spec["op_type"]), str(spec.get("url", "")))
                       for item in raw["ExampleGuideChecker"] for name, spec in item.items())
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise AdvisorRulesError(f"{path}: cannot read the advisor's AICPU rules: {exc}") from None
    return AicpuRules(data_types, guides)


def newest_version() -> str:
    return load().versions[-1]


def checked_version(version: str | None) -> str:
    """`version`, or the newest in the data; an unknown one is an error naming the known ones."""
    versions = load().versions
    if version is None:
        return versions[-1]
    if version not in versions:
        raise AdvisorRulesError(f"unknown CANN version {version!r} for the advisor's AICPU rules; "
                                f"the data ({SOURCE}) has {', '.join(versions)}")
    return version


def op_type(aten: str) -> str | None:
    """`aten::mul_.Tensor` -> `mul`; an op the advisor has no specific rule for -> None (its `__ALL__`)."""
    base = aten.removeprefix("aten::").split(".", 1)[0]
    return OP_TYPE.get(base) or OP_TYPE.get(base.rstrip("_"))


def advisor_dtype(dtype: str) -> str:
    return ADVISOR_DTYPE.get(dtype, dtype)


def outside_dtypes(aten: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
                   version: str) -> tuple[str, ...]:
    """The advisor dtypes of this op's inputs and outputs that its rule for `version` leaves out."""
    kind = op_type(aten)
    rules = [r for r in load().data_types if version in r.versions]
    rule = (next((r for r in rules if kind is not None and kind in r.op_types), None)
            or next((r for r in rules if ALL in r.op_types and (kind is None or kind not in r.ignore)), None))
    if rule is None:
        return ()
    bad = [advisor_dtype(d) for d in inputs if advisor_dtype(d) not in rule.inputs]
    bad += [advisor_dtype(d) for d in outputs if advisor_dtype(d) not in rule.outputs]
    return tuple(dict.fromkeys(bad))


def guide_for(aten: str, version: str) -> GuideRule | None:
    """The advisor's replacement guide for this op's type, where it has one for `version`."""
    kind = op_type(aten)
    if kind is None or (kind == "argmin" and version_key(version) >= version_key(ARGMIN_FIXED_IN)):
        return None
    return next((g for g in load().guides if kind in g.op_types), None)
