"""The numbers of a model shape, checked before any planning: each names the key it came from.

`check_numbers` takes the raw values as read (`None` = not given) and raises `ModelError` for a size
that is not a positive integer, heads that do not divide the hidden size, query heads that cannot be
grouped over the KV heads, or top-k above the expert count.
"""

from __future__ import annotations

from collections.abc import Mapping


def check_numbers(values: Mapping[str, int | None], source: str, keys: Mapping[str, str] | None = None) -> None:
    """`values`: field -> value as read (`layers`, `hidden`, `heads`, `kv_heads`, `ffn`, `vocab`,
    `experts`, `top_k`, `expert_ffn`, `shared_experts`); `keys`: field -> the key it was read from."""
    from migrator.plan.model import ModelError

    keys = keys or {}

    def named(field: str) -> str:
        return f"{field} (`{keys[field]}`)" if field in keys else field

    problems = []
    for field, value in values.items():
        if value is None:
            continue
        zero_ok = field in ("experts", "shared_experts", "top_k", "ffn", "expert_ffn")
        if value < 0 or (value == 0 and not zero_ok):
            problems.append(f"{named(field)} is {value}: it must be a positive integer")
    heads, kv, hidden = values.get("heads"), values.get("kv_heads"), values.get("hidden")
    if heads and heads > 0 and hidden and hidden > 0 and hidden % heads:
        problems.append(f"{named('hidden')} {hidden} is not a multiple of {named('heads')} {heads} (the head size must be whole)")
    if heads and heads > 0 and kv and kv > 0 and heads % kv:
        problems.append(f"{named('heads')} {heads} cannot be grouped over {named('kv_heads')} {kv}: "
                        "grouped-query attention needs heads to be a multiple of the KV heads")
    experts, top_k = values.get("experts"), values.get("top_k")
    if experts and experts > 0 and top_k and top_k > experts:
        problems.append(f"{named('top_k')} {top_k} is more than {named('experts')} {experts}")
    if problems:
        raise ModelError(f"{source}: " + "; ".join(problems))
