"""Which strings the checker's string checks can act on: most strings of a module (dict keys, messages, names) hold
none of the words those checks need, so the checker asks one search instead of calling every check."""

from __future__ import annotations

import re
from collections.abc import Callable

from migrator.catalogue import units
from migrator.catalogue.loader import Catalogue

# what the checker's own string checks need in a lowered string: a CUDA source's name (`extension_builds`), an
# `ENV_TOKEN` (each holds one of these), `nvidia-smi`; the detectors' words come from their units (`STRING_WORDS`)
OWN_STRING_WORDS = frozenset({".cu", "cuda_", "nccl_", "nvidia_", "nvte_", "nvidia-smi"})
_SEARCHES: dict[frozenset[str], Callable[[str], object]] = {}


def string_gate(catalogue: Catalogue) -> Callable[[str], object] | None:
    """A search for the words a lowered string must hold for any string check to act on it, one per catalogue
    (lowering keeps every ASCII letter as a lower-case one: a word in the text is in the lowered text); None where
    a string detector does not say what it needs (every string is checked)."""
    words = units.string_words(catalogue)
    if words is None:
        return None
    search = _SEARCHES.get(words)
    if search is None:
        search = _SEARCHES[words] = re.compile("|".join(map(re.escape, sorted(words | OWN_STRING_WORDS)))).search
    return search
