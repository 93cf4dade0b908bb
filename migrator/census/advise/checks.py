"""Each pre-hardware perf/fusion finding against what the profile shows: confirmed, not seen, or not
checkable (the profile lacks the file that would show it, or no profile shows it: environment settings).

What counts as seen, per rule, follows the advisor's own rules (msprof-analyze 26.2.0) where it has one:
host syncs are `aclrtSynchronizeStream` calls in trace_view.json (synchronize.yaml; ASCEND_LAUNCH_BLOCKING
when they are at least half as many as the kernels, its `min_co_occurrence_ratio` 0.5); float64 and the
AICPU rules are AI_CPU rows of kernel_details.csv (aicpu_rules.yaml); a slow data loader is idle time
over 10 000 us per step (dataloader.yaml's threshold, from step_trace_time.csv's Free); a fusion is not
applied when its unfused operators run and its fused one does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from migrator.ground.model import Finding

from .model import CONFIRMED, NOT_CHECKABLE, NOT_SEEN, Check, ProfileFacts

SYNC_RATIO = 0.5  # synchronize.yaml: min_co_occurrence_ratio
DATALOADER_US = 10000.0  # dataloader.yaml: dataloader_duration_threshold
# fusion rule -> (an unfused operator type that shows it is not applied, the fused operator types)
FUSIONS = {"FUS001": (("rsqrt",), ("rmsnorm",)), "FUS002": (("swish", "silu"), ("swiglu",)),
           "FUS003": (("neg",), ("rotarymul", "rotaryposition", "applyrotaryposemb")),
           "FUS004": (("softmaxv2", "softmax"), ("flashattentionscore", "fusedinferattentionscore"))}
ENVIRONMENT = ("PERF008", "PERF009", "PERF010")

Verdict = tuple[str, str]  # (status, evidence)


def _needs(profile: ProfileFacts, name: str) -> Verdict | None:
    return None if name in profile.files else (NOT_CHECKABLE, f"{name} is not in the profile")


def _syncs(profile: ProfileFacts, finding: Finding) -> Verdict:
    if (missing := _needs(profile, "trace_view.json")) is not None:
        return missing
    if not profile.sync_calls:
        return NOT_SEEN, "no aclrtSynchronizeStream in trace_view.json"
    return CONFIRMED, (f"{profile.sync_calls} aclrtSynchronizeStream call(s), {profile.sync_us / 1000:.1f} ms, "
                       "in trace_view.json")


def _launch_blocking(profile: ProfileFacts, finding: Finding) -> Verdict:
    missing = _needs(profile, "trace_view.json") or _needs(profile, "kernel_details.csv")
    if missing is not None:
        return missing
    ratio = profile.sync_calls / max(1, len(profile.kernels))
    status = CONFIRMED if ratio >= SYNC_RATIO else NOT_SEEN
    return status, (f"{profile.sync_calls} synchronizations for {len(profile.kernels)} kernels (ratio {ratio:.2f}; "
                    f"the advisor flags >= {SYNC_RATIO})")


def _aicpu(profile: ProfileFacts, finding: Finding, words: tuple[str, ...] = ()) -> Verdict:
    if (missing := _needs(profile, "kernel_details.csv")) is not None:
        return missing
    rows = [k for k in profile.aicpu_kernels
            if not words or any(w in f"{k.type} {k.input_dtypes} {k.output_dtypes}".lower() for w in words)]
    if not rows:
        return NOT_SEEN, "no AI_CPU rows" + (f" of {'/'.join(words)}" if words else "") + " in kernel_details.csv"
    types = sorted({k.type for k in rows})
    return CONFIRMED, (f"{len(rows)} AI_CPU kernel(s) ({', '.join(types[:5])}), "
                       f"{sum(k.duration_us for k in rows):.0f} us, in kernel_details.csv")


def _float64(profile: ProfileFacts, finding: Finding) -> Verdict:
    return _aicpu(profile, finding, ("double", "float64"))


def _aicpu_op(profile: ProfileFacts, finding: Finding) -> Verdict:
    base = finding.symbol.split(".", 1)[0].replace("_", "").lower()
    return _aicpu(profile, finding, (base,))


def _sync_batchnorm(profile: ProfileFacts, finding: Finding) -> Verdict:
    if (missing := _needs(profile, "kernel_details.csv")) is not None:
        return missing
    rows = [k for k in profile.kernels if "syncbatchnorm" in f"{k.name} {k.type}".lower()]
    return (CONFIRMED, f"{len(rows)} SyncBatchNorm kernel(s) in kernel_details.csv") if rows else (
        NOT_SEEN, "no SyncBatchNorm kernel in kernel_details.csv")


def _dataloader(profile: ProfileFacts, finding: Finding) -> Verdict:
    if (missing := _needs(profile, "step_trace_time.csv")) is not None:
        return missing
    slow = [(step, free) for step, _, free in profile.steps if free > DATALOADER_US]
    if not slow:
        return NOT_SEEN, f"no step idle over {DATALOADER_US:.0f} us in step_trace_time.csv"
    return CONFIRMED, (f"{len(slow)} of {len(profile.steps)} step(s) idle over {DATALOADER_US:.0f} us "
                       f"(most {max(f for _, f in slow):.0f} us) in step_trace_time.csv")


def _dynamic_shape(profile: ProfileFacts, finding: Finding) -> Verdict:
    if (missing := _needs(profile, "kernel_details.csv")) is not None:
        return missing
    shapes: dict[str, dict[str, set[str]]] = {}
    for k in profile.kernels:
        shapes.setdefault(k.type, {}).setdefault(k.step, set()).add(k.input_shapes)
    if len({k.step for k in profile.kernels if k.step}) < 2:
        return NOT_CHECKABLE, "kernel_details.csv has fewer than two steps (no Step Id column, or one step)"
    changing = sorted(t for t, by_step in shapes.items() if len({frozenset(s) for s in by_step.values()}) > 1)
    if not changing:
        return NOT_SEEN, "every operator type ran with the same input shapes in each step"
    return CONFIRMED, f"{len(changing)} operator type(s) change input shapes between steps ({', '.join(changing[:5])})"


def _fusion(profile: ProfileFacts, finding: Finding) -> Verdict:
    if (missing := _needs(profile, "kernel_details.csv")) is not None and not profile.op_types:
        return missing
    unfused, fused = FUSIONS[finding.code]
    types = profile.kernel_types()
    if any(f in t for t in types for f in fused):
        return NOT_SEEN, f"the fused operator runs ({', '.join(sorted(t for t in types if any(f in t for f in fused)))})"
    seen = sorted(t for t in types if any(u in t for u in unfused))
    if seen:
        return CONFIRMED, f"not applied: the unfused {', '.join(seen)} run(s) and no {'/'.join(fused)}"
    return NOT_SEEN, f"neither {'/'.join(unfused)} nor {'/'.join(fused)} in the profile"


def _environment(profile: ProfileFacts, finding: Finding) -> Verdict:
    return NOT_CHECKABLE, "a profile does not record the environment; check the launch settings"


CHECKS: dict[str, Callable[[ProfileFacts, Finding], Verdict]] = {
    "PERF001": _syncs, "PERF002": _syncs, "PERF007": _syncs, "PERF003": _float64, "PERF004": _sync_batchnorm,
    "PERF005": _dataloader, "PERF006": _launch_blocking, "PERF011": _dynamic_shape, "PERF012": _aicpu,
    "PERF013": _aicpu_op, **{code: _environment for code in ENVIRONMENT}, **{code: _fusion for code in FUSIONS},
}


def check_all(findings: Iterable[Finding], profile: ProfileFacts) -> tuple[Check, ...]:
    """A check for each perf/fusion finding this module knows how to look for, in finding order."""
    out = []
    for finding in findings:
        check = CHECKS.get(finding.code)
        if check is not None:
            status, evidence = check(profile, finding)
            out.append(Check(finding.code, finding.path, finding.line, finding.message, status, evidence))
    return tuple(out)
