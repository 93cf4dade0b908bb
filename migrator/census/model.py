"""Value types of the op census (standard library only): `Census` and its parts, with the JSON of
`migrator/ground/schema/op-trace.schema.json` (`to_json` / `from_json`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FORMAT = 1
LEVELS = ("api", "aten")
VERDICT_ORDER = ("unsupported", "cpu_fallback", "unverified", "partial", "supported")
NPU_KERNELS = ("npu_kernel", "npu_kernel_via_delegate", "decomposes", "composite_explicit")
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2, None: 3}
_INDEX_DTYPES = ("int64", "int32", "bool")


def first_dtype(dtypes: tuple[str, ...]) -> str | None:
    """The dtype a documented list is about: the first tensor argument's, skipping index/mask tensors."""
    return next((d for d in dtypes if d not in _INDEX_DTYPES), dtypes[0] if dtypes else None)


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    @classmethod
    def from_json(cls, data: dict | None) -> Frame | None:
        return cls(data["path"], int(data["line"]), data.get("function", "")) if data else None

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "function": self.function}

    def short(self) -> str:
        """`path:line`; a library path from `site-packages/` on."""
        path = self.path.replace("\\", "/")
        if "/site-packages/" in path:
            path = path.split("/site-packages/", 1)[1]
        return f"{path}:{self.line}"


@dataclass(frozen=True)
class Site:
    """Where one distinct (op, dtypes) ran: phase, user frame, the library frame it called."""

    phase: str
    count: int
    user: Frame | None = None
    library: Frame | None = None
    shapes: tuple[tuple, ...] | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"phase": self.phase, "count": self.count,
                               "user_frame": self.user.to_json() if self.user else None,
                               "library_frame": self.library.to_json() if self.library else None}
        if self.shapes is not None:
            out["shapes"] = [list(s) for s in self.shapes]
        return out

    @classmethod
    def from_json(cls, data: dict) -> Site:
        shapes = data.get("shapes")
        return cls(data["phase"], int(data["count"]), Frame.from_json(data.get("user_frame")),
                   Frame.from_json(data.get("library_frame")),
                   tuple(tuple(s) for s in shapes) if shapes is not None else None)


@dataclass(frozen=True)
class TracedOp:
    """One distinct (level, op, input dtypes) with its coverage verdict.

    ``status`` is what `migrate ops NAME --soc SOC` says; ``verdict`` is the status after checking
    the first tensor argument's dtype against the documented list (as `lookup(..., dtype=)`).
    ``code``/``severity``/``message`` are set when the use is a finding (an OPS rule).
    """

    level: str
    op: str
    dtypes: tuple[str, ...]
    count: int
    status: str
    verdict: str
    kernel: str
    documented_dtypes: tuple[str, ...]
    known: bool
    note: str
    sites: tuple[Site, ...]
    dispatched: bool = True  # an API call that ran no ATen op only read metadata: no dtype check
    host_kernel: bool = False  # an ATen op the CPU backend chose (SDPA's *_for_cpu): not judged
    code: str | None = None
    severity: str | None = None
    message: str | None = None

    @property
    def phases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.phase for s in self.sites))

    @property
    def risk(self) -> int:
        """0 = worst: unsupported, CPU fallback, outside the documented dtypes, unverified API, partial,
        unverified ATen op without kernel data, then supported / ATen ops with an NPU kernel."""
        if self.host_kernel:
            return 6
        if self.verdict == "unsupported":
            return 0
        if self.verdict == "cpu_fallback":
            return 1
        if self.verdict == "unverified" and self.level == "api" and self.known:
            return 3
        if self.verdict == "partial":
            return 4
        if self.verdict == "unverified" and self.kernel not in NPU_KERNELS:
            return 5
        return 6

    @property
    def first_user_site(self) -> Site | None:
        return next((s for s in self.sites if s.user is not None), None)

    def to_json(self) -> dict:
        return {"level": self.level, "op": self.op, "dtypes": list(self.dtypes), "count": self.count,
                "phases": list(self.phases), "status": self.status, "verdict": self.verdict,
                "kernel": self.kernel, "documented_dtypes": list(self.documented_dtypes), "known": self.known,
                "note": self.note, "dispatched": self.dispatched,
                "host_kernel": self.host_kernel, "code": self.code, "severity": self.severity, "message": self.message,
                "sites": [s.to_json() for s in self.sites]}

    @classmethod
    def from_json(cls, data: dict) -> TracedOp:
        return cls(data["level"], data["op"], tuple(data["dtypes"]), int(data["count"]), data["status"],
                   data["verdict"], data.get("kernel", "unknown"), tuple(data.get("documented_dtypes", ())),
                   bool(data.get("known", False)), data.get("note", ""),
                   tuple(Site.from_json(s) for s in data.get("sites", ())), bool(data.get("dispatched", True)),
                   bool(data.get("host_kernel", False)), data.get("code"),
                   data.get("severity"), data.get("message"))


