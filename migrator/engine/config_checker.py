"""Framework configs: Hydra/OmegaConf YAML, DeepSpeed JSON, TOML.

Which files count: every `*.yaml`, `*.yml`, `*.json` and `*.toml` (other than `pyproject.toml`)
that discovery yields (so `.gitignore` and `[tool.migrate] exclude` apply) **and** whose bytes hold
a marker (`CONFIG_PREFILTER`). Files without one are never parsed; a file with one that does not
parse (a Helm template, JSON with comments) is listed as skipped, not reported: the scanner only
reads these files opportunistically.

What is reported, by key and value (never by file name):

* `device: cuda` / `cuda:1` / `cuda:${idx}` under a key naming a device (`device`, `eval_device`,
  `device_map`, `map_location`, ...), or `cuda:N` under any key — DEV017, exact (`npu`, `npu:N`);
* a value naming NCCL (`nccl`, `cpu:gloo,cuda:nccl`) under a key containing `backend` — DIST007,
  exact (`hccl`): `backend`, `dist_backend`, HF `ddp_backend`, DeepSpeed 1-bit `comm_backend_name`;
* `attn_implementation: flash_attention_2` (and `use_flash_attention_2: true`, ...) — ATTN021;
* DeepSpeed configs (a top-level `train_batch_size`, `train_micro_batch_size_per_gpu`,
  `gradient_accumulation_steps` or `zero_optimization`): an enabled `amp` block (NVIDIA Apex AMP,
  APEX060), `optimizer.type: Lamb` (DeepSpeed's CUDA FusedLamb) and a `sparse_attention` block
  (Triton/CUDA kernels) — KERN011; `optimizer.type: Adam`/`AdamW` (FusedAdam, which the NPU
  accelerator builds: a note for the deepspeed route to cover) — KERN015;
* CUDA/NCCL environment variables set or read in keys or values (`env: {CUDA_VISIBLE_DEVICES: 0}`,
  k8s `- name: NCCL_DEBUG`, compose `- NVIDIA_VISIBLE_DEVICES=all`, `export NAME=` in a script value;
  prose that merely mentions a name is not reported) — the ENV001–ENV005 symbols, with ENV001/ENV002's
  exact renames.

Positions come from the parser (PyYAML's composer marks, a small positional JSON scanner, a
line search for TOML); a fix replaces only the characters of the scalar at that position, so key
order, comments, quoting and layout are kept by construction, and the fixer re-parses to prove
that exactly the intended values changed (engine/config_verify.verify).
"""

from __future__ import annotations

import bisect
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from migrator.engine.python_checker import ENV_TOKEN, NCCL_STRING

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_PREFILTER = re.compile(
    rb"(?i)cuda|nccl|flash_att|use_flash|NVIDIA_|NVTE_|[\"']?\bamp[\"']?\s*:|\blamb\b|\badamw?\b|sparse_attention"
)
MAX_CONFIG_BYTES = 2 * 1024 * 1024  # larger YAML/JSON files are data, not configs

DEVICE_KEY = re.compile(r"(?i)(^|_)devices?($|_)|^device_map$|^map_location$|^device_type$")
DEVICE_VALUE = re.compile(r"^cuda(?P<rest>:(\d+|\$\{[^}]*\}))?$")
ATTN_KEYS = {"attn_implementation", "_attn_implementation", "attention_implementation", "attn_impl"}
ATTN_VALUES = {"flash_attention_2", "flash_attention_3", "flash_attn", "flash_attn_2", "flash_attention"}
ATTN_BOOL_KEYS = {"use_flash_attention_2", "use_flash_attn", "use_flash_attention", "flash_attn", "use_flash_attn_2"}
DEEPSPEED_KEYS = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization"}


# libyaml when PyYAML has it (twice as fast); its marks count characters like the pure loader's
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ConfigParseError(ValueError):
    """The file does not parse as its format says; it is skipped, not reported."""


