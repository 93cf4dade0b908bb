"""`migrate validate --kernel`: the finished `KernelValidation` as text or JSON (never computes anything)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from migrator.validation.verdict import Verdict

if TYPE_CHECKING:
    from migrator.validation.parent.kernel_check import KernelOutput, KernelValidation


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def render_text(result: KernelValidation, verbose: bool = False) -> str:
    lines = [f"kernel `{result.kernel}`: {str(result.verdict).upper()}  (original {result.original}, "
             f"ported {result.ported}; grid {result.grid}, TRITON_INTERPRET=1)"]
    if result.error:
        lines.append(f"  not run: {result.error}")
        return "\n".join(lines) + "\n"
    lines.append(f"  interpreter wall time: original {_seconds(result.seconds_original)}, "
                 f"ported {_seconds(result.seconds_ported)}")
    for out in result.outputs:
        if verbose or out.verdict != Verdict.PASS:
            lines.append(_output_line(out))
        if out.first is not None:
            f = out.first
            where = (f"block (program id) {f.block} of the original" if f.block is not None
                     else "an element the original never writes")
            ported = f"; the port wrote it from program {f.ported_block}" if f.ported_block is not None else \
                "; the port never writes it"
            lines.append(f"    first difference: `{out.name}`{list(f.coords)} = {f.ported!r} ported, {f.original!r} "
                         f"original — {where}{ported}")
    if not verbose:
        passed = sum(1 for o in result.outputs if o.verdict == Verdict.PASS)
        lines.append(f"  {passed} of {len(result.outputs)} tensor arguments equal within bounds"
                     + (" (-v lists them)" if passed else ""))
    return "\n".join(lines) + "\n"


def _output_line(out: KernelOutput) -> str:
    return (f"  {out.name} {out.dtype}{list(out.shape)}: {out.verdict} — rel_l2 {out.rel_l2:.3g}, max_abs "
            f"{out.max_abs:.3g}, {out.differing} element(s) differ; bound {out.bound}")


def render_json(result: KernelValidation) -> str:
    data = asdict(result)
    data["exit_code"] = result.exit_code
    return json.dumps(data, indent=2, default=str) + "\n"
