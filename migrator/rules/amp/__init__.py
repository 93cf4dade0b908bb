"""Rule units of the amp family (see migrator/catalogue/units.py)."""
