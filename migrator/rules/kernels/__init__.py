"""Rule units of the kernels family (see migrator/catalogue/units.py)."""
