"""Parent side of `migrate validate` (the user's process): orchestration, launching, comparison and results.
It never imports :mod:`migrator.validation.child`; the two meet through :mod:`migrator.validation.records`."""
