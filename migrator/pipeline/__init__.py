"""The pipeline floor: what a command does, step by step, between the api facade and the engine.

`options` resolves the settings and builds the one `ScanOptions` every scan uses; `scan` runs the
engine and finishes its result (summary, coverage, recorded declines, framework routes); `fix` owns
the fix transaction (lock, recover, scan, plan, route edits, preview or write, rescan, record).
"""
