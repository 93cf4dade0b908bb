"""One resolver for the data shipped beside the code (rule catalogue, coverage tables, cluster profiles, schemas).

Wheels carry the top-level `rules/`, `op_coverage/`, `framework_routes/` and `clusters/` folders as `migrator/_data/...`
(see pyproject's force-include); a source checkout or editable install reads them from the
repository root. Callers never need to know which.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # migrator/


@cache
def data_dir(name: str) -> Path:
    """Folder of a shipped data set: "rules", "op_coverage", "framework_routes", "clusters" or "ascend_env"."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"ascend-migrate data folder {name!r} is missing from this installation "
        f"(looked in {_PACKAGE_DIR / '_data'} and {_PACKAGE_DIR.parent}); reinstall the package"
    )


def schema_path(name: str) -> Path:
    return Path(__file__).resolve().parent / "schema" / name
