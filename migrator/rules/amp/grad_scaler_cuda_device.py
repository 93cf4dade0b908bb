"""AMP005 a literal "cuda" device argument of torch.amp.GradScaler; detection and rewrite shared with
AMP001/AMP004 (`_autocast.py`)."""

from migrator.rules.amp._autocast import LEVEL, detect_call, fix, precheck

__all__ = ["LEVEL", "detect_call", "fix", "precheck"]
