"""The error of a bad request (missing paths, unknown codes, bad options): exit 2 with its message."""


class UsageError(ValueError):
    """Bad arguments (missing paths, unknown codes): exit 2 with this message."""
