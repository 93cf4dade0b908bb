"""The Ascend native-API docs: per-SoC support rows, and their Chinese limit lines turned into
flags, dtype sets and short English phrases by fixed translation rules."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from migrator.catalogue.coverage._names import (
    normalize_dtype,
    normalize_name,
)
from op_coverage.facts import SOC_TERMS, SOCS, has_cjk, sorted_dtypes


@dataclass
class DocRow:
    name: str
    file: str
    npu_name: str | None
    support: dict  # soc -> bool (only SoCs present in the table)
    limit_lines: list


_MARKER = re.compile(r"(?m)^\*\*原生文档\*\*")
_BLOCK_END = re.compile(r"(?m)^(?:#{1,6}\s|>\s*<font)")
_ANCHOR = re.compile(r"^[：:]\s*\[([^\]]+)\]")
_NPU_FORM = re.compile(r"(?m)^\*\*NPU\s*形式名称\*\*\s*[：:]\s*`?([^`\s]+)`?")
_TABLE_ROW = re.compile(r"(?m)^\|\s*<term>([^<]+)</term>\s*\|\s*([^|]*?)\s*\|")
_LIMITS = "**限制与说明**"
_YES = {"✔", "&#10004;", "√", "✓"}
_NO = {"✘", "&#10008;", "×", "✗", "x"}


def parse_docs_md(text: str, filename: str) -> list[DocRow]:
    """Split a native-API page on its ``**原生文档**`` markers (the reliable anchor)."""
    rows: list[DocRow] = []
    chunks = _MARKER.split(text)
    for chunk in chunks[1:]:
        end = _BLOCK_END.search(chunk)
        body = chunk[: end.start()] if end else chunk
        anchor = _ANCHOR.match(body)
        if not anchor:
            continue
        name = normalize_name(anchor.group(1))
        npu = _NPU_FORM.search(body)
        support: dict[str, bool] = {}
        for term, mark in _TABLE_ROW.findall(body):
            soc = SOC_TERMS.get(term.strip())
            if soc is None:
                continue
            mark = mark.strip()
            if mark in _YES:
                support[soc] = True
            elif mark in _NO:
                support[soc] = False
        limits_at = body.find(_LIMITS)
        lines = extract_limit_lines(body[limits_at + len(_LIMITS):]) if limits_at >= 0 else []
        rows.append(DocRow(name, filename, npu.group(1) if npu else None, support, lines))
    return rows


def extract_limit_lines(raw: str) -> list[str]:
    """Bullet lines of a limits section, without code blocks, HTML and example code."""
    raw = re.sub(r"```.*?```", "\n", raw, flags=re.S)
    lines: list[str] = []
    first = True
    for line in raw.splitlines():
        text = line.strip()
        if first and text[:1] in ("：", ":"):
            text = text[1:].strip()
            first = False
            if text:
                lines.append(text)
            continue
        if not text or text.startswith("<") or text == "...":
            continue
        first = False
        if text.startswith("- ") or text.startswith("-"):
            text = text.lstrip("-").strip()
            if text:
                lines.append(text)
        elif re.match(r"^\d+\.\s", text):
            lines.append(text)
    return lines


# -- limit translation -----------------------------------------------------------------------

_DT = r"(?:bf16|fp16|fp32|fp64|fp8|uint8|uint16|int8|int16|int32|int64|bool|complex64|complex128|double)"
_DTLIST = rf"{_DT}(?:\s*[，,、和]\s*{_DT})*"
_SOC_PREFIX = re.compile(r"^((?:<term>[^<]+</term>\s*[、/，,]?\s*)+)[：:]?\s*(.*)$")
_SOC_TARGET = re.compile(r"^针对<term>([^<]+)</term>\s*[，,]\s*(.*)$")


def _dt_list(text: str) -> list[str]:
    out = []
    for token in re.findall(_DT, text):
        norm = normalize_dtype(token)
        if norm:
            out.append(norm)
    return sorted_dtypes(out)


def _fmt_value(value: str) -> str:
    value = value.strip().strip("`").strip('"').strip("'")
    if re.fullmatch(r"-?\d+(\.\d+)?|True|False|None|\(.*\)|\[.*\]", value) or value.startswith("torch."):
        return value
    return f"'{value}'"


def _alts(text: str) -> str:
    parts = [p for p in re.split(r"\s*(?:或|和|、)\s*", text.strip().strip("。")) if p]
    return " or ".join(_fmt_value(p) for p in parts)


@dataclass
class LimitInfo:
    dtypes: dict = field(default_factory=dict)  # soc -> list (primary tensor argument)
    param: dict = field(default_factory=dict)  # soc -> name of the argument the dtype list is for
    excluded: dict = field(default_factory=dict)  # soc -> set
    added: dict = field(default_factory=dict)  # soc -> set
    flags: dict = field(default_factory=dict)  # soc -> set
    fragments: dict = field(default_factory=dict)  # soc -> list of English fragments
    untranslated: dict = field(default_factory=dict)  # soc -> int
    applies: dict = field(default_factory=dict)  # soc -> bool (any limit line for that SoC)
    dtype_only: dict = field(default_factory=dict)  # soc -> bool (all lines are dtype lists)
    npu_name: str | None = None


# (pattern, handler). Handlers return a list of actions; patterns are tried in order with
# re.search on the line (after any SoC prefix). An action is a tuple:
#   ("dtypes", param, [dtypes]) ("exclude", [dtypes]) ("add", [dtypes]) ("flag", name)
#   ("frag", english) ("npu", name) ("ignore",)
def _rx(pattern: str) -> re.Pattern:
    return re.compile(pattern)


_RULES: list[tuple[re.Pattern, Callable[[re.Match], list]]] = [
    (_rx(rf"^((?:`[\w.\"]+`\s*[、，,]?\s*)+)仅支持({_DTLIST})(?:[，,]\s*不支持(?:{_DTLIST})(?:数据类型)?)?(?:取值范围\[[-\d,]+\])?(?:。.*)?$"),
     lambda m: [("dtypes", re.findall(r"`([^`]+)`", m.group(1))[0].strip('"'), _dt_list(m.group(2)))]),
    (_rx(rf"^输入((?:`[\w.]+`\s*[、，,]?\s*)+)的数据类型为({_DTLIST})$"),
     lambda m: [("dtypes", re.findall(r"`([^`]+)`", m.group(1))[0], _dt_list(m.group(2)))]),
    (_rx(r"^`(\w+)`维度需与`(\w+)`维度一致$|^`(\w+)`的维度数需与`(\w+)`的维度数一致$"),
     lambda m: [("frag", f"{m.group(1) or m.group(3)} must have as many dims as {m.group(2) or m.group(4)}")]),
    (_rx(r"^两个输入的shape要保持一致$"), lambda m: [("frag", "both inputs must have the same shape")]),
    (_rx(r"^`(\w+)`参数值不能超过int32的最大值$"), lambda m: [("frag", f"{m.group(1)} must fit in int32")]),
    (_rx(rf"^(?:在)?({_DTLIST})类型下?不支持三个`tensor`同时广播$"),
     lambda m: [("frag", f"{', '.join(_dt_list(m.group(1)))}: broadcasting all three tensors not supported")]),
    (_rx(r"^`eps`取值大于1时输出为nan，`eps`取值为1时输出为inf$"), lambda m: [("frag", "eps > 1 gives NaN and eps = 1 gives inf")]),
    (_rx(rf"^带`(\w+)`场景不支持({_DTLIST})$"), lambda m: [("frag", f"{', '.join(_dt_list(m.group(2)))} not supported with {m.group(1)}")]),
    (_rx(r"^取值范围\[(-?\d+),\s*(-?\d+)\]$"), lambda m: [("frag", f"values must lie in [{m.group(1)}, {m.group(2)}]")]),
    (_rx(r"^输入范围为(\d+)-(\d+)$"), lambda m: [("frag", f"valid range {m.group(1)}-{m.group(2)}")]),
    (_rx(r"^`(\w+)`需小于等于(\d+)$"), lambda m: [("frag", f"{m.group(1)} <= {m.group(2)}")]),
    (_rx(r"^输入`tensor`的元素个数不能超过10万$"), lambda m: [("frag", "at most 100000 elements")]),
    (_rx(r"^目标序列的长度不支持0"), lambda m: [("frag", "target_lengths must not contain 0")]),
    (_rx(rf"^不支持({_DTLIST}|{_DT}(?:\s*,\s*{_DT})*)(?:数据类型|类型)?$"), lambda m: [("exclude", _dt_list(m.group(1)))]),
    (_rx(rf"^额外支持({_DTLIST})$"), lambda m: [("add", _dt_list(m.group(1)))]),
    (_rx(r"^支持Named Tensor$"), lambda m: [("ignore",)]),
    (_rx(r"可能回退至CPU执行"), lambda m: [("flag", "cpu_fallback"), ("frag", "may fall back to CPU execution")]),
    (_rx(r"^回退至CPU执行$"), lambda m: [("flag", "cpu_fallback"), ("frag", "falls back to CPU execution")]),
    (_rx(r"^仅CPU支持$"), lambda m: [("flag", "cpu_only"), ("frag", "CPU tensors only")]),
    (_rx(r"仅支持推理"), lambda m: [("flag", "inference_only"), ("frag", "inference only, training not supported")]),
    (_rx(r"use_compatible_impl"),
     lambda m: [("flag", "compat_impl"), ("frag", "torch_npu.npu.use_compatible_impl(True) selects the PyTorch-compatible implementation")]),
    (_rx(r"精度可能和.*存在差异|精度可能存在差异"), lambda m: [("flag", "precision_differs"), ("frag", "precision may differ from Atlas A2/A3")]),
    (_rx(r"精度(?:累加)?误差|精度会有损失|结果可能存在(?:精度)?误差"), lambda m: [("flag", "precision_differs"), ("frag", "results may differ in precision")]),
    (_rx(r"NPU(?:形式名称为|对应接口为)`([^`]+)`"), lambda m: [("npu", m.group(1))]),
    (_rx(r"^建议使用已适配的`([^`]+)`$"), lambda m: [("npu", m.group(1)), ("frag", f"use {m.group(1)}")]),
    (_rx(r"^`(\w+)`参数仅支持设置为`([^`]+)`$"), lambda m: [("frag", f"{m.group(1)}={_fmt_value(m.group(2))} only")]),
    (_rx(r"^(?:当前)?`\"?(\w+)\"?`参数仅支持(\w+)$"), lambda m: [("frag", f"{m.group(1)}={_fmt_value(m.group(2))} only")]),
    (_rx(r"^由于底层实现限制，`\"?(\w+)\"?`仅支持(True|False)"), lambda m: [("frag", f"{m.group(1)}={m.group(2)} only")]),
    (_rx(r"^`(\w+)`(?:参数|的值)?(?:目前)?(?:在NPU上)?仅支持(?:设置为|传入)?([\w().,\[\] ]+?(?:(?:或|和)[\w().,\[\] ]+)*)$"),
     lambda m: [("frag", f"{m.group(1)}={_alts(m.group(2))} only")]),
    (_rx(r"^当前NPU设备仅支持设置`(\w+)`为([\w.]+)或([\w.]+)$"),
     lambda m: [("frag", f"{m.group(1)}={m.group(2)} or {m.group(3)} only")]),
    (_rx(r"^(?:属性)?`(\w+)`仅支持非负值(，不支持nan)?$"), lambda m: [("frag", f"{m.group(1)} must be non-negative")]),
    (_rx(r"^仅支持`(\w+)`大于等于0$"), lambda m: [("frag", f"{m.group(1)} must be non-negative")]),
    (_rx(r"^`(\w+)`参数需大于(\d+)$"), lambda m: [("frag", f"{m.group(1)} must be > {m.group(2)}")]),
    (_rx(r"^不支持`([^`]+)`(?:参数)$"), lambda m: [("frag", f"{m.group(1)} argument not supported")]),
    (_rx(r"^不支持`([^`]+)`(?:的)?(?:场景)?$"), lambda m: [("frag", f"{m.group(1)} not supported")]),
    (_rx(r"^(?:入参|当前)?`(\w+)`不支持(?:求导|反向计算)$"), lambda m: [("frag", f"{m.group(1)} is not differentiable")]),
    (_rx(r"^不支持`dtype`参数$"), lambda m: [("frag", "dtype argument not supported")]),
    (_rx(r"^输入最大支持(\d+)维$"), lambda m: [("frag", f"at most {m.group(1)} input dims")]),
    (_rx(r"^不支持(\d+)维度及以上输入$"), lambda m: [("frag", f"inputs with {m.group(1)} or more dims not supported")]),
    (_rx(r"^不支持(\d+)维度的shape$"), lambda m: [("frag", f"{m.group(1)}-dim shapes not supported")]),
    (_rx(r"^(?:`input`)?(?:仅|只)?支持(\d+)-(\d+)维"), lambda m: [("frag", f"{m.group(1)}-{m.group(2)} dims only")]),
    (_rx(r"^该API仅支持(\d+)维及以上的输入`input`$"), lambda m: [("frag", f"input needs at least {m.group(1)} dims")]),
    (_rx(r"^入参`(\w+)`不支持(\d+)维$"), lambda m: [("frag", f"{m.group(2)}-dim {m.group(1)} not supported")]),
    (_rx(r"^不支持稀疏张量$"), lambda m: [("frag", "sparse tensors not supported")]),
    (_rx(r"^依赖稀疏`tensor`$"), lambda m: [("frag", "depends on sparse tensors")]),
    (_rx(r"^(?:`input`)?不支持标量`tensor`$"), lambda m: [("frag", "scalar tensors not supported")]),
    (_rx(r"^不支持nan场景$"), lambda m: [("frag", "NaN inputs not supported")]),
    (_rx(r"^不支持变长序列输入$"), lambda m: [("frag", "variable-length sequences not supported")]),
    (_rx(r"^目前嵌套张量只支持创建"), lambda m: [("frag", "nested tensors can only be created, no other operations")]),
    (_rx(r"^需通过`torch.compile`获取SymInt$"), lambda m: [("frag", "SymInt only obtainable through torch.compile")]),
    (_rx(r"^未设置`device`时.*隐式地初始化"), lambda m: [("frag", "implicitly initialises the current device (default 0) when none is set")]),
    (_rx(r"暂不支持double类型.*默认返回fp32"), lambda m: [("exclude", ["fp64"]), ("frag", "returns fp32 where fp64 is requested")]),
    (_rx(r"^不支持double数据类型$"), lambda m: [("exclude", ["fp64"])]),
    (_rx(r"不再支持对bool类型数据进行处理"), lambda m: [("exclude", ["bool"]), ("frag", "bool input not supported")]),
    (_rx(r"启动`foreach`的情况下.*性能下降"),
     lambda m: [("frag", "foreach can be slow with many parameter groups; consider foreach=False")]),
    (_rx(r"启动`fused`的情况下.*不支持`grad_scale`和`found_inf`"),
     lambda m: [("frag", "fused=True does not accept grad_scale/found_inf; fp16/bf16 are computed with up-casting")]),
    (_rx(r"^`backend`可支持npugraphs"), lambda m: [("frag", "backend='npugraphs' is the counterpart of 'cudagraphs'")]),
    (_rx(r"“`use_device`”需设置为“npu”"), lambda m: [("frag", "set use_device='npu' to profile NPU activity")]),
    (_rx(r"TORCH_NPU_DEVICE_CAPABILITY"),
     lambda m: [("frag", "returns the value of env TORCH_NPU_DEVICE_CAPABILITY (compatibility only, not a hardware capability)")]),
    (_rx(r"^仅支持name、total_memory、L2_cache_size、cube_core_num和vector_core_num属性"),
     lambda m: [("frag", "only name, total_memory, L2_cache_size, cube_core_num and vector_core_num are filled")]),
    (_rx(r"六维以上时可能会出现性能下降"), lambda m: [("frag", "may be slow for inputs above 6 dims")]),
    (_rx(r"fill_uninitialized_memory"),
     lambda m: [("frag", "with deterministic algorithms on, TorchNPU does not fill uninitialised memory by default")]),
    (_rx(r"HCCL_DETERMINISTIC"), lambda m: [("frag", "HCCL_DETERMINISTIC takes precedence for HCCL collectives")]),
    (_rx(r"不支持多进程加载NPU数据"), lambda m: [("frag", "num_workers=0 only (no multi-process loading of NPU data)")]),
    (_rx(r"^不支持NPU融合优化器对象$"), lambda m: [("frag", "NPU fused optimizers not supported")]),
    (_rx(r"该接口涉及高危操作"), lambda m: [("frag", "high-risk API, see the Ascend custom-API documentation")]),
    (_rx(r"^`return_indices`为True时，返回的`argmax`的数据类型为int32$"),
     lambda m: [("frag", "indices are int32 when return_indices=True")]),
    (_rx(r"`topk`索引结果与GPU/CPU不一致"), lambda m: [("frag", "index order may differ from GPU/CPU; sorted=True only")]),
    (_rx(r"^不支持传入`torch.npu.DtypeTensor`类型$"), lambda m: [("frag", "torch.npu.<Dtype>Tensor types not accepted")]),
    (_rx(r"^(?:NPU设备)?启用rpc时"), lambda m: [("frag", "RPC on NPU needs backend=BackendType.NPU_TENSORPIPE")]),
    (_rx(r"^options绑定`NPUTensorPipeRpcBackendOptions`"),
     lambda m: [("frag", "use torch_npu.distributed.rpc.options.NPUTensorPipeRpcBackendOptions")]),
    (_rx(r"FSDP，推荐传入`device_id"), lambda m: [("frag", "pass device_id=torch.device('npu:0')")]),
    (_rx(r"在输入包含0的情况下，输出中可能会包含正0和负0"), lambda m: [("frag", "zeros may come out as +0 and -0")]),
    (_rx(r"^导出文件内容为json格式$"), lambda m: [("frag", "exports JSON")]),
    (_rx(r"jit_compile=False"), lambda m: [("frag", "jit_compile mode restrictions apply")]),
]


def _soc_scope(line: str) -> tuple[tuple[str, ...] | None, str]:
    """(SoCs the line is restricted to, rest of the line); None = all SoCs; () = none of ours."""
    match = _SOC_TARGET.match(line)
    if match:
        soc = SOC_TERMS.get(match.group(1).strip())
        return ((soc,) if soc else ()), match.group(2)
    match = _SOC_PREFIX.match(line)
    if match:
        terms = re.findall(r"<term>([^<]+)</term>", match.group(1))
        socs = tuple(s for s in (SOC_TERMS.get(t.strip()) for t in terms) if s)
        return socs, match.group(2)
    return None, line


def translate_limit_line(line: str) -> list[tuple]:
    """English actions for one limit line; [] when no rule understands it."""
    text = line.strip().rstrip("；;。")
    for pattern, handler in _RULES:
        match = pattern.search(text)
        if match:
            actions = handler(match)
            return [a for a in actions if a[0] != "frag" or not has_cjk(a[1])]
    return []


def _note_dtypes(info: LimitInfo, soc: str, param: str, dts: list[str], scoped: bool) -> None:
    """A documented dtype list: the first for the SoC, a SoC-specific override, or a further limit."""
    if soc not in info.dtypes:
        info.dtypes[soc] = list(dts)
        info.param[soc] = param
    elif info.param.get(soc) == param and scoped:
        info.dtypes[soc] = list(dts)  # SoC-specific list overrides the general one
    elif info.param.get(soc) == param and info.dtypes[soc] == list(dts):
        pass  # the same list stated twice
    else:
        frag = f"{param}: {', '.join(dts)} only"
        if frag not in info.fragments[soc]:
            info.fragments[soc].append(frag)


def _apply_action(info: LimitInfo, soc: str, action: tuple, scoped: bool) -> None:
    """One translated action of a limit line, for one SoC."""
    kind = action[0]
    if kind not in ("dtypes", "ignore"):
        info.dtype_only[soc] = False
    if kind == "dtypes":
        _note_dtypes(info, soc, action[1], action[2], scoped)
    elif kind == "exclude":
        info.excluded[soc].update(action[1])
    elif kind == "add":
        info.added[soc].update(action[1])
    elif kind == "flag":
        info.flags[soc].add(action[1])
    elif kind == "frag":
        if action[1] not in info.fragments[soc]:
            info.fragments[soc].append(action[1])
    elif kind == "npu":
        info.npu_name = action[1]


def analyse_limits(lines: list[str]) -> LimitInfo:
    info = LimitInfo()
    for soc in SOCS:
        info.fragments[soc] = []
        info.flags[soc] = set()
        info.excluded[soc] = set()
        info.added[soc] = set()
        info.untranslated[soc] = 0
        info.applies[soc] = False
        info.dtype_only[soc] = True
    for line in lines:
        scope, rest = _soc_scope(line)
        if scope == ():
            continue  # applies only to products we do not model (e.g. Atlas training series)
        socs = SOCS if scope is None else scope
        actions = translate_limit_line(rest)
        for soc in socs:
            info.applies[soc] = True
        if not actions:
            for soc in socs:
                info.untranslated[soc] += 1
                info.dtype_only[soc] = False
            continue
        for action in actions:
            for soc in socs:
                _apply_action(info, soc, action, scope is not None)
    for soc in SOCS:
        if not info.applies[soc]:
            info.dtype_only[soc] = False
    return info


