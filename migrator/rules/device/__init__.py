"""Rule units of the device family (see migrator/catalogue/units.py)."""
