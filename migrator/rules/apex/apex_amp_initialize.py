"""APEX001 `amp.initialize` onto float16 autocast and dynamic loss scaling; shared with APEX002 (`_amp.py`)."""

from migrator.rules.apex._amp import LEVEL, fix, precheck

__all__ = ["LEVEL", "fix", "precheck"]
