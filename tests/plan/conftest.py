"""Fixtures the plan tests share."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def bench():
    """`bench/plan_published.py` as a module: its published runs, fit rows and helpers."""
    spec = importlib.util.spec_from_file_location("plan_published", REPO / "bench" / "plan_published.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
