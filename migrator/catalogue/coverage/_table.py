"""Loading the generated coverage table and answering lookups (standard library only)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Collection, Container, Iterable, Iterator, Sequence
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from ._model import STATUSES, CoverageEntry, CoverageError
from ._names import (
    DTYPES,
    aten_candidates,
    index_by_base,
    is_non_op_name,
    normalize_dtype,
    normalize_name,
    pick_overload,
)
from ._resources import data_path

if TYPE_CHECKING:
    from ._resources import Traversable

__all__ = [
    "available_versions",
    "default_version",
    "socs",
    "lookup",
    "iter_entries",
    "table_header",
    "torch_npu_release_for_torch",
    "float64_supported",
]

_TABLE_DIR = "op_coverage"
_FILE_RE = re.compile(r"^torch_npu-(\d+(?:\.\d+)*(?:\.post\d+)?)\.json$")
_FORMAT = 1
_REGENERATE = "regenerate it with `python op_coverage/generate.py` or reinstall ascend-migrate"
_lock = threading.Lock()


def _version_key(version: str) -> tuple:
    parts = []
    for piece in re.split(r"[.]", version):
        match = re.match(r"(post)?(\d+)", piece)
        parts.append((1 if match and match.group(1) else 0, int(match.group(2)) if match else 0))
    return tuple(parts)


@lru_cache(maxsize=1)
def _files() -> dict[str, Traversable]:
    try:
        folder = data_path(_TABLE_DIR)
    except FileNotFoundError as exc:
        raise CoverageError(f"no coverage tables installed: {exc}; {_REGENERATE}") from None
    found: dict[str, Traversable] = {}
    for item in folder.iterdir():
        match = _FILE_RE.match(item.name)
        if match and item.is_file():
            found[match.group(1)] = item
    if not found:
        raise CoverageError(f"no torch_npu-*.json coverage table in {folder}; {_REGENERATE}")
    return found


def available_versions() -> tuple[str, ...]:
    """torch-npu versions with a shipped table, oldest first (the last one is the default)."""
    files = _files()
    if _sorted_versions[0] is not files:  # sorted once per folder listing: every lookup resolves its version here
        _sorted_versions[:] = [files, tuple(sorted(files, key=_version_key))]
    return _sorted_versions[1]


_sorted_versions: list = [None, ()]  # (the `_files()` listing, its versions sorted)


def default_version() -> str:
    return available_versions()[-1]


def _resolve_version(version: str | None) -> str:
    versions = available_versions()
    if version is None:
        return versions[-1]
    text = str(version).strip()
    if text.startswith("torch_npu-") or text.startswith("torch-npu-"):
        text = text[len("torch_npu-"):]
    if text in versions:
        return text
    raise CoverageError(
        f"unknown torch-npu version {version!r} for the coverage table; valid: {', '.join(versions)}"
    )


class _Table:
    __slots__ = ("version", "header", "entries", "aten", "socs", "sources", "pairs", "_by_base")

    def __init__(self, version: str, raw: dict):
        self.version = version
        self.entries: dict = raw["entries"]
        self.aten: dict[str, str] = {}
        for kernel, ops in raw["aten"].items():
            for op in ops:
                self.aten[op] = kernel
        order = raw.get("soc_order") or sorted(raw["socs"])
        self.socs: tuple[str, ...] = tuple(order)
        self.sources: dict[str, str] = raw["sources"]
        self.pairs = raw.get("torch_pairings", {}).get("pairs", [])
        self.header = {k: v for k, v in raw.items() if k not in ("entries", "aten")}
        self._by_base: dict | None = None

    def aten_base_kernel(self, base: str) -> tuple[str | None, str | None]:
        """(kernel, representative op) of an ATen base name; (None, None) if unknown."""
        if self._by_base is None:
            self._by_base = index_by_base(self.aten)
        picked = pick_overload(base, self._by_base.get(base, {}))
        return picked if picked else (None, None)


def _load(version: str) -> _Table:
    with _lock:
        return _load_cached(version)


@cache
def _load_cached(version: str) -> _Table:
    item = _files()[version]
    try:
        data = item.read_bytes()
    except OSError as exc:
        raise CoverageError(f"cannot read coverage table {item}: {exc}; {_REGENERATE}") from None
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CoverageError(f"coverage table {item} is corrupt ({exc}); {_REGENERATE}") from None
    if not isinstance(raw, dict) or raw.get("format") != _FORMAT:
        fmt = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise CoverageError(f"coverage table {item} has format {fmt!r}, expected {_FORMAT}; {_REGENERATE}")
    missing = [k for k in ("entries", "aten", "socs", "sources") if not isinstance(raw.get(k), dict)]
    if missing:
        raise CoverageError(f"coverage table {item} lacks {', '.join(missing)}; {_REGENERATE}")
    return _Table(version, raw)


def _reset_cache() -> None:
    """Forget loaded tables and the table folder (tests; after regenerating in-process)."""
    with _lock:
        _files.cache_clear()
        _load_cached.cache_clear()


def socs(version: str | None = None) -> tuple[str, ...]:
    """The SoC keys of a table: ``("A2", "A3", "950DT")``."""
    return _load(_resolve_version(version)).socs


def table_header(version: str | None = None) -> dict:
    """The table's header (inputs, versions, sha256s, rules, counts, transfer_to_npu map...)."""
    return _load(_resolve_version(version)).header


