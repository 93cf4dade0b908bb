"""Rule units of the apex family (see migrator/rules/units.py)."""
