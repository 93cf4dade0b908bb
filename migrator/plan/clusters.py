"""Cluster profiles: the shipped `clusters/profiles.yaml` plus the user's `[tool.migrate.clusters]`.

Every figure keeps its source and its provenance kind (`flag`: first-party / announced / derived /
calibrated / measured / user). `calibrated` (`plan --calibrate`: fitted to a step time measured on the
machine) ranks above derived and announced and just below measured: `--strict` accepts it. A shipped
figure that is null takes its derived default from `calibration.DERIVED_FIGURES` if there is one;
otherwise it is never guessed: `Cluster.need(key)` raises :class:`MissingFigure`, which names the
profile, the key and where to set it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from migrator.ground.resources import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FLAGS = ("first-party", "announced", "derived", "calibrated", "measured", "user")
STRICT_FLAGS = ("first-party", "measured", "calibrated")  # what `plan --strict` accepts
_OLD_FLAGS = {"verified": "first-party"}
KEYS = ("devices", "devices_per_node", "domain_size", "domain_GBps", "scale_out_GBps", "hbm_GB", "hbm_GBps",
        "storage_write_GBps")
DTYPES = ("bf16", "fp16", "fp8", "fp32")
# the cost model's efficiencies a cluster may carry (`plan --calibrate` fits them): fractions of the peak
EFFICIENCY_KEYS = ("gemm_efficiency", "attention_efficiency", "link_efficiency")
# what `plan --measure` and `plan --calibrate` record besides figures
META = ("title", "base", "device", "date", "versions", "backend", "calibration")


class ClusterError(ValueError):
    """Unknown profile or bad profile data (the message names the file and the key)."""


class MissingFigure(ClusterError):
    """A figure the plan needs has no sourced value."""


@dataclass(frozen=True)
class Figure:
    value: float | None
    flag: str
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "flag": self.flag, "source": self.source}


@dataclass(frozen=True)
class Cluster:
    name: str
    title: str
    figures: tuple[tuple[str, Figure], ...]
    origin: str  # the file it came from
    calibration: tuple[str, ...] = ()  # `plan --calibrate`'s record: the runs, before and after (for --explain)

    def figure(self, key: str) -> Figure:
        found = self._by_key.get(key)
        return found if found is not None else Figure(None, "user", "not in the profile")

    @cached_property
    def _by_key(self) -> dict[str, Figure]:  # a plan search asks ~10^5 times: not a new dict each time
        return dict(self.figures)

    def need(self, key: str) -> float:
        fig = self.figure(key)
        if fig.value is None:
            raise MissingFigure(
                f"cluster {self.name!r}: {key} has no sourced value ({fig.source}); it is a required input: "
                f"set it in pyproject.toml as [tool.migrate.clusters.{self.name}] {key} = <number>")
        return float(fig.value)

    def peak_tflops(self, dtype: str) -> float:
        return self.need(f"peak_tflops_{dtype}")

    @property
    def ascend(self) -> bool:
        """Huawei Ascend hardware (MC2, the fused matmul + TP collective, exists only there)."""
        return "ascend" in self.title.lower()

    def with_devices(self, devices: int) -> Cluster:
        return self.with_figures({"devices": Figure(devices, "user", "--devices")})

    def with_figures(self, changes: dict[str, Figure]) -> Cluster:
        return Cluster(self.name, self.title, tuple({**dict(self.figures), **changes}.items()), self.origin,
                       self.calibration)

    def efficiencies(self) -> dict[str, float]:
        """The efficiency figures this cluster sets (calibrated ones), to replace the global assumptions."""
        return {k: float(f.value) for k in EFFICIENCY_KEYS if (f := self.figure(k)).value is not None}

    def used(self, dtype: str) -> list[tuple[str, Figure]]:
        """The figures a plan in DTYPE reads (other dtypes' peaks left out), with their values."""
        return [(k, f) for k, f in self.figures if f.value is not None
                and (not k.startswith("peak_tflops_") or k == f"peak_tflops_{dtype}")]

    def not_strict(self, dtype: str) -> list[str]:
        """`KEY (flag)` for each figure a plan in DTYPE reads that is neither measured, calibrated nor first-party."""
        return [f"{k} ({f.flag})" for k, f in self.used(dtype) if f.flag not in STRICT_FLAGS]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "origin": self.origin,
                "figures": {k: f.to_json() for k, f in self.figures},
                **({"calibration": list(self.calibration)} if self.calibration else {})}


def _figure(raw: Any, where: str) -> Figure:
    if isinstance(raw, dict):
        value, flag, source = raw.get("value"), raw.get("flag", "user"), raw.get("source", "")
    else:
        value, flag, source = raw, "user", ""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise ClusterError(f"{where}: value must be a positive number or null, got {value!r}")
    flag = _OLD_FLAGS.get(flag, flag)
    if flag not in FLAGS:
        raise ClusterError(f"{where}: flag must be one of {', '.join(FLAGS)}, got {flag!r}")
    if value is not None and flag != "user" and not source:
        raise ClusterError(f"{where}: a {flag} figure needs a source")
    return Figure(value, flag, str(source))


