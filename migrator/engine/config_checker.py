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

Positions come from `engine/config_reader.py` (PyYAML's composer marks, a small positional JSON
scanner, tomlkit's round trip for TOML); a fix replaces only the characters of the scalar at that position, so key
order, comments, quoting and layout are kept by construction, and the fixer re-parses to prove
that exactly the intended values changed (engine/config_verify.verify).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from migrator.catalogue.patterns import NCCL_STRING
from migrator.engine.config_reader import Entry, ParsedConfig, Scalar
from migrator.engine.python_checker import ENV_TOKEN

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
    for e in parsed.entries:
        shared = occurrences[e.scalar.ident] > 1
        hits.extend(_env_hits(text, e, shared))
        found = _value_hit(e)
        if found is not None:
            impl, symbol, replacement = found
            hits.append(_whole_hit(text, e, shared, impl, symbol, replacement))
    hits.extend(_deepspeed_hits(parsed))
    return _dedupe(hits)


def _env_hits(text: str, e: Entry, shared: bool) -> Iterator[ConfigHit]:
    """Environment variables a string sets or reads (`$CUDA_VISIBLE_DEVICES`, `NCCL_DEBUG=...`)."""
    s = e.scalar
    if not (s.is_str and s.value):
        return
    for m in ENV_TOKEN.finditer(s.value):
        if not _names_env_variable(e, s.value, m):
            continue  # prose that mentions a variable (docs, log text) sets nothing
        name = m.group(1)
        nth = s.value[: m.start()].count(name)
        span = _sub_span(text, s, name, nth)
        start, end = span or (s.start, s.end)
        yield ConfigHit(f"sym:$env.{name}", start, end, name, None, None, e.path, e.is_key, name if span else "",
                        shared)


def _value_hit(e: Entry) -> tuple[str, str, str | None] | None:
    """(implementation, symbol, replacement) when the entry's whole value is CUDA-specific."""
    s = e.scalar
    if e.is_key or not s.is_str:
        if not e.is_key and e.key in ATTN_BOOL_KEYS and s.value is True:
            return "config-flash-attention", str(e.key), None
        return None
    value = s.value
    dev = DEVICE_VALUE.match(value)
    if dev and e.key is not None and (DEVICE_KEY.search(e.key) or dev.group("rest")):
        return "config-device-cuda", value, "npu" + (dev.group("rest") or "")
    if NCCL_STRING.match(value) and e.key is not None and "backend" in e.key.lower():
        return "config-nccl-backend", value, _nccl_replacement(value)
    if e.key in ATTN_KEYS and value in ATTN_VALUES:
        return "config-flash-attention", value, None
    return None


def _whole_hit(text: str, e: Entry, shared: bool, impl: str, symbol: str, replacement: str | None) -> ConfigHit:
    """A hit on the whole scalar (the string's text without quotes when it is a string)."""
    span = _sub_span(text, e.scalar, e.scalar.value) if e.scalar.is_str else None
    start, end = span or (e.scalar.start, e.scalar.end)
    if span is None:
        replacement = None
    return ConfigHit(f"impl:{impl}", start, end, symbol, replacement, None, e.path, e.is_key,
                     e.scalar.value if e.scalar.is_str else "", shared)


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


