"""Model sizes as given, checked before anything reads them as "missing": a key that is present with
0 or a negative value is named as such (`heads = 0 (num_attention_heads)`), not reported missing.
The shape's own rules (heads a multiple of the KV heads, top-k within the experts) are
`configs.check`, on the built shape."""

from __future__ import annotations

from collections.abc import Mapping

# sizes that may be 0 (a dense model has no experts; ffn 0 = every layer is MoE)
MAY_BE_ZERO = frozenset({"experts", "shared_experts", "top_k", "ffn", "expert_ffn"})


def check_numbers(values: Mapping[str, int | None], source: str, keys: Mapping[str, str] | None = None) -> None:
    """`values`: field -> value as read (`None` = not given); `keys`: field -> the key it came from."""
    from migrator.plan.model import ModelError

    keys = keys or {}
    bad = [f"{field} = {value}" + (f" (`{keys[field]}`)" if field in keys else "")
           for field, value in values.items()
           if value is not None and (value < 0 or (value == 0 and field not in MAY_BE_ZERO))]
    if bad:
        raise ModelError(f"{source}: sizes must be positive: {', '.join(bad)}")
