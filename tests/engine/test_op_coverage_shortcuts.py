"""Shortcuts of the op-coverage pass and the prechecks, held to what they stand for: a method's table entry found
by a look-up in the table's names, the scopes walked for a dtype only where one may be proven, the training
dependence found once per file, the module's name counts from one walk (the code replaced is written out here)."""

from __future__ import annotations

import pytest

from migrator.catalogue.coverage import CoverageError, lookup
from migrator.catalogue.coverage._dtypes import METADATA_APIS
from migrator.catalogue.coverage._table import listed, listed_names
from migrator.engine.coverage_checker import _MethodEntries

# methods the table lists, does not list, lists as metadata; and identifiers not in ASCII
METHODS = ["add", "add_", "masked_fill", "index_add_", "frobnicate", "size", "item", "cuda", "npu", "__getitem__",
           "_private", "données", "ｆｕｌｌ"]


@pytest.mark.parametrize("soc", ["A2", "A3"])
def test_a_methods_entry_is_its_full_lookup(soc):
    table_methods = [name[len("torch.Tensor."):] for name in listed_names(soc) if name.startswith("torch.Tensor.")]
    assert table_methods
    entries = _MethodEntries(soc, None)
    for method in [*METHODS, *table_methods]:
        name = f"torch.Tensor.{method}"
        entry = lookup(name, soc=soc)
        assert entries[method] == (name, entry if entry.known and name not in METADATA_APIS else None), method
        assert (name in listed_names(soc)) == listed(name, soc=soc), method


def test_the_tables_names_refuse_what_listed_refuses():
    for soc, version in (("Z9", None), ("A2", "0.0.1")):
        with pytest.raises(CoverageError) as listed_error:
            listed("torch.Tensor.add", soc=soc, version=version)
        with pytest.raises(CoverageError) as names_error:
            listed_names(soc, version)
        assert str(names_error.value) == str(listed_error.value)
        with pytest.raises(CoverageError):
            _MethodEntries(soc, version)["add"]
