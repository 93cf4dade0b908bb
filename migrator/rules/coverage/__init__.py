"""Rule units of the coverage family (see migrator/rules/units.py)."""
