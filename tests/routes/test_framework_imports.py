"""Route detection takes the framework import lines from the scan (found in the bytes its worker read) instead of
reading every Python file again: the bytes search must give the lines the pattern gives on the decoded text, and
a scan's routes must be what detection reading the files finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.ground.framework_imports import IMPORT_FRAMEWORK, import_lines, pattern_lines
from migrator.routes.apply import scan_files
from migrator.routes.detect import detect

ROOT = Path(__file__).resolve().parents[2]

CASES = [
    b"", b"import megatron\n", b"import megatron", b"from megatron.core import x\n", b"  \timport\t deepspeed as ds\n",
    b"import lightning_fabric\n", b"import pytorch_lightning as pl\nimport lightning\n", b"from . import megatron\n",
    b"x = 1; import megatron\n", b"from import megatron\n", b"importmegatron\n", b"# import megatron\n",
    b"\xef\xbb\xbfimport megatron\nimport megatron\n",  # a BOM: the first line does not start with the keyword
    b"import megatron\xc3\xa9\nimport megatron\xff\nimport megatron\xe2\x80\xa8\n",  # a word char, a bad byte, U+2028
    b"import megatron\xd9\xa3\n",  # an Arabic-Indic digit: a word character for `\b`
    b"a = 1\r\nimport deepspeed\r\nb\rimport transformers\n",  # only \n starts a line for `^`
    b"\xff\xfe bad\nimport accelerate\n" + b"\x00\n" + b"import mmengine\n",
    b"".join(b"import megatron.m%d\nfrom transformers import x\n" % i for i in range(6)),
    b"x = 'transformers' * 3; y = 'megatron megatron'\n    from  deepspeed  import  a\n",
    b"z = " + b"lightning " * 1000 + b"\nimport lightning",  # many occurrences on one line
]


@pytest.mark.parametrize("automaton", [True, False], ids=["re2", "substring searches"])
@pytest.mark.parametrize("data", CASES)
def test_import_lines_are_the_pattern_on_the_decoded_text(data, automaton, monkeypatch):
    from migrator.ground import framework_imports

    if not automaton:  # as without google-re2
        monkeypatch.setattr(framework_imports, "_AUTOMATON", [None])
    assert import_lines(data) == pattern_lines(data.decode("utf-8", "replace"))


def test_import_lines_on_the_repositorys_python_files():
    paths = sorted((ROOT / "migrator").rglob("*.py")) + sorted((ROOT / "tests" / "fixtures").rglob("*.py"))
    roots = "|".join(IMPORT_FRAMEWORK).encode()
    for path in paths:
        data = path.read_bytes()
        assert import_lines(data) == pattern_lines(data.decode("utf-8", "replace")), path
    # and on text made to hold every root at line starts
    made = b"\n".join(b"%s %s.x" % (kw, root) for kw in (b"import", b"from") for root in roots.split(b"|"))
    assert import_lines(made) == pattern_lines(made.decode()) and len(import_lines(made)) > 5


def _tree(root: Path) -> None:
    (root / "megatron" / "core").mkdir(parents=True)
    (root / "megatron" / "__init__.py").write_text("")
    (root / "megatron" / "core" / "__init__.py").write_text("from megatron.core import parallel_state\n")
    (root / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 12\nPATCH = 1\n")
    (root / "train.py").write_bytes(b"import torch\nimport deepspeed\nfrom transformers import AutoModel\n"
                                    b"x = torch.randn(2).cuda()\n")
    (root / "odd.py").write_bytes(b"\xef\xbb\xbfimport lightning\nimport  lightning\xc3\xa9\nimport mmengine\xff\n")
    (root / "setup.py").write_text("import accelerate\nsetup(install_requires=['transformers>=4.51'])\n")
    (root / "requirements.txt").write_text("deepspeed==0.16.4\n")


def test_detection_from_the_scans_lines_is_detection_reading_the_files(tmp_path):
    from migrator.engine.runner import run
    from migrator.ground.config import Settings
    from migrator.pipeline.options import scan_options

    _tree(tmp_path)
    settings = Settings(root=tmp_path, use_cache=False, jobs=1)
    output = run(settings, [tmp_path], scan_options(settings))
    files = scan_files(tmp_path)
    assert list(output.discovered) == files  # detection's files, without a second discovery
    assert set(output.framework_imports) == {rel for rel, _, kind in files if kind == "python"}
    read = detect(tmp_path, files)
    assert detect(tmp_path, files, imports=output.framework_imports) == read
    assert {f.name for f in read} == {"megatron-core", "deepspeed", "transformers", "mmengine"}  # `lightningé`: no


def test_a_cached_scan_detects_the_same_routes(tmp_path, monkeypatch):
    from migrator.api import scan

    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "tree"
    _tree(root)
    uncached = scan([root], root=root, use_cache=False, jobs=1)
    cold = scan([root], root=root, use_cache=True, jobs=1)
    warm = scan([root], root=root, use_cache=True, jobs=1)  # every file from the cache: none read by the worker
    assert uncached.frameworks
    assert [f.to_dict() for f in cold.frameworks] == [f.to_dict() for f in uncached.frameworks]
    assert [f.to_dict() for f in warm.frameworks] == [f.to_dict() for f in uncached.frameworks]