@dataclass(frozen=True)
class FusionSite:
    """One place a fused torch_npu op could replace eager ops, from the census, the AST or both.

    ``rule`` cites the advisor rule (fused API, pattern, file, versions) when the census matched it;
    ``found_by`` is ``census+ast`` where both agree, else the one source that found it, and ``detail``
    says why the other did not."""

    fused_api: str
    path: str
    line: int
    function: str
    found_by: str  # "census+ast" | "census" | "ast"
    rule: str | None = None
    ops: tuple[str, ...] = ()
    ast_code: str | None = None  # FUS001..FUS004
    ast_line: int | None = None
    detail: str = ""

    def to_json(self) -> dict:
        return {"fused_api": self.fused_api, "path": self.path, "line": self.line, "function": self.function,
                "found_by": self.found_by, "rule": self.rule, "ops": list(self.ops), "ast_code": self.ast_code,
                "ast_line": self.ast_line, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict) -> FusionSite:
        return cls(data["fused_api"], data["path"], int(data["line"]), data.get("function", ""), data["found_by"],
                   data.get("rule"), tuple(data.get("ops", ())), data.get("ast_code"), data.get("ast_line"),
                   data.get("detail", ""))


@dataclass(frozen=True)
class PerfSite:
    """A census finding of the perf family (`census/perf_lint.py`) at a user line; `scan` reports it
    under the rule whose `impl` it names, unless a static perf finding already sits on that line."""

    impl: str  # dynamic-shape, aicpu-dtype, aicpu-op
    path: str  # POSIX, relative to the scan root
    line: int
    function: str
    symbol: str
    message: str

    def to_json(self) -> dict:
        return {"impl": self.impl, "path": self.path, "line": self.line, "function": self.function,
                "symbol": self.symbol, "message": self.message}

    @classmethod
    def from_json(cls, data: dict) -> PerfSite:
        return cls(data["impl"], data["path"], int(data["line"]), data.get("function", ""), data.get("symbol", ""),
                   data["message"])


@dataclass(frozen=True)
class Census:
    """The traced op set of one program run (`.migrate/op-trace.json`)."""

    program: dict
    soc: str
    torch_npu_version: str
    torch: str
    seconds: float
    ops: tuple[TracedOp, ...]
    notes: tuple[str, ...] = ()
    fusions: tuple[FusionSite, ...] = ()  # the advisor's fusion patterns on the traced data flow, with the AST's
    perf: tuple[PerfSite, ...] = ()

    @property
    def findings(self) -> tuple[TracedOp, ...]:
        return tuple(op for op in self.ops if op.code is not None)

    def worst_first(self) -> list[TracedOp]:
        return sorted(self.ops, key=lambda o: (SEVERITY_ORDER.get(o.severity, 3), o.risk, o.level, o.op, o.dtypes))

    def summary(self) -> dict:
        by_level = {lv: sum(1 for o in self.ops if o.level == lv) for lv in LEVELS}
        by_verdict = {v: sum(1 for o in self.ops if o.verdict == v) for v in VERDICT_ORDER}
        by_severity = {s: sum(1 for o in self.findings if o.severity == s) for s in ("error", "warning", "info")}
        return {"distinct": by_level, "by_verdict": by_verdict, "findings": by_severity,
                "calls": sum(o.count for o in self.ops)}

    def to_json(self) -> dict:
        return {"format": FORMAT, "program": self.program, "soc": self.soc,
                "torch_npu_version": self.torch_npu_version, "torch": self.torch, "seconds": self.seconds,
                "notes": list(self.notes), "summary": self.summary(), "ops": [o.to_json() for o in self.ops],
                "fusions": [f.to_json() for f in self.fusions], "perf": [p.to_json() for p in self.perf]}

    @classmethod
    def from_json(cls, data: dict) -> Census:
        return cls(data["program"], data["soc"], data["torch_npu_version"], data.get("torch", ""),
                   float(data.get("seconds", 0.0)), tuple(TracedOp.from_json(o) for o in data["ops"]),
                   tuple(data.get("notes", ())), tuple(FusionSite.from_json(f) for f in data.get("fusions", ())),
                   tuple(PerfSite.from_json(p) for p in data.get("perf", ())))
