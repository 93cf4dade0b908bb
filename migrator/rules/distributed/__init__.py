"""Rule units of the distributed family (see migrator/catalogue/units.py)."""
