"""libcst building blocks for the rules' `fix` functions (args, common) and the source of the runtime
helpers a fix inserts (helpers). The rewrites themselves live with their rules, in
`migrator/rules/<family>/<rule>.py` (see migrator/catalogue/units.py)."""
