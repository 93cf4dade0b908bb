"""Emulated ``torch.npu`` streams, events, graphs and ``mstx`` ranges (ascend-facts §b.1, §d): all of
them run synchronously on the CPU. Re-exported by :mod:`.npu`."""

from __future__ import annotations

import functools
import time
from typing import Any

import torch

from ._device_state import STATE, _index


# ---------------------------------------------------------------- streams and events (§b.1)
class Stream:
    """Emulated ``torch.npu.Stream`` (§b.1). CPU work is synchronous, so every wait is a no-op
    and ``query()`` is always True. ``tensor.record_stream(stream)`` accepts it (no-op)."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device_index = _index(device) if device is not None else STATE.current_device
        self.priority = priority
        self.device_type = "npu"

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def wait_event(self, event: Event) -> None:
        pass

    def wait_stream(self, stream: Stream) -> None:
        pass

    def record_event(self, event: Event | None = None) -> Event:
        event = event if event is not None else Event()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def __enter__(self) -> Stream:
        self._ctx = stream(self)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)

    def __repr__(self) -> str:
        return f"<torch_npu emulation Stream device=npu:{self.device_index} (CPU, synchronous)>"


_DEFAULT_STREAM = Stream(0)


class Event:
    """Emulated ``torch.npu.Event`` (§b.1): ``record`` takes a host timestamp, so
    ``elapsed_time`` returns host wall-clock milliseconds between two records."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        self._time = time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: Event) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True to use elapsed_time")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calling elapsed_time")
        return (end_event._time - self._time) * 1000.0


def current_stream(device: Any = None) -> Stream:
    """Emulated ``torch.npu.current_stream`` (§b.1)."""
    return STATE.current_stream or _DEFAULT_STREAM


def default_stream(device: Any = None) -> Stream:
    """Emulated ``torch.npu.default_stream`` (§b.1)."""
    return _DEFAULT_STREAM


def set_stream(stream_: Stream) -> None:
    """Emulated ``torch.npu.set_stream`` (§b.1)."""
    STATE.current_stream = stream_


class StreamContext:
    """Emulated ``torch.npu.StreamContext`` (§b.1): sets ``current_stream()`` inside the block."""

    def __init__(self, stream_: Stream | None) -> None:
        self.stream = stream_
        self.prev: Stream | None = None

    def __enter__(self) -> Stream | None:
        self.prev = STATE.current_stream
        if self.stream is not None:
            STATE.current_stream = self.stream
        return self.stream

    def __exit__(self, *exc: Any) -> None:
        STATE.current_stream = self.prev


def stream(stream_: Stream | None) -> StreamContext:
    """Emulated ``torch.npu.stream(s)`` context manager (§b.1)."""
    return StreamContext(stream_)


# ---------------------------------------------------------------- graphs (§d)
_GRAPH_MESSAGE = (
    "torch_npu emulation: NPU graphs (torch.npu.NPUGraph / graph / make_graphed_callables) are not "
    "emulated on CPU. On Ascend they are inference-only ('training not supported', ascend-facts §d); "
    "run the step eagerly instead."
)


class NPUGraph:
    """Emulated ``torch.npu.NPUGraph`` (§b.1 CUDAGraph → NPUGraph, §d): raises a clear error."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(_GRAPH_MESSAGE)


class graph:
    """Emulated ``torch.npu.graph`` (§d): raises a clear error."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(_GRAPH_MESSAGE)


def make_graphed_callables(*args: Any, **kwargs: Any) -> Any:
    """Emulated ``torch.npu.make_graphed_callables`` (§d): raises a clear error."""
    raise RuntimeError(_GRAPH_MESSAGE)


def graph_pool_handle() -> Any:
    """Emulated ``torch.npu.graph_pool_handle`` (§d): raises a clear error."""
    raise RuntimeError(_GRAPH_MESSAGE)


def is_current_stream_capturing() -> bool:
    """Emulated ``torch.npu.is_current_stream_capturing`` (§b.1): False."""
    return False


# ---------------------------------------------------------------- mstx (NVTX equivalent, §d)
class mstx:
    """Emulated ``torch_npu.npu.mstx`` (§d, NVTX → mstx): markers are kept on a host stack only.

    ``range_push`` returns the new depth and ``range_pop`` the depth after popping (-1 when the
    stack was empty); ``range_start`` returns an id for ``range_end``. Like the real functions
    (wrapped in ``_no_exception_func``) they never raise.
    """

    @staticmethod
    def mark(message: str = "", stream: Any = None, domain: str = "default") -> None:
        """Emulated ``mstx.mark`` (§d): no-op."""
        return None

    @staticmethod
    def range_push(message: str = "", stream: Any = None, domain: str = "default") -> int:
        """Emulated ``mstx.range_push`` (§d): push; returns the new depth."""
        STATE.mstx_stack.append(message)
        return len(STATE.mstx_stack)

    @staticmethod
    def range_pop(domain: str = "default") -> int:
        """Emulated ``mstx.range_pop`` (§d): pop; returns the depth after, -1 if empty."""
        if not STATE.mstx_stack:
            return -1
        STATE.mstx_stack.pop()
        return len(STATE.mstx_stack)

    @staticmethod
    def range_start(message: str = "", stream: Any = None, domain: str = "default") -> int:
        """Emulated ``mstx.range_start`` (§d): returns a fresh range id."""
        rid = STATE.mstx_next_id
        STATE.mstx_next_id += 1
        return rid

    @staticmethod
    def range_end(range_id: int, domain: str = "default") -> None:
        """Emulated ``mstx.range_end`` (§d): no-op."""
        return None

    @staticmethod
    def mstx_range(message: str = "", stream: Any = None, domain: str = "default"):
        """Emulated ``mstx.mstx_range`` decorator (§d): push/pop around the call."""
        def wrapper(func):
            @functools.wraps(func)
            def inner(*args: Any, **kwargs: Any):
                mstx.range_push(message, stream, domain)
                try:
                    return func(*args, **kwargs)
                finally:
                    mstx.range_pop(domain)

            return inner

        return wrapper
