"""AMP001 `torch.cuda.amp.autocast(...)` -> `torch.autocast(<device>, dtype=torch.float16, ...)`; the rewrite
is shared with AMP004/AMP005 (`_autocast.py`)."""

from migrator.rules.amp._autocast import LEVEL, fix, precheck

__all__ = ["LEVEL", "fix", "precheck"]
