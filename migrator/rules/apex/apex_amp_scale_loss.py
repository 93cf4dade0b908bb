"""APEX002 `amp.scale_loss` onto dynamic loss scaling; shared with APEX001 (`_amp.py`)."""

from migrator.rules.apex._amp import LEVEL, fix, precheck

__all__ = ["LEVEL", "fix", "precheck"]
