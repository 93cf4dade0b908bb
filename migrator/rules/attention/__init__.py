"""Rule units of the attention family (see migrator/catalogue/units.py)."""
