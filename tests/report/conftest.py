"""A small CUDA project for the reporter tests, with the hostile lines a report must show as text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from migrator.ground.model import CoverageSummary, Finding, Marker, RunResult, SkippedFile, Summary, ToolInfo
from migrator.ground.serialise import from_data

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parent / "golden"
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))

FILES: dict[str, bytes] = {
    "pyproject.toml": b'[project]\nname = "demo"\n',
    "train.py": (
        b"import torch\n"
        b"import torch.distributed as dist\n"
        b"from apex.optimizers import FusedAdam\n"
        b"from flash_attn import flash_attn_func\n"
        b"\n"
        b"\n"
        b"def main(q, k, v, net):\n"
        b"    dist.init_process_group(backend=\"nccl\")\n"
        b"    model = torch.nn.DataParallel(net).cuda()\n"
        b"    opt = FusedAdam(model.parameters(), lr=1e-3)\n"
        b"    torch.backends.cudnn.benchmark = True\n"
        b"    out = flash_attn_func(q, k, v, causal=True)\n"
        b"    x = torch.zeros(2, device=\"cuda\")\n"
        b"    return out, opt, x\n"
    ),
    # hostile text: markup, template syntax, ANSI escapes, a bidi override, a backtick fence
    "hostile.py": (
        b"import torch\n"
        b"BANNER = \"</script><img src=x onerror=alert(1)> {{ 7*7 }} {% raw %}\"; y = torch.ones(1).cuda()\n"
        b"COLOR = \"\x1b[31mred\x1b[0m\"; z = torch.ones(1).cuda()  # \xe2\x80\xae evil\n"
        b"DOC = \"```\\n| a | b |\\n@someone\"; w = torch.ones(1).cuda()\n"
    ),
    # not UTF-8 and no coding declaration: a meta finding, shown with U+FFFD
    "latin.py": b"# caf\xe9\nx.cuda()\n",
    "launch.sh": b"#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\nexport NCCL_DEBUG=INFO\npython train.py \"$@\"\n",
    "requirements.txt": b"torch\napex @ git+https://github.com/NVIDIA/apex\n",
    "ext/setup.py": (
        b"from setuptools import setup\n"
        b"from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        b"\n"
        b"setup(name=\"ext\", ext_modules=[CUDAExtension(\"ext\", [\"ext.cu\"])], cmdclass={\"build_ext\": BuildExtension})\n"
    ),
    "ext/ext.cu": b"__global__ void k(float* x) { x[threadIdx.x] = 0.f; }\n",
}


def write_project(root: Path, files: dict[str, bytes] = FILES) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "demo")


def result_from_json(data: dict, root: Path) -> RunResult:
    s = data["summary"]
    summary = Summary(
        root=root.as_posix(),
        files_scanned=s["files_scanned"],
        files_skipped=s["files_skipped"],
        findings=s["findings"],
        by_family=s["by_family"],
        by_severity=s["by_severity"],
        by_fix_kind=s["by_fix_kind"],
        suppressed=s["suppressed"],
        unattributed_markers=s["unattributed_markers"],
        unattributed=tuple(Marker(**m) for m in s["unattributed"]),
        coverage=from_data(s["coverage"], CoverageSummary, "fixture-result.json") if "coverage" in s else None,
        baselined=s.get("baselined"),
    )
    t = data["tool"]
    return RunResult(
        tool=ToolInfo(t["name"], t["version"], t["catalogue"], t.get("coverage_table")),
        summary=summary,
        findings=tuple(Finding.from_dict(f) for f in data["findings"]),
        skipped=tuple(SkippedFile(**k) for k in data["skipped"]),
    )


FROZEN_TOOL = {"name": "ascend-migrate", "version": "0.0.0-test", "catalogue": "000000000000", "coverage_table": "torch-npu TEST"}


@pytest.fixture
def frozen_result(project: Path) -> RunResult:
    """The fixture project's scan result as stored in data/fixture-result.json (UPDATE_GOLDEN=1
    rescans and stores it again), rooted at this test's project folder."""
    path = DATA / "fixture-result.json"
    if UPDATE or not path.exists():
        from migrator import api

        live = api.scan([project], root=project, use_cache=False)
        data = live.to_dict()
        data["summary"]["root"] = "/ROOT"
        data["tool"] = FROZEN_TOOL
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return result_from_json(json.loads(path.read_text(encoding="utf-8")), project)

