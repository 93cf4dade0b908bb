"""Line-based checks for launch scripts, requirements, pyproject dependencies and CUDA sources.

Each checker yields raw hits `(rule_key, line, col, end_col, symbol, replacement)`; `rule_key` is
either an `impl` name or a `$...` pseudo-symbol resolved through the catalogue by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, NamedTuple

from migrator.engine import perf_env, shell_words, toml_positions
from migrator.engine.docker_view import DockerShellView, docker_escape
from migrator.engine.python_checker import ENV_TOKEN, NVIDIA_SMI

if TYPE_CHECKING:
    from packaging.requirements import Requirement


class TextHit(NamedTuple):
    key: str  # "impl:<name>" or "sym:<pseudo symbol>"
    line: int
    column: int  # 1-based
    end_column: int
    symbol: str
    replacement: str | None = None
    message: str | None = None


# `cuda` as a word (`--device cuda`, `device=cuda:0`), never part of a path (`/usr/local/cuda/bin`)
SHELL_DEVICE = re.compile(r"(?<![\w./-])cuda(:\d+)?(?![\w./-])")
SHELL_NCCL = re.compile(r"(?<![\w/-])nccl(?![\w/-])")


def _shell_code(line: str) -> str:
    """The line without its comment (a `#` that starts a word); quotes are not parsed."""
    for m in re.finditer(r"(^|\s)#", line):
        return line[: m.start()]
    return line


def check_shell(lines: tuple[str, ...]) -> Iterator[TextHit]:
    install_lines: set[int] = set()
    yield from _command_hits(lines, install_lines)
    for number, raw in enumerate(lines, 1):
        directive = SCHEDULER_DIRECTIVE.match(raw)
        if directive:
            yield from _scheduler_hits(raw, number, directive.group(1).upper())
            continue
        code = _shell_code(raw)
        if code.strip():
            yield from _shell_line_hits(code, number, number in install_lines)


def _shell_line_hits(code: str, number: int, installs: bool) -> Iterator[TextHit]:
    """One line's code (comment removed); `installs`: the line installs packages."""
    for m in ENV_TOKEN.finditer(code):
        name = m.group(1)
        yield TextHit(f"sym:$env.{name}", number, m.start() + 1, m.end() + 1, name)
    for m in NVIDIA_SMI.finditer(code):
        yield TextHit("impl:nvidia-smi", number, m.start() + 1, m.end() + 1, "nvidia-smi")
    if SLURM_COMMAND.search(code):
        yield from _scheduler_hits(code, number, "SBATCH")
    if CONTAINER_COMMAND.search(code):
        for m in CONTAINER_GPU_FLAG.finditer(code):
            yield TextHit("impl:container-gpu-flag", number, m.start() + 1, m.end() + 1, m.group(0).strip())
    for setting in perf_env.shell_settings(code):  # perf: launch blocking, debug logs, task queue off...
        yield TextHit(f"impl:{setting.rule.impl}", number, setting.column, setting.end_column, setting.text,
                      setting.rule.fix)
    for m in NPROC_GPU.finditer(code):
        yield TextHit("impl:torchrun-nproc-gpu", number, m.start(1) + 1, m.end(1) + 1, "gpu", "npu")
    if installs:
        return  # `conda install nccl` names a package, not a backend
    for m in SHELL_NCCL.finditer(code):
        yield TextHit("impl:nccl-backend-string", number, m.start() + 1, m.end() + 1, "nccl", "hccl")
    for m in SHELL_DEVICE.finditer(code):
        yield TextHit("impl:device-string", number, m.start() + 1, m.end() + 1, m.group(0), "npu" + m.group(0)[4:])


# ---- cluster schedulers, launchers and containers ---------------------------------------------

# `#SBATCH ...` / `#PBS ...` / `#BSUB ...` are comments to the shell but job requests to the scheduler
SCHEDULER_DIRECTIVE = re.compile(r"^\s*#(SBATCH|PBS|BSUB)\b", re.IGNORECASE)
SLURM_COMMAND = re.compile(r"(?<![\w-])(srun|salloc|sbatch)(?![\w-])")
SLURM_GPU = re.compile(
    r"(?<![\w-])(?:--gres[= ]\s*\S*?(?<![\w-])gpu(?![\w-])\S*|--gpus(?:-per-(?:node|task|socket))?[= ]\s*\S+|"
    r"-G\s*\d\S*|--gpu-bind[= ]\S+|--gpu-freq[= ]\S+|--(?:cpus|mem)-per-gpu[= ]\S+|--ntasks-per-gpu[= ]\S+)"
)
PBS_GPU = re.compile(r"(?<![\w-])ngpus=\d+")
LSF_GPU = re.compile(r"(?<![\w-])-gpu\s+(?:\"[^\"]*\"|'[^']*'|\S+)")