@dataclass(eq=False)
class Scalar:
    value: Any
    is_str: bool
    start: int  # character offsets of the scalar's source text; -1 when unknown (TOML keys)
    end: int
    ident: int  # YAML aliases share one Scalar


@dataclass(frozen=True)
class Entry:
    path: tuple  # keys and list indices from the document root (YAML: document index first)
    key: str | None  # nearest mapping key (a list item inherits its list's key)
    scalar: Scalar
    is_key: bool


@dataclass(frozen=True)
class ConfigHit:
    key: str  # "impl:<name>" or "sym:$env.NAME"
    start: int
    end: int
    symbol: str
    replacement: str | None = None  # new text for [start, end), when the rewrite is exact
    message: str | None = None
    path: tuple = ()
    is_key: bool = False
    old: str = ""  # the text replaced (a substring of the scalar's value)
    shared: bool = False  # the scalar is reached through several paths (YAML alias/merge)


@dataclass
class ParsedConfig:
    fmt: str
    text: str
    docs: list[Any]  # plain data, one per document
    entries: list[Entry] = field(default_factory=list)
    yaml_roots: list[Any] = field(default_factory=list)
    containers: dict[tuple, tuple[int, int]] = field(default_factory=dict)  # JSON: path -> span of {...} / [...]


def config_format(rel: str) -> str:
    lower = rel.lower()
    if lower.endswith(".json"):
        return "json"
    if lower.endswith(".toml"):
        return "toml"
    return "yaml"


# ---- parsing with positions ----------------------------------------------------------------


def parse_config(text: str, fmt: str) -> ParsedConfig:
    if fmt == "json":
        return _parse_json(text)
    if fmt == "toml":
        return _parse_toml(text)
    return _parse_yaml(text)


def _yaml_value(node: yaml.ScalarNode) -> tuple[Any, bool]:
    tag = node.tag or ""
    if tag.endswith(":str"):
        return node.value, True
    if tag.endswith(":bool"):
        return node.value.lower() in ("true", "yes", "on", "y"), False
    if tag.endswith(":null"):
        return None, False
    return node.value, False


def _parse_yaml(text: str) -> ParsedConfig:
    try:
        roots = list(yaml.compose_all(text, Loader=YAML_LOADER))
        constructor = yaml.constructor.SafeConstructor()
        docs = [constructor.construct_document(root) if root is not None else None for root in roots]
    except yaml.YAMLError as exc:
        raise ConfigParseError(f"invalid YAML: {str(exc).splitlines()[0]}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigParseError(f"invalid YAML: {exc}") from None
    parsed = ParsedConfig("yaml", text, docs, yaml_roots=roots)
    scalars: dict[int, Scalar] = {}

    def scalar(node: yaml.ScalarNode) -> Scalar:
        got = scalars.get(id(node))
        if got is None:
            value, is_str = _yaml_value(node)
            got = scalars[id(node)] = Scalar(value, is_str, node.start_mark.index, node.end_mark.index, id(node))
        return got

    def walk(node, path: tuple, key: str | None, active: set[int]) -> None:
        if id(node) in active:
            return  # a recursive alias
        if isinstance(node, yaml.ScalarNode):
            parsed.entries.append(Entry(path, key, scalar(node), False))
        elif isinstance(node, yaml.MappingNode):
            active = active | {id(node)}
            for k, v in node.value:
                if k.tag == "tag:yaml.org,2002:merge":
                    for base in v.value if isinstance(v, yaml.SequenceNode) else [v]:
                        walk(base, path, key, active)  # merged keys act as keys of this mapping
                    continue
                name = k.value if isinstance(k, yaml.ScalarNode) else None
                if isinstance(k, yaml.ScalarNode):
                    parsed.entries.append(Entry(path + (name,), name, scalar(k), True))
                walk(v, path + (name,), name, active)
        elif isinstance(node, yaml.SequenceNode):
            active = active | {id(node)}
            for i, item in enumerate(node.value):
                walk(item, path + (i,), key, active)

    for index, root in enumerate(roots):
        if root is not None:
            walk(root, (index,), None, set())
    return parsed


_JSON_LITERAL = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")
_JSON_WS = re.compile(r"[ \t\n\r]*")
# the decoder's own string scanner (returns the decoded string and the index past it); not in typeshed
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]