def _resolve_soc(table: _Table, soc: str | None) -> str:
    if soc is None:
        return "A2"
    text = str(soc).strip()
    for candidate in table.socs:
        if text.lower() == candidate.lower() or text.lower() in (f"atlas {candidate}".lower(), f"ascend {candidate}".lower()):
            return candidate
    raise CoverageError(f"unknown SoC {soc!r}; valid: {', '.join(table.socs)}")


def _resolve_dtype(dtype: object) -> str | None:
    if dtype is None:
        return None
    norm = normalize_dtype(dtype)
    if norm is None:
        raise CoverageError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)} (or torch.float32 style names)")
    return norm


def _value(raw: dict, key: str, soc: str, default: object) -> Any:  # a value of the table's JSON
    overrides = raw.get("soc_" + key)
    if overrides and soc in overrides:
        return overrides[soc]
    return raw.get(key, default)


def _status(raw: dict, soc: str) -> str:
    status = raw["status"]
    return status if isinstance(status, str) else status.get(soc, "unverified")


def _source_text(table: _Table, keys: Iterable[str]) -> str:
    return "; ".join(table.sources.get(k, k) for k in keys)


_KERNEL_PHRASE = {
    "npu_kernel": "its ATen op has an NPU kernel",
    "npu_kernel_via_delegate": "its ATen op has an NPU kernel (via its structured delegate)",
    "decomposes": "its ATen op decomposes into other ATen ops",
    "composite_explicit": "its ATen op has a composite implementation (usually works, not guaranteed)",
    "cpu_fallback": "its ATen op has no NPU kernel and runs on the CPU fallback",
}


def _unsupported_headline(name: str, raw: dict, soc: str) -> str:
    if raw.get("origin", "unlisted") == "docs":
        return f"Not supported on {soc} per the Ascend support list."
    if name.startswith("torch.cuda."):
        return "No NPU counterpart: not in torch_npu.npu.__all__, the docs or transfer_to_npu."
    return f"Not supported on {soc}."


