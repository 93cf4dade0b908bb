"""Rule units of the apex family (see migrator/catalogue/units.py)."""