def _scheduler_hits(text: str, number: int, scheduler: str) -> Iterator[TextHit]:
    pattern = {"SBATCH": SLURM_GPU, "PBS": PBS_GPU, "BSUB": LSF_GPU}[scheduler]
    for m in pattern.finditer(text):
        value = m.group(0).rstrip("\"',;")
        yield TextHit("impl:scheduler-gpu-request", number, m.start() + 1, m.start() + len(value) + 1, value)


# torchrun's `--nproc_per_node gpu` counts CUDA devices (torch/distributed/run.py raises
# "Cuda is not available." without CUDA); `npu` (the privateuse1 backend name) counts NPUs
NPROC_GPU = re.compile(r"--nproc[_-]per[_-]node(?:=[\"']?|\s+[\"']?|[\"']\s*,\s*[\"'])(gpu)(?![\w-])")
CONTAINER_COMMAND = re.compile(r"(?<![\w-])(docker|podman|nvidia-docker|singularity|apptainer)(?![\w-])")
CONTAINER_GPU_FLAG = re.compile(
    r"(?<![\w-])(?:--gpus[= ]\s*(?:\"[^\"]*\"|'[^']*'|\S+)|--runtime[= ]nvidia(?![\w-])|nvidia-docker(?![\w-])|"
    r"nvidia\.com/gpu\S*|--nv(?![\w-]))"
)


# ---- package installs (pip, conda, apt, yum) ---------------------------------------------------

PIP_VALUE_OPTIONS = {
    "-r", "--requirement", "-c", "--constraint", "-t", "--target", "--prefix", "--root", "--src", "--platform",
    "--python-version", "--implementation", "--abi", "-C", "--config-settings", "--global-option",
    "--install-option", "--trusted-host", "--proxy", "--cache-dir", "--log", "--progress-bar", "--only-binary",
    "--no-binary", "--upgrade-strategy", "--python", "-p", "--group", "--extra",
}
PIP_INDEX_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--index", "--default-index"}
CONDA_VALUE_OPTIONS = {"-c", "--channel", "-n", "--name", "-p", "--prefix", "--file", "--override-channels"}
# NVIDIA CUDA toolkit / library packages of apt, yum/dnf and conda (versions stripped first)
CUDA_SYSTEM_PACKAGE = re.compile(
    r"^(cuda|cuda-.+|cudatoolkit(-dev)?|pytorch-cuda|cudnn|nccl|libcudnn.*|libnccl.*|libcublas.*|libcufft.*|libcurand.*|"
    r"libcusolver.*|libcusparse.*|libnpp.*|libnvjpeg.*|libnvinfer.*|tensorrt.*|nvidia-.+|libnvidia-.+|"
    r"datacenter-gpu-manager|magma-cuda.*)$"
)
WORD = re.compile(r"\S+")


def logical_lines(lines: tuple[str, ...]) -> Iterator[tuple[str, list[tuple[int, int]]]]:
    """Shell lines joined at trailing backslashes (comments dropped); with, per physical line,
    (line number, offset of its first character in the joined text). Public: the fixer places its notes
    above the first physical line of a continued command with it."""
    i = 0
    while i < len(lines):
        text, starts = "", []
        while True:
            code = "" if SCHEDULER_DIRECTIVE.match(lines[i]) else _shell_code(lines[i])
            stripped = code.rstrip()
            starts.append((i + 1, len(text)))
            i += 1
            if stripped.endswith("\\") and i < len(lines):
                text += stripped[:-1] + " "
                continue
            text += code
            break
        yield text, starts


def _position(starts: list[tuple[int, int]], offset: int) -> tuple[int, int]:
    line, base = starts[0]
    for number, start in starts:
        if start <= offset:
            line, base = number, start
    return line, offset - base + 1


def _command_hits(lines: tuple[str, ...], install_lines: set[int]) -> Iterator[TextHit]:
    for text, starts in logical_lines(lines):
        if not INSTALL_HINT.search(text):
            continue
        for words in shell_words.commands(text):
            hits = list(_install_hits(words, starts))
            if hits or _install_manager(words) is not None:
                install_lines.update(_position(starts, offset)[0] for _, offset in words)
            yield from hits


INSTALL_HINT = re.compile(r"(?<![\w-])(pip3?|pip3\.\d+|uv|conda|mamba|micromamba|apt|apt-get|yum|dnf|microdnf)(?![\w-])")


