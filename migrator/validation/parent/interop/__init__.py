"""msprobe interop: our records in msprobe's layout, msprobe's dumps read, and our verdicts over them."""
