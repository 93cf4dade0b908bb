"""Property test: on generated programs (hypothesmith modules, every syntax shape of
tests/fix/programs.py, CUDA snippets) `migrate fix` never raises, every file it writes parses, files
it made no edit in stay byte-identical, and fixing the output again changes nothing.

Examples per test: MIGRATE_FIX_PROPERTY_EXAMPLES (default 50, a third of the 150 that cost the suite
295 s of its sum; set 150 or more before a release or after touching the fixer); bench/fix_property_bench.py
runs thousands and prints counts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("hypothesmith")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.fix.programs import check_fix_properties, program_strategy, valid_python  # noqa: E402

EXAMPLES = int(os.environ.get("MIGRATE_FIX_PROPERTY_EXAMPLES", "50"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


def _check(text: str, target: str) -> None:
    assume(valid_python(text))  # a generated body can end where the shapes cannot follow: not a pass
    work = Path(tempfile.mkdtemp())
    try:
        check_fix_properties(work, text, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.slow
@SETTINGS
@given(case=st.deferred(lambda: program_strategy(generated_bodies=True)))  # hypothesmith's grammar: built when run, not at collection
def test_fix_is_safe_on_generated_programs(case):
    _check(*case)


@pytest.mark.slow
@SETTINGS
@given(case=program_strategy(generated_bodies=False))
def test_fix_is_safe_on_syntax_shapes_and_snippets(case):
    _check(*case)