def _install_manager(words: list[shell_words.Word]) -> tuple[str, int] | None:
    """("pip" | "conda" | "system", index of the first argument) when the words run a package install."""
    names = [w.rsplit("/", 1)[-1] for w, _ in words]
    for i, name in enumerate(names):
        nxt = names[i + 1] if i + 1 < len(names) else ""
        if re.fullmatch(r"pip3?(\.\d+)?", name) and nxt == "install":
            return "pip", i + 2
        if name == "uv" and nxt == "add":
            return "pip", i + 2
        if name in ("conda", "mamba", "micromamba") and nxt in ("install", "create"):
            return "conda", i + 2
        if name in ("apt", "apt-get", "yum", "dnf", "microdnf") and nxt == "install":
            return "system", i + 2
    return None


def _install_hits(words: list[shell_words.Word], starts: list[tuple[int, int]]) -> Iterator[TextHit]:
    found = _install_manager(words)
    if found is None:
        return
    manager, first = found
    value_of: str | None = None  # the option whose value the next word is
    for word, offset in words[first:]:
        if value_of is not None:
            if manager == "pip" and value_of in PIP_INDEX_OPTIONS:
                yield from _torch_build_hit(word, offset, starts)
            value_of = None
            continue
        if word.startswith("-"):
            value_of = yield from _install_option(manager, word, offset, starts)
            continue
        if word.startswith(("$", ">", "<", "2>", ".", "/")) or word in ("install", "-"):
            continue
        line, col = _position(starts, offset)
        yield from _package_hits(manager, word, line, col)


def _torch_build_hit(text: str, offset: int, starts: list[tuple[int, int]]) -> Iterator[TextHit]:
    """A CUDA torch build (`/whl/cu121`) in an index URL that starts at `offset`."""
    build = CUDA_TORCH_BUILD.search(text)
    if build:
        line, col = _position(starts, offset + build.start())
        yield TextHit("impl:cuda-torch-build", line, col, col + len(build.group(0)), build.group(0))


def _install_option(
    manager: str, word: str, offset: int, starts: list[tuple[int, int]]
) -> Generator[TextHit, None, str | None]:
    """Hits in an `--option=value` word; returns the option when the next word is its value."""
    option, eq, value = word.partition("=")
    if manager == "pip" and option in PIP_INDEX_OPTIONS and eq:
        yield from _torch_build_hit(value, offset + len(option) + 1, starts)
        return None
    if not eq and (
        (manager == "pip" and option in PIP_VALUE_OPTIONS | PIP_INDEX_OPTIONS)
        or (manager == "conda" and option in CONDA_VALUE_OPTIONS)
        or (manager == "system" and option in ("-t", "--target-release", "-o", "--option"))
    ):
        return option
    # `-e X`: the next word is a requirement or a path and is checked as one
    return None


def _package_hits(manager: str, word: str, line: int, col: int) -> Iterator[TextHit]:
    """A package word of `pip`, `conda` or a system package manager's install command."""
    if manager == "pip":
        yield from requirement_hit(word, line, col)
        return
    name = re.split(r"[=<>!~:\[]", word, maxsplit=1)[0].lower()
    if manager == "conda" and "::" in word:
        name = word.split("::", 1)[1].split("=", 1)[0].lower()
    if CUDA_SYSTEM_PACKAGE.match(name):
        yield TextHit("impl:cuda-system-package", line, col, col + len(word), name)
    elif manager == "conda" and name != "apex" and canonical_name(name) in CUDA_ONLY_PACKAGES:
        yield TextHit("impl:cuda-only-requirement", line, col, col + len(word), canonical_name(name))


# ---- container files -----------------------------------------------------------------------

DOCKER_INSTRUCTION = re.compile(r"^(\s*)([A-Za-z]+)(?=\s|$)")
DOCKER_SHELL_INSTRUCTIONS = {"RUN", "CMD", "ENTRYPOINT", "ENV", "ARG", "HEALTHCHECK", "SHELL", "ONBUILD"}
# images that ship the CUDA runtime: NVIDIA's own, NGC, pytorch/pytorch (CUDA builds unless `-cpu`),
# and any image whose reference names cuda, cudnn or a `gpu` variant
CUDA_IMAGE = re.compile(
    r"(?i)^(?:docker\.io/)?(?:nvidia/|nvcr\.io/nvidia/|pytorch/pytorch(?::(?!.*cpu)|@|$))|cuda|cudnn|(?<![a-z0-9])gpu(?![a-z0-9])"
)


def _container_image(rest: str) -> tuple[str, int] | None:
    """The image reference of a FROM line (after its flags) and its offset in `rest`."""
    for m in WORD.finditer(rest):
        if not m.group(0).startswith("--"):
            return m.group(0), m.start()
    return None


