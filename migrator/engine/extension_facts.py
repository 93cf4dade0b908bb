"""What the per-file checks need from the tree's extension inventory (`engine/extension_inventory.py`):
the Python names a binding is reached by, and per CUDA kernel what is left to do. Carried in
`ScanOptions` (frozen, small), so a cached file result stays valid exactly while these facts do.

The effort of a kernel (KERN003, one finding per `.cu`/`.cuh` file, its minutes the sum over the
file's `__global__` kernels; documented in rules/kernels.yaml):
    equivalent  every binding that reaches the kernel has a known equivalent   EQUIVALENT_MINUTES
    reference   ... a PyTorch reference (the repository's or a published one)  REFERENCE_MINUTES
    port        anything else, by size: PORT_BASE + PORT_PER_LINE x body lines, at most PORT_CAP
A file without a `__global__` kernel (launchers, device helpers): PORT_PER_LINE x the lines of its
`__device__`/host function bodies, at least NO_KERNEL_MINUTES.
"""

from __future__ import annotations

from dataclasses import dataclass

EQUIVALENT_MINUTES = 30.0
REFERENCE_MINUTES = 60.0
PORT_BASE = 120.0
PORT_PER_LINE = 6.0
PORT_CAP = 2400.0
NO_KERNEL_MINUTES = 30.0


UNREAD = "*"  # a BindingTarget's binding: any attribute of the module that no binding read from its sources names


@dataclass(frozen=True)
class BindingTarget:
    """One Python-visible binding of the repository's own CUDA extension."""

    module: str  # dotted module the binding is an attribute of (`pkg._C`), or `torch.ops.<namespace>`
    binding: str  # `roi_align_forward`
    extension: str  # the extension as built (`pkg._C`)
    kernels: tuple[str, ...]  # the `__global__` kernels it reaches (empty when not resolved)
    use_instead: str = ""  # a known equivalent, with its source
    reference: str = ""  # `path:line` of a PyTorch reference of the same op in the repository
    bound_to: str = ""  # `load()`: the variable holding the module (`_C`), in `declared_in`
    declared_in: str = ""  # root-relative file of a `load()` declaration
    unread: bool = False  # a call site of a name no binding read from the extension's sources has


@dataclass(frozen=True)
class KernelRoute:
    """What is left for one `__global__` kernel, from the bindings that reach it."""

    path: str
    kernel: str
    status: str  # "equivalent" | "reference" | "port"
    note: str  # what the status rests on (`roi_align → torchvision.ops.roi_align`)


@dataclass(frozen=True)
class ExtensionFacts:
    targets: tuple[BindingTarget, ...] = ()
    routes: tuple[KernelRoute, ...] = ()

    def route(self, path: str, kernel: str) -> KernelRoute | None:
        return next((r for r in self.routes if r.path == path and r.kernel == kernel), None)


def kernel_minutes(status: str, body_lines: int) -> float:
    if status == "equivalent":
        return EQUIVALENT_MINUTES
    if status == "reference":
        return REFERENCE_MINUTES
    return min(PORT_BASE + PORT_PER_LINE * body_lines, PORT_CAP)


def helper_minutes(body_lines: int) -> float:
    """A `.cu`/`.cuh` file without kernels: its functions go with the kernels that use them."""
    return max(NO_KERNEL_MINUTES, PORT_PER_LINE * body_lines)
