"""Rule units of the coverage family (see migrator/catalogue/units.py)."""
