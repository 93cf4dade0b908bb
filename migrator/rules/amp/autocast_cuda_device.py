"""AMP004 a literal "cuda" device argument of torch.autocast and friends; detection and rewrite shared
with AMP001/AMP005 (`_autocast.py`)."""

from migrator.rules.amp._autocast import LEVEL, detect_call, fix, precheck

__all__ = ["LEVEL", "detect_call", "fix", "precheck"]
