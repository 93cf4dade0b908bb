"""Shared helpers for the op-coverage tests (generator parsers, committed table, loader)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from op_coverage import table_build

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures_coverage"
GENERATOR = REPO_ROOT / "op_coverage" / "generate.py"
TABLE = REPO_ROOT / "op_coverage" / "torch_npu-2.14.0.json"
SCHEMA = REPO_ROOT / "migrator" / "ground" / "schema" / "coverage.schema.json"


def load_generator():
    """op_coverage/generate.py is a script, not a package: load it by path."""
    name = "_ascend_migrate_op_coverage_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def fixture_text(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text(encoding="utf-8")


def mini_wheel() -> dict[str, str]:
    """The mini wheel members, keyed by their real wheel path (fixture files end in .txt)."""
    root = FIXTURES / "wheel"
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            rel = path.relative_to(root).as_posix()
            if rel.endswith(".txt"):
                rel = rel[: -len(".txt")]
            out[rel] = path.read_text(encoding="utf-8")
    return out


def mini_inputs():
    return table_build.Inputs(
        wheel=mini_wheel(),
        native_functions=fixture_text("torch", "native_functions.yaml"),
        torch_cuda_init=fixture_text("torch", "cuda__init__.py.txt"),
        docs={"torch-mini.md": fixture_text("docs", "torch-mini.md")},
        derivatives=fixture_text("derivatives.yaml"),
        meta={"fixture": {"licence": "BSD-3-Clause", "version": "0"}},
        docs_commit="0" * 40,
        op_plugin_commit="1" * 40,
    )


@pytest.fixture(scope="session")
def gen():
    return load_generator()


@pytest.fixture(scope="session")
def mini_table():
    return table_build.build_table(mini_inputs())


@pytest.fixture(scope="session")
def cov():
    """Paths and helpers (test modules cannot import this conftest reliably)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        REPO_ROOT=REPO_ROOT,
        FIXTURES=FIXTURES,
        GENERATOR=GENERATOR,
        TABLE=TABLE,
        SCHEMA=SCHEMA,
        text=fixture_text,
        mini_wheel=mini_wheel,
        mini_inputs=mini_inputs,
    )