def _headline(name: str, raw: dict, status: str, soc: str, kernel: str) -> str:
    """The note's first sentence: the status and where it comes from."""
    origin = raw.get("origin", "unlisted")
    if status == "supported":
        if origin == "custom":
            return f"Supported on {soc} per the torch_npu op documentation."
        return f"Supported on {soc} per the Ascend support list."
    if status == "partial":
        return f"Supported on {soc} with limits."
    if status == "unsupported":
        return _unsupported_headline(name, raw, soc)
    if status == "cpu_fallback":
        return ("Not in the Ascend support list and its ATen op has no NPU kernel: it runs on the CPU "
                "via torch_npu's fallback (slow; TORCH_NPU_FALLBACK_CPU_DISABLE=1 makes it an error).")
    if origin == "custom":
        return f"NPU custom op without a documented product list naming {soc}: use with caution."
    if origin == "optim":
        return "Fused optimizer shipped in torch_npu.optim; no per-SoC statement in the data."
    text = f"Not verified for {soc} in the Ascend support list; use with caution"
    if kernel in _KERNEL_PHRASE:
        text += f" ({_KERNEL_PHRASE[kernel]})"
    return text + "."


def _qualifiers(status: str, kernel: str, limits: Sequence[str], more: int, flags: Collection[str],
                bf16u: bool) -> list[str]:
    """The sentences after the headline: documented limits, data conflicts, the bf16 gap."""
    parts: list[str] = []
    if limits:
        parts.append("Limits: " + "; ".join(limits) + ".")
    if more:
        parts.append(f"{more} further limit{'s' if more != 1 else ''} in the Ascend docs.")
    if "doc_kernel_conflict" in flags:
        parts.append("Its ATen op has an NPU kernel although the docs mark it unsupported (docs win).")
    if "cpu_fallback" in flags and status in ("supported", "partial") and kernel == "cpu_fallback":
        parts.append("Its ATen op has no NPU kernel, so it runs on the CPU fallback.")
    if bf16u:
        parts.append("bf16 is not in the documented dtypes although the op runs on the NPU (documentation gap).")
    return parts


def _note(name: str, raw: dict, status: str, soc: str, kernel: str, limits: Sequence[str], more: int,
          flags: Collection[str], bf16u: bool, dtype: str | None, dtype_note: str | None) -> str:
    if dtype_note and status == "unsupported" and _status(raw, soc) != "unsupported":
        parts = [f"Not supported on {soc} for {dtype}: {dtype_note}"]
        dtype_note = None  # said in the headline
    else:
        parts = [_headline(name, raw, status, soc, kernel)]
    parts += _qualifiers(status, kernel, limits, more, flags, bf16u)
    if dtype_note:
        parts.append(dtype_note)
    return " ".join(parts)


def _alternatives(name: str) -> list[str]:
    out = [name]
    if name.startswith("torch_npu.npu."):
        out.append("torch.npu." + name[len("torch_npu.npu."):])
    if name.startswith("torch._C._VariableFunctions."):
        out.append("torch." + name[len("torch._C._VariableFunctions."):])
    if name.startswith("torch.functional."):
        out.append("torch." + name[len("torch.functional."):])
    match = re.match(r"^torch\.nn\.modules\.\w+\.(\w+)(\..+)?$", name)
    if match:
        out.append("torch.nn." + match.group(1) + (match.group(2) or ""))
    return out