def _parse_json(text: str) -> ParsedConfig:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ConfigParseError(f"invalid JSON: {exc}") from None
    parsed = ParsedConfig("json", text, [data])
    counter = iter(range(1 << 62))

    def ws(i: int) -> int:
        return _JSON_WS.match(text, i).end()  # type: ignore[union-attr]  # `[ ...]*` always matches

    def value(i: int, path: tuple, key: str | None) -> int:
        i = ws(i)
        c = text[i]
        if c == "{":
            start = i
            i = ws(i + 1)
            if text[i] == "}":
                parsed.containers[path] = (start, i + 1)
                return i + 1
            while True:
                i = ws(i)
                name, end = _scanstring(text, i + 1)
                parsed.entries.append(Entry(path + (name,), name, Scalar(name, True, i, end, next(counter)), True))
                i = ws(end) + 1  # past ':'
                i = ws(value(i, path + (name,), name))
                if text[i] == ",":
                    i += 1
                    continue
                parsed.containers[path] = (start, i + 1)
                return i + 1  # past '}'
        if c == "[":
            start = i
            i = ws(i + 1)
            if text[i] == "]":
                parsed.containers[path] = (start, i + 1)
                return i + 1
            index = 0
            while True:
                i = ws(value(i, path + (index,), key))
                index += 1
                if text[i] == ",":
                    i += 1
                    continue
                parsed.containers[path] = (start, i + 1)
                return i + 1
        if c == '"':
            s, end = _scanstring(text, i + 1)
            parsed.entries.append(Entry(path, key, Scalar(s, True, i, end, next(counter)), False))
            return end
        m = _JSON_LITERAL.match(text, i)
        assert m is not None, "json.loads accepted the text, so a literal starts here"
        raw = m.group(0)
        parsed.entries.append(Entry(path, key, Scalar(json.loads(raw), False, i, m.end(), next(counter)), False))
        return m.end()

    value(0, (0,), None)
    return parsed


def _parse_toml(text: str) -> ParsedConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigParseError(f"invalid TOML: {exc}") from None
    parsed = ParsedConfig("toml", text, [data])
    counter = iter(range(1 << 62))
    used: set[int] = set()

    def locate(key: str, val: str | None) -> tuple[int, int]:
        """The first unused `key = "value"` (or bare key) in the text; TOML keeps no positions."""
        k = re.escape(key)
        if val is None:
            pattern = re.compile(rf"(?<![\w-])[\"']?{k}[\"']?(?=\s*[=.])")
        else:
            pattern = re.compile(rf"(?<![\w-])[\"']?{k}[\"']?\s*=\s*(?P<v>\"{re.escape(val)}\"|'{re.escape(val)}')")
        for m in pattern.finditer(text):
            start, end = (m.start("v"), m.end("v")) if val is not None else (m.start(), m.end())
            if start not in used:
                used.add(start)
                return start, end
        return -1, -1

    def walk(obj: Any, path: tuple, key: str | None) -> None:
        if isinstance(obj, dict):
            for name, v in obj.items():
                start, end = locate(name, None) if ENV_TOKEN.search(name) else (-1, -1)
                parsed.entries.append(Entry(path + (name,), name, Scalar(name, True, start, end, next(counter)), True))
                walk(v, path + (name,), name)
        elif isinstance(obj, list):
            for i, item in enumerate(obj):
                walk(item, path + (i,), key)
        else:
            is_str = isinstance(obj, str)
            start, end = locate(key, obj) if is_str and key and _interesting(obj) else (-1, -1)
            parsed.entries.append(Entry(path, key, Scalar(obj, is_str, start, end, next(counter)), False))

    walk(data, (0,), None)
    return parsed


