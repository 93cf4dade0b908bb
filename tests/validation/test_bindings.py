"""`bindings_of` finds every module attribute bound to each function, in one pass, as `bindings` does one
at a time (the op wrappers and phase probe replace a function at each of these places)."""

from __future__ import annotations

import sys
import types

from migrator.validation.child.bindings import bindings, bindings_of


def test_each_function_gets_every_name_it_is_bound_to(monkeypatch):
    def first():
        pass

    def second():
        pass

    user = types.ModuleType("user_program_for_bindings")
    user.f, user.alias, user.g = first, first, second
    other = types.ModuleType("other_module_for_bindings")
    other.second = second
    monkeypatch.setitem(sys.modules, user.__name__, user)
    monkeypatch.setitem(sys.modules, other.__name__, other)

    found = bindings_of([first, second, len])
    assert {(m.__name__, n) for m, n in found[0]} == {(user.__name__, "f"), (user.__name__, "alias")}
    assert {(m.__name__, n) for m, n in found[1]} == {(user.__name__, "g"), (other.__name__, "second")}
    assert ("builtins", "len") in {(m.__name__, n) for m, n in found[2]}
    assert [sorted(n for _, n in bindings(fn)) for fn in (first, second)] == \
           [sorted(n for _, n in places) for places in found[:2]]