def split_assume(pairs: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, Figure]]:
    """`--assume` pairs naming a cluster figure (`peak_tflops_bf16=300`) become user figures; the rest are
    left for `assumptions.parse_assume`."""
    rest, figures = [], {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if not _known(key.strip()):
            rest.append(pair)
            continue
        try:
            value = float(raw)
        except ValueError:
            raise ClusterError(f"--assume {pair!r}: {key.strip()} takes a number") from None
        figures[key.strip()] = _figure({"value": value, "flag": "user", "source": "--assume"}, f"--assume {pair!r}")
    return tuple(rest), figures


def _known(key: str) -> bool:
    return key in KEYS or (key.startswith("peak_tflops_") and key[len("peak_tflops_"):] in DTYPES)


def _profile(name: str, raw: Any, origin: str, base: Cluster | None = None) -> Cluster:
    if not isinstance(raw, dict):
        raise ClusterError(f"{origin}: cluster {name!r} must be a table")
    figs = dict(base.figures) if base else {}
    for key, value in raw.items():
        if key in META:
            continue
        if not _known(key) and key not in EFFICIENCY_KEYS:
            raise ClusterError(f"{origin}: cluster {name!r}: unknown key {key!r} "
                               f"(known: {', '.join(KEYS + EFFICIENCY_KEYS)}, peak_tflops_{{{','.join(DTYPES)}}})")
        fig = _figure(value, f"{origin}: cluster {name!r} {key}")
        if key in EFFICIENCY_KEYS and fig.value is not None and fig.value > 1:
            raise ClusterError(f"{origin}: cluster {name!r} {key}: an efficiency is a fraction of the peak "
                               f"(0 < value <= 1), got {fig.value!r}")
        if origin.endswith("pyproject.toml") and not isinstance(value, dict):
            fig = Figure(fig.value, "user", origin)
        figs[key] = fig
    title = str(raw.get("title") or (base.title if base else name))
    return Cluster(name, title, tuple(figs.items()), origin, _calibration_lines(raw.get("calibration"), origin, name))


def _calibration_lines(raw: Any, origin: str, name: str) -> tuple[str, ...]:
    """`calibration = {lines = [...]}` as `plan --calibrate` writes it (what --explain prints)."""
    if raw is None:
        return ()
    lines = raw.get("lines") if isinstance(raw, dict) else None
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise ClusterError(f"{origin}: cluster {name!r} calibration: expected a table with lines = [strings] "
                           "(as `migrate plan --calibrate` writes it)")
    return tuple(lines)


def _with_derived(cluster: Cluster) -> Cluster:
    """A shipped profile's null figures filled from `calibration.DERIVED_FIGURES`, flagged derived."""
    from .calibration import DERIVED_FIGURES

    derived = {key: Figure(value, "derived", source)
               for key, (value, source) in DERIVED_FIGURES.get(cluster.name, {}).items()
               if cluster.figure(key).value is None}
    return cluster.with_figures(derived) if derived else cluster


@cache
def builtin() -> dict[str, Cluster]:
    import yaml

    path = data_dir("clusters") / "profiles.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ClusterError(f"{path}: cannot read cluster profiles: {exc}") from None
    return {name: _with_derived(_profile(name, raw, str(path))) for name, raw in data.items()}


def user_profiles(root: Path | None) -> dict[str, Cluster]:
    """`[tool.migrate.clusters.NAME]` tables of ROOT/pyproject.toml; `base = "a2-8x"` starts from a shipped one."""
    if root is None:
        return {}
    from migrator.ground.input_files import MAX_SMALL_BYTES, read_text

    path = Path(root) / "pyproject.toml"
    if not os.path.lexists(path):
        return {}
    try:
        data = tomllib.loads(read_text(path, MAX_SMALL_BYTES, root))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ClusterError(f"{path}: cannot read configuration: {exc}") from None
    except RecursionError:
        raise ClusterError(f"{path}: cannot read configuration: nested too deeply for the TOML reader") from None
    section: Any = data
    for table in ("tool", "tool.migrate"):
        section = section.get(table.rsplit(".", 1)[-1]) or {}
        if not isinstance(section, dict):
            raise ClusterError(f"{path}: [{table}] must be a table")
    section = section.get("clusters") or {}
    if not isinstance(section, dict):
        raise ClusterError(f"{path}: [tool.migrate.clusters] must be a table of cluster tables")
    shipped = builtin()
    out = {}
    for name, raw in section.items():
        base_name = str(raw.get("base", name)) if isinstance(raw, dict) else name
        if isinstance(raw, dict) and "base" in raw and base_name not in shipped:
            raise ClusterError(f"{path}: cluster {name!r}: unknown base {base_name!r} (known: {', '.join(shipped)})")
        out[name] = _profile(name, raw, str(path), shipped.get(base_name))
    return out


def load(names: list[str], root: Path | None = None) -> list[Cluster]:
    known = {**builtin(), **user_profiles(root)}
    missing = [n for n in names if n not in known]
    if missing:
        raise ClusterError(f"unknown cluster(s) {', '.join(missing)} (known: {', '.join(sorted(known))}; "
                           "add your own as [tool.migrate.clusters.NAME] in pyproject.toml)")
    return [known[n] for n in names]
