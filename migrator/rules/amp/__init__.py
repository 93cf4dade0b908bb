"""Rule units of the amp family (see migrator/rules/units.py)."""
