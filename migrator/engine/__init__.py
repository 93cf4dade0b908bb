"""The scan engine: discover files, prefilter, parse once, check, suppress, cache. Never prints."""
