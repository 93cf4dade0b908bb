"""Rule units of the device family (see migrator/rules/units.py)."""
