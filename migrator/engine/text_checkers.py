"""Line-based checks for launch scripts, requirements, pyproject dependencies and CUDA sources.

Each checker yields raw hits `(rule_key, line, col, end_col, symbol, replacement)`; `rule_key` is
either an `impl` name or a `$...` pseudo-symbol resolved through the catalogue by the caller.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import NamedTuple

from migrator.engine.python_checker import ENV_TOKEN, NVIDIA_SMI

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class TextHit(NamedTuple):
    key: str  # "impl:<name>" or "sym:<pseudo symbol>"
    line: int
    column: int  # 1-based
    end_column: int
    symbol: str
    replacement: str | None = None
    message: str | None = None


SHELL_DEVICE = re.compile(r"(?<![\w.-])cuda(:\d+)?(?![\w.-])")
SHELL_NCCL = re.compile(r"(?<![\w-])nccl(?![\w-])")


def _shell_code(line: str) -> str:
    """The line without its comment (a `#` that starts a word); quotes are not parsed."""
    for m in re.finditer(r"(^|\s)#", line):
        return line[: m.start()]
    return line


def check_shell(lines: tuple[str, ...]) -> Iterator[TextHit]:
    for number, raw in enumerate(lines, 1):
        code = _shell_code(raw)
        if not code.strip():
            continue
        for m in ENV_TOKEN.finditer(code):
            name = m.group(1)
            yield TextHit(f"sym:$env.{name}", number, m.start() + 1, m.end() + 1, name)
        for m in NVIDIA_SMI.finditer(code):
            yield TextHit("impl:nvidia-smi", number, m.start() + 1, m.end() + 1, "nvidia-smi")
        for m in SHELL_NCCL.finditer(code):
            yield TextHit("impl:nccl-backend-string", number, m.start() + 1, m.end() + 1, "nccl", "hccl")
        for m in SHELL_DEVICE.finditer(code):
            yield TextHit("impl:device-string", number, m.start() + 1, m.end() + 1, m.group(0), "npu" + m.group(0)[4:])


# CUDA-only distributions (normalised names). `apex` only counts when installed from git:
# the PyPI project named `apex` is an unrelated package.
CUDA_ONLY_PACKAGES = {
    "flash-attn": "flash_attn is CUDA-only; use torch_npu.npu_fusion_attention",
    "flash-attn-3": "flash_attn is CUDA-only; use torch_npu.npu_fusion_attention",
    "xformers": "xformers has no Ascend build; use npu_fusion_attention or SDPA",
    "triton": "triton targets CUDA; Ascend has the separate `triton-ascend` package",
    "bitsandbytes": "bitsandbytes is CUDA-only; see `bitsandbytes-npu-beta`",
    "transformer-engine": "Transformer Engine is CUDA-only",
    "transformer-engine-torch": "Transformer Engine is CUDA-only",
    "cupy": "CuPy needs CUDA",
    "pynvml": "NVML is NVIDIA-only; use `npu-smi` / torch.npu memory APIs",
    "nvidia-ml-py": "NVML is NVIDIA-only; use `npu-smi` / torch.npu memory APIs",
    "nvidia-ml-py3": "NVML is NVIDIA-only",
    "mamba-ssm": "mamba-ssm ships CUDA kernels only",
    "causal-conv1d": "causal-conv1d ships CUDA kernels only",
    "apex": "NVIDIA Apex is CUDA-only; use torch / torch_npu equivalents",
}
REQ_LINE = re.compile(r"^\s*(?:-e\s+)?(?P<spec>[A-Za-z0-9][A-Za-z0-9._\-\[\],]*)")
GIT_APEX = re.compile(r"(?i)(git\+\S*nvidia/apex|#egg=apex\b|^\s*apex\s*@\s*git\+)")
CUDA_TORCH_BUILD = re.compile(r"(\+cu\d+|download\.pytorch\.org/whl/cu\d+|/whl/nightly/cu\d+)")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_hit(spec: str, line: int, column: int) -> Iterator[TextHit]:
    """Check one requirement string (from requirements.txt or pyproject)."""
    if GIT_APEX.search(spec):
        yield TextHit("impl:cuda-only-requirement", line, column, column + len(spec), "apex")
        return
    m = REQ_LINE.match(spec)
    if m:
        name = normalise(re.split(r"[\[\s<>=!~;@]", m.group("spec"), maxsplit=1)[0])
        if name != "apex" and (
            name in CUDA_ONLY_PACKAGES or name.startswith(("nvidia-", "cupy-cuda")) or name.endswith("-cu12")
        ):
            yield TextHit("impl:cuda-only-requirement", line, column, column + len(spec.rstrip()), name)
    build = CUDA_TORCH_BUILD.search(spec)
    if build:
        yield TextHit("impl:cuda-torch-build", line, column + build.start(), column + build.end(), build.group(0))
    pin = TORCH_PIN.match(spec)
    if pin:
        yield from _torch_npu_pairing(pin.group("ver"), line, column, column + len(spec.rstrip()))


def _torch_npu_pairing(version: str, line: int, column: int, end: int) -> Iterator[TextHit]:
    from migrator.coverage import CoverageError, torch_npu_release_for_torch

    try:
        release = torch_npu_release_for_torch(version)
    except CoverageError:
        return
    if release:
        yield TextHit("impl:torch-npu-release", line, column, end, f"torch=={version}",
                      message=f"torch {version} pairs with torch-npu {release}: add `torch-npu=={release}` for Ascend")
    else:
        yield TextHit("impl:torch-npu-pairing-unknown", line, column, end, f"torch=={version}",
                      message=f"torch {version} is not in the torch-npu pairing table (torch 2.7.1 … 2.14.0); "
                      "check PyPI's torch-npu releases for it")


def check_requirements(lines: tuple[str, ...]) -> Iterator[TextHit]:
    for number, raw in enumerate(lines, 1):
        code = raw.split(" #", 1)[0]
        if not code.strip() or code.lstrip().startswith("#"):
            continue
        stripped = code.lstrip()
        column = len(code) - len(stripped) + 1
        if stripped.startswith(("--index-url", "--extra-index-url", "-i ", "-f ", "--find-links")):
            build = CUDA_TORCH_BUILD.search(stripped)
            if build:
                yield TextHit("impl:cuda-torch-build", number, column, column + len(stripped.rstrip()), build.group(0))
            continue
        yield from requirement_hit(stripped, number, column)


def _pyproject_requirements(data: dict) -> list[str]:
    project = data.get("project") or {}
    reqs = list(project.get("dependencies") or [])
    for group in (project.get("optional-dependencies") or {}).values():
        reqs.extend(group or [])
    for group in (data.get("dependency-groups") or {}).values():
        reqs.extend(r for r in group or [] if isinstance(r, str))
    poetry = (data.get("tool") or {}).get("poetry") or {}
    for name in (poetry.get("dependencies") or {}).keys():
        reqs.append(name)
    return [r for r in reqs if isinstance(r, str)]


class PyprojectError(ValueError):
    pass


def check_pyproject(text: str, lines: tuple[str, ...]) -> Iterator[TextHit]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PyprojectError(f"invalid TOML: {exc}") from None
    seen_lines: set[tuple[int, str]] = set()
    for req in _pyproject_requirements(data):
        for number, raw in enumerate(lines, 1):
            col = raw.find(req)
            if col >= 0 and (number, req) not in seen_lines and not raw.lstrip().startswith("#"):
                seen_lines.add((number, req))
                yield from requirement_hit(req, number, col + 1)
                break


def check_cuda_source(lines: tuple[str, ...]) -> Iterator[TextHit]:
    first = lines[0] if lines else ""
    yield TextHit("impl:cuda-source-file", 1, 1, len(first) + 1, "CUDA source file")


TORCH_PIN = re.compile(r"^\s*torch\s*(==|~=)\s*(?P<ver>\d+\.\d+(\.\d+)?)")
