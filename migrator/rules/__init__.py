"""The rule units: `rename.py` (`fix: rename`) and `<family>/<rule name>.py` (`fix: unit`), each a
`migrator.catalogue.protocols.RuleUnit`. One floor above fix/; found by name through
`migrator/catalogue/units.py`, never imported by engine/, fix/ or the catalogue."""