def _unlisted(table: _Table, name: str) -> dict:
    """A synthetic raw entry for a name the table does not list."""
    if name.startswith("torch.ops.aten."):
        op = name[len("torch.ops.aten."):]
        kernel, chosen = (table.aten.get(op), op) if "." in op else table.aten_base_kernel(op)
        if kernel is None:
            return {"status": "unverified", "kernel": "unknown", "origin": "unlisted", "sources": ["aten"]}
        status = "cpu_fallback" if kernel == "cpu_fallback" else "unverified"
        return {"status": status, "kernel": kernel, "aten": chosen, "origin": "aten", "sources": ["aten"]}
    for candidate in aten_candidates(name):
        kernel, chosen = (table.aten.get(candidate), candidate) if "." in candidate else table.aten_base_kernel(candidate)
        if kernel:
            status = "cpu_fallback" if kernel == "cpu_fallback" else "unverified"
            return {"status": status, "kernel": kernel, "aten": chosen, "origin": "unlisted", "sources": ["aten"]}
    # members of a listed class / module inherit its NPU name and (if unsupported) its status
    parts = name.split(".")
    for cut in range(len(parts) - 1, 1, -1):
        parent = ".".join(parts[:cut])
        raw = table.entries.get(parent)
        if raw is None:
            continue
        suffix = ".".join(parts[cut:])
        statuses = raw["status"] if isinstance(raw["status"], dict) else {s: raw["status"] for s in table.socs}
        inherited = {s: ("unsupported" if v == "unsupported" else "unverified") for s, v in statuses.items()}
        out = {"status": inherited, "kernel": "none" if raw.get("kernel") == "none" else "unknown",
               "origin": "member", "sources": list(raw.get("sources", []))}
        if raw.get("npu_name"):
            out["npu_name"] = f"{raw['npu_name']}.{suffix}"
        return out
    if name.startswith("torch.cuda."):
        return {"status": "unsupported", "kernel": "none", "origin": "unlisted", "sources": ["torch:cuda"]}
    kernel = "none" if is_non_op_name(name) else "unknown"
    return {"status": "unverified", "kernel": kernel, "origin": "unlisted", "sources": []}


def _entry(table: _Table, name: str, raw: dict, soc: str, known: bool, dtype: str | None) -> CoverageEntry:
    status = _status(raw, soc)
    every_soc_unsupported = all(_status(raw, s) == "unsupported" for s in table.socs)
    applicable = status != "unsupported" or every_soc_unsupported
    kernel = raw.get("kernel", "unknown")
    flags = tuple(sorted(set(raw.get("flags", [])) | set(raw.get("soc_flags", {}).get(soc, []))))
    dtypes = tuple(_value(raw, "dtypes", soc, [])) if applicable else ()
    excluded = tuple(_value(raw, "dtypes_excluded", soc, [])) if applicable else ()
    limits = tuple(_value(raw, "limits", soc, [])) if applicable else ()
    more = int(_value(raw, "more_limits", soc, 0)) if applicable else 0
    bf16u = soc in raw.get("bf16_undocumented", ())
    dtype_note = None
    if dtype is not None and status in ("supported", "partial"):
        if dtype in excluded:
            status = "unsupported"
            dtype_note = f"{dtype} is documented as not supported."
        elif dtypes and dtype not in dtypes:
            if dtype == "bf16" and bf16u:
                dtype_note = "bf16 was asked for: undocumented but expected to work (info only)."
            else:
                status = "unsupported"
                dtype_note = f"{dtype} is not among the documented dtypes ({', '.join(dtypes)})."
    note = _note(name, raw, status, soc, kernel, limits, more, flags, bf16u, dtype, dtype_note)
    return CoverageEntry(
        name=name,
        status=status,
        soc=soc,
        dtypes=dtypes,
        bf16_undocumented=bf16u,
        kernel=kernel,
        npu_name=raw.get("npu_name"),
        flags=flags,
        note=note,
        source=_source_text(table, raw.get("sources", [])),
        version=table.version,
        aten=raw.get("aten"),
        limits=limits,
        more_limits=more,
        dtypes_excluded=excluded,
        signature=raw.get("signature"),
        origin=raw.get("origin", "unlisted"),
        known=known,
        dtype=dtype,
    )


