"""The stage benchmark (`--bench`): typed records, device peaks and their text renderings."""
