"""CPU reference stand-in for the ``xformers`` package: only ``xformers.ops`` attention."""

__version__ = "0.0.32"  # API level followed by the reference
__cuda_reference__ = True