def lookup(qualified_name: str, soc: str = "A2", dtype: object = None, version: str | None = None) -> CoverageEntry:
    """Coverage of ``qualified_name`` (e.g. ``torch.nn.functional.gelu``) on ``soc``.

    ``Tensor.x`` is read as ``torch.Tensor.x``; markdown escapes (``\\_``) are ignored;
    ``torch.ops.aten.x[.overload]`` / ``aten::x`` query the ATen layer directly. Names the
    table does not list come back with ``known=False`` and status ``unverified`` (or
    ``cpu_fallback`` / ``unsupported`` when the ATen layer or the torch.cuda rule says so).

    With ``dtype`` (``"bf16"``, ``torch.float64``, ``"double"``...), a dtype outside a
    documented list turns the status into ``unsupported`` (bf16 on a ``bf16_undocumented``
    entry stays as it is, with an info note).

    Raises :class:`CoverageError` for an unknown SoC, version or dtype, or a bad table.
    """
    table = _load(_resolve_version(version))
    soc_key = _resolve_soc(table, soc)
    dtype_key = _resolve_dtype(dtype)
    name = normalize_name(qualified_name)
    if not name:
        raise CoverageError("empty API name")
    for candidate in _alternatives(name):
        raw = table.entries.get(candidate)
        if raw is not None:
            return _entry(table, candidate, raw, soc_key, True, dtype_key)
    return _entry(table, name, _unlisted(table, name), soc_key, False, dtype_key)


def listed(qualified_name: str, soc: str = "A2", version: str | None = None) -> bool:
    """``lookup(qualified_name, soc, version=version).known``, without building the entry: most names a
    scan asks about (a method of a receiver of unknown type) are not in the table."""
    table = _load(_resolve_version(version))
    _resolve_soc(table, soc)
    name = normalize_name(qualified_name)
    if not name:
        raise CoverageError("empty API name")
    return any(candidate in table.entries for candidate in _alternatives(name))


def listed_names(soc: str = "A2", version: str | None = None) -> Container[str]:
    """The names the table lists, as `normalize_name` spells them (SoC and version checked as `listed` does): for
    a name that is its own normal form and has no other spelling (`torch.Tensor.<identifier>`), `listed(name)`
    is `name in listed_names()`, without normalizing it."""
    table = _load(_resolve_version(version))
    _resolve_soc(table, soc)
    return table.entries.keys()


def iter_entries(soc: str = "A2", version: str | None = None, status: str | Iterable[str] | None = None) -> Iterator[CoverageEntry]:
    """All table entries for ``soc`` in name order, optionally only those with ``status``."""
    table = _load(_resolve_version(version))
    soc_key = _resolve_soc(table, soc)
    wanted = None
    if status is not None:
        wanted = {status} if isinstance(status, str) else set(status)
        bad = sorted(wanted - set(STATUSES))
        if bad:
            raise CoverageError(f"unknown status {', '.join(map(repr, bad))}; valid: {', '.join(STATUSES)}")
    for name in sorted(table.entries):
        raw = table.entries[name]
        if wanted is not None and _status(raw, soc_key) not in wanted:
            continue
        yield _entry(table, name, raw, soc_key, True, None)


def _torch_key(version: str) -> tuple[int, ...] | None:
    match = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if not match:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def torch_npu_release_for_torch(torch_version: str, version: str | None = None) -> str | None:
    """The newest torch-npu release built for ``torch_version`` (``"2.13.0+cpu"`` -> ``"2.13.0"``).

    ``"2.9"`` picks the newest patch release (2.9.1). Returns None when no pairing is known.
    The pairing table (PyPI Requires-Dist) lives in the coverage table header.
    """
    key = _torch_key(torch_version)
    if key is None:
        return None
    pairs = _load(_resolve_version(version)).pairs
    matches = []
    for pair in pairs:
        pk = _torch_key(pair["torch"])
        if pk is None:
            continue
        if (len(key) == 3 and pk == key) or (len(key) == 2 and pk[:2] == key):
            matches.append((pk, pair["torch_npu"]))
    if not matches:
        return None
    return max(matches)[1]


def float64_supported(name: str, soc: str = "A2", version: str | None = None) -> bool | None:
    """Whether the docs list fp64 for ``name`` on ``soc``: True / False / None (not documented)."""
    entry = lookup(name, soc=soc, version=version)
    if "fp64" in entry.dtypes_excluded or "precision_change" in entry.flags:
        return False
    if entry.dtypes:
        return "fp64" in entry.dtypes
    return None