def _interesting(value: str) -> bool:
    return bool(re.search(r"(?i)cuda|nccl|flash|NVIDIA_|NVTE_", value))


# ---- checks ---------------------------------------------------------------------------------


def _sub_span(text: str, scalar: Scalar, sub: str, occurrence: int = 0) -> tuple[int, int] | None:
    """Where the `occurrence`-th `sub` of the scalar's value is in the source, when that is certain:
    the raw text holds `sub` exactly as often as the value (no escapes or folding in the way)."""
    if scalar.start < 0 or not isinstance(scalar.value, str):
        return None
    raw = text[scalar.start : scalar.end]
    if raw.count(sub) != scalar.value.count(sub) or raw.count(sub) <= occurrence:
        return None
    at = -1
    for _ in range(occurrence + 1):
        at = raw.find(sub, at + 1)
    return scalar.start + at, scalar.start + at + len(sub)


ENV_KEY = re.compile(r"(?i)^(name|key|var|variable|variables)$|env")
ENV_USE = re.compile(r"^\s*=|^\}")  # after the name: `NAME=value`, `${NAME}`


def _names_env_variable(e: Entry, value: str, m: re.Match) -> bool:
    """A variable is set or read here: a mapping key (`env: {CUDA_VISIBLE_DEVICES: "0"}`), the whole
    value under an env-ish key (k8s `- name: NCCL_DEBUG`), or `NAME=`, `$NAME`, `${NAME}`,
    `export NAME` inside a value (compose `- NVIDIA_VISIBLE_DEVICES=all`, a workflow `run:` script)."""
    if e.is_key:
        return value.strip() == m.group(1) or ENV_USE.match(value[m.end():]) is not None
    before, after = value[: m.start()], value[m.end() :]
    if not before.strip() and not after.strip():
        return e.key is not None and bool(ENV_KEY.search(e.key))
    return bool(ENV_USE.match(after)) or before.endswith(("$", "${")) or bool(re.search(r"\bexport\s+$", before))


def _nccl_replacement(value: str) -> str:
    def swap(m: re.Match) -> str:
        word = m.group(0)
        new = {"nccl": "hccl", "cuda": "npu"}[word.lower()]
        return new.upper() if word.isupper() else new

    return re.sub(r"(?i)nccl|cuda", swap, value)


def config_hits(parsed: ParsedConfig) -> list[ConfigHit]:
    text = parsed.text
    hits: list[ConfigHit] = []
    occurrences: dict[int, int] = {}
    for e in parsed.entries:
        occurrences[e.scalar.ident] = occurrences.get(e.scalar.ident, 0) + 1

    def whole(e: Entry, impl: str, symbol: str, replacement: str | None = None, message: str | None = None):
        span = _sub_span(text, e.scalar, e.scalar.value) if e.scalar.is_str else None
        start, end = span or (e.scalar.start, e.scalar.end)
        if span is None:
            replacement = None
        hits.append(ConfigHit(f"impl:{impl}", start, end, symbol, replacement, message, e.path, e.is_key,
                              e.scalar.value if e.scalar.is_str else "", occurrences[e.scalar.ident] > 1))

    for e in parsed.entries:
        s = e.scalar
        if s.is_str and s.value:
            for m in ENV_TOKEN.finditer(s.value):
                if not _names_env_variable(e, s.value, m):
                    continue  # prose that mentions a variable (docs, log text) sets nothing
                name = m.group(1)
                nth = s.value[: m.start()].count(name)
                span = _sub_span(text, s, name, nth)
                start, end = span or (s.start, s.end)
                hits.append(ConfigHit(f"sym:$env.{name}", start, end, name, None, None, e.path, e.is_key, name if span else "",
                                      occurrences[s.ident] > 1))
        if e.is_key or not s.is_str:
            if not e.is_key and e.key in ATTN_BOOL_KEYS and s.value is True:
                whole(e, "config-flash-attention", e.key)
            continue
        value = s.value
        dev = DEVICE_VALUE.match(value)
        if dev and e.key is not None and (DEVICE_KEY.search(e.key) or dev.group("rest")):
            whole(e, "config-device-cuda", value, "npu" + (dev.group("rest") or ""))
        elif NCCL_STRING.match(value) and e.key is not None and "backend" in e.key.lower():
            whole(e, "config-nccl-backend", value, _nccl_replacement(value))
        elif e.key in ATTN_KEYS and value in ATTN_VALUES:
            whole(e, "config-flash-attention", value)
    hits.extend(_deepspeed_hits(parsed))
    return _dedupe(hits)


