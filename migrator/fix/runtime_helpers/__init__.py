"""Runtime code that `migrate fix` puts into migrated trees, kept here as real, linted and tested modules.

The fixer never imports these modules (they import torch): it reads their text and copies top-level
definitions out of it (`migrator.fix.helper_source`), so what the tests run is what a user's file gets.
`device.py` is written whole, once per migrated tree, as `_migrate_runtime.py` (portable target).
"""
