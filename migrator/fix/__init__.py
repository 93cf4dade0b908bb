"""`migrate fix`: rewrites findings in the user's own formatting (libcst), target `npu` or `portable`.

Layers: `api.fix` → `plan` (which findings to fix, per file) → `python_fixer` / `text_fixer`
(apply named transforms) → `writer` (atomic, encoding-, BOM- and newline-preserving writes).
"""