def check_dockerfile(lines: tuple[str, ...]) -> Iterator[TextHit]:
    """FROM images, RUN/ENV/ARG/CMD/ENTRYPOINT bodies through the shell checker (continuations joined)."""
    escape = docker_escape(lines)
    view = DockerShellView()
    stages: set[str] = set()
    instruction, continuing = "", False
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            view.lines.append("\\" if continuing else "")  # comment lines inside a continuation are dropped by Docker
            continue
        body_start = 0
        if not continuing:
            m = DOCKER_INSTRUCTION.match(raw)
            instruction = m.group(2).upper() if m else ""
            body_start = m.end() if m else 0
        body = raw[body_start:]
        continuing = raw.rstrip().endswith(escape)
        if escape != "\\" and continuing:
            body = body.rstrip()[:-1] + " \\"
        if instruction == "FROM" and body_start:
            yield from _base_image_hits(body, body_start, number, stages)
            view.lines.append("")
        elif instruction in DOCKER_SHELL_INSTRUCTIONS:
            view.add(" " * body_start + body, body, continuing)
        else:
            view.lines.append("")
    yield from check_shell(tuple(view.lines))


def _base_image_hits(body: str, body_start: int, number: int, stages: set[str]) -> Iterator[TextHit]:
    """A FROM line's CUDA base image (not an earlier stage's name); its `AS name` joins `stages`."""
    found = _container_image(body)
    if not found:
        return
    image, offset = found
    alias = re.search(r"(?i)\sAS\s+(\S+)", body)
    if image.lower() not in stages and CUDA_IMAGE.search(image):
        col = body_start + offset + 1
        yield TextHit("impl:cuda-base-image", number, col, col + len(image), image)
    if alias:
        stages.add(alias.group(1).lower())


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


def canonical_name(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


def requirement_hit(spec: str, line: int, column: int) -> Iterator[TextHit]:
    """Check one requirement string (from requirements.txt or pyproject)."""
    if GIT_APEX.search(spec):
        yield TextHit("impl:cuda-only-requirement", line, column, column + len(spec), "apex")
        return
    req = _parse_requirement(spec)
    name = None
    if req is not None:
        name = canonical_name(req.name)
    elif m := REQ_LINE.match(spec):  # not PEP 508 (`-e`, `--hash`, ...): the leading name only
        name = canonical_name(re.split(r"[\[\s<>=!~;@]", m.group("spec"), maxsplit=1)[0])
    if name is not None and name != "apex" and (
        name in CUDA_ONLY_PACKAGES or name.startswith(("nvidia-", "cupy-cuda")) or name.endswith("-cu12")
    ):
        yield TextHit("impl:cuda-only-requirement", line, column, column + len(spec.rstrip()), name)
    build = CUDA_TORCH_BUILD.search(spec)
    if build:
        yield TextHit("impl:cuda-torch-build", line, column + build.start(), column + build.end(), build.group(0))
    version = _torch_pin(req) if req is not None else None
    if version:
        yield from _torch_npu_pairing(version, line, column, column + len(spec.rstrip()))


def _parse_requirement(spec: str) -> Requirement | None:
    """The PEP 508 requirement (``packaging``), or None when the text is not one."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(spec.strip())
    except InvalidRequirement:
        return None


def _torch_pin(req: Requirement) -> str | None:
    """``X.Y[.Z]`` of an exact (``==``) or compatible (``~=``) torch pin."""
    if canonical_name(req.name) != "torch":
        return None
    for clause in req.specifier:
        if clause.operator in ("==", "~="):
            m = TORCH_PIN_VERSION.match(clause.version)
            if m:
                return m.group(0)
    return None


def _torch_npu_pairing(version: str, line: int, column: int, end: int) -> Iterator[TextHit]:
    from migrator.catalogue.coverage import CoverageError, torch_npu_release_for_torch

    try:
        release = torch_npu_release_for_torch(version)
    except CoverageError:
        return
    if release:
        yield TextHit("impl:torch-npu-release", line, column, end, f"torch=={version}", f"torch-npu=={release}",
                      message=f"torch {version} pairs with torch-npu {release}: add `torch-npu=={release}` for Ascend")
    else:
        yield TextHit("impl:torch-npu-pairing-unknown", line, column, end, f"torch=={version}",
                      message=f"torch {version} is not in the torch-npu pairing table (torch 2.7.1 … 2.14.0); "
                      "check PyPI's torch-npu releases for it")


HAS_TORCH_NPU = re.compile(r"(?im)^\s*torch[-_]npu\b")


def check_requirements(lines: tuple[str, ...]) -> Iterator[TextHit]:
    has_torch_npu = any(HAS_TORCH_NPU.match(line) for line in lines)
    for hit in _requirement_lines(lines):
        if not (has_torch_npu and hit.key == "impl:torch-npu-release"):  # already paired
            yield hit


def _requirement_lines(lines: tuple[str, ...]) -> Iterator[TextHit]:
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
    tomllib = toml_positions.reader()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PyprojectError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise PyprojectError("nested too deeply for the TOML reader") from None
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


TORCH_PIN_VERSION = re.compile(r"\d+\.\d+(\.\d+)?")
