"""Rule units of the attention family (see migrator/rules/units.py)."""
