"""Child side of `migrate validate` (the program's own process): the worker, the protocol, the runs and the
reference layers. It never imports :mod:`migrator.validation.parent`; the two meet through
:mod:`migrator.validation.records`."""
