"""S1's "state as built" check on integer and bool buffers (issue 37 item 7: a Swin relative-position index
built with the wrong row stride passed, because only floating tensors were described): the child records a
digest of their values and the parent compares it exactly, naming the buffer."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from migrator.validation.child.built_state import describe  # noqa: E402
from migrator.validation.parent.comparison.built_state import built_check  # noqa: E402
from migrator.validation.records import BuiltTensor  # noqa: E402
from migrator.validation.verdict import Verdict  # noqa: E402


class Window(torch.nn.Module):
    def __init__(self, stride: int) -> None:
        super().__init__()
        coords = torch.stack(torch.meshgrid(torch.arange(2), torch.arange(2), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + 1
        self.register_buffer("relative_position_index", rel[..., 0] * stride + rel[..., 1])
        self.register_buffer("keep", torch.ones(4, 4, dtype=torch.bool).tril())
        self.proj = torch.nn.Linear(4, 4)


def _built(model: torch.nn.Module) -> dict[str, BuiltTensor]:
    return {name: BuiltTensor(**fields) for name, fields in describe(model).items()}


def test_an_index_buffer_built_with_other_values_fails_naming_it():
    torch.manual_seed(0)
    original = _built(Window(stride=3))
    torch.manual_seed(1)  # the port draws its random weights in another order: still alike
    row = built_check(original, _built(Window(stride=2)))
    assert row is not None and row["status"] == Verdict.FAIL
    assert "(Window).relative_position_index: other int64 values" in row["message"], row["message"]
    assert "proj" not in row["message"] and "keep" not in row["message"]


def test_the_same_integer_and_bool_buffers_pass():
    torch.manual_seed(0)
    original = _built(Window(stride=3))
    torch.manual_seed(1)
    row = built_check(original, _built(Window(stride=3)))
    assert row is not None and row["status"] == Verdict.PASS, row


def test_a_bool_mask_shifted_by_one_fails():
    original, port = Window(stride=3), Window(stride=3)
    port.keep = torch.ones(4, 4, dtype=torch.bool).tril(1)
    row = built_check(_built(original), _built(port))
    assert row is not None and row["status"] == Verdict.FAIL and "(Window).keep: other bool values" in row["message"]


def test_a_recording_without_digests_still_compares_by_statistics():
    """A reference recorded before digests existed: integer tensors fall back to their statistics."""
    old = {k: BuiltTensor(**{**v.__dict__, "digest": ""}) for k, v in _built(Window(stride=3)).items()}
    row = built_check(old, _built(Window(stride=3)))
    assert row is not None and row["status"] == Verdict.PASS, row
