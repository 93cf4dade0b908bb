"""Rule units of the distributed family (see migrator/rules/units.py)."""