def _dedupe(hits: list[ConfigHit]) -> list[ConfigHit]:
    """A YAML scalar reached through an alias or merge key is reported once, at its own position."""
    out, seen = [], set()
    for h in hits:
        key = (h.key, h.start, h.end)
        if key not in seen:
            seen.add(key)
            out.append(h)
    return out


def _entry(parsed: ParsedConfig, path: tuple, is_key: bool) -> Entry | None:
    for e in parsed.entries:
        if e.path == path and e.is_key == is_key:
            return e
    return None


FUSED_ADAM = {"adam", "adamw"}  # DeepSpeed's ADAM_OPTIMIZER / ADAMW_OPTIMIZER: FusedAdam unless offloaded


def _deepspeed_hits(parsed: ParsedConfig) -> Iterator[ConfigHit]:
    for index, doc in enumerate(parsed.docs):
        if not isinstance(doc, dict) or not DEEPSPEED_KEYS & set(doc):
            continue
        amp = doc.get("amp")
        if isinstance(amp, dict) and amp.get("enabled") is True:
            e = _entry(parsed, (index, "amp"), True)
            if e:
                yield ConfigHit("impl:deepspeed-apex-amp", e.scalar.start, e.scalar.end, "amp", path=e.path, is_key=True)
        optimizer = doc.get("optimizer")
        if isinstance(optimizer, dict) and isinstance(optimizer.get("type"), str) and optimizer["type"].lower() == "lamb":
            e = _entry(parsed, (index, "optimizer", "type"), False)
            if e:
                symbol = f"optimizer.type: {optimizer['type']}"
                yield ConfigHit("impl:deepspeed-cuda-op-config", e.scalar.start, e.scalar.end, symbol,
                                message=f"DeepSpeed's `{optimizer['type']}` optimizer is the CUDA op FusedLamb; "
                                "DeepSpeed's NPU op builders have no Lamb", path=e.path)
        if isinstance(optimizer, dict) and isinstance(optimizer.get("type"), str) and optimizer["type"].lower() in FUSED_ADAM:
            e = _entry(parsed, (index, "optimizer", "type"), False)
            if e:
                yield ConfigHit("impl:deepspeed-fused-op-config", e.scalar.start, e.scalar.end,
                                f"optimizer.type: {optimizer['type']}", path=e.path)
        if isinstance(doc.get("sparse_attention"), dict):
            e = _entry(parsed, (index, "sparse_attention"), True)
            if e:
                yield ConfigHit("impl:deepspeed-cuda-op-config", e.scalar.start, e.scalar.end, "sparse_attention",
                                message="DeepSpeed sparse attention runs Triton/CUDA kernels; DeepSpeed's NPU op "
                                "builders have none", path=e.path, is_key=True)


# ---- positions and verification ----------------------------------------------------------------

_NEWLINE = re.compile(r"\r\n|\r|\n")


class LineIndex:
    """Character offset -> 1-based (line, column), counting `\\r\\n`, `\\r`, `\\n` as line breaks."""

    def __init__(self, text: str):
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def position(self, offset: int) -> tuple[int, int]:
        if offset < 0:
            return 1, 1
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text
