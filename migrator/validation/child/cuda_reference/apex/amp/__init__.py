"""Reference for ``apex.amp`` (initialize / scale_loss / master_params, O0-O3)."""

from ._amp_state import master_params
from .frontend import O1_AUTOCAST_DTYPE, initialize, load_state_dict, state_dict
from .handle import disable_casts, scale_loss


def _identity_decorator(fn):
    return fn


# apex's function-registration helpers: no-ops here because O1 is implemented with autocast.
half_function = float_function = promote_function = _identity_decorator


def register_half_function(module, name):
    pass


register_float_function = register_promote_function = register_half_function

__all__ = [
    "initialize", "scale_loss", "master_params", "state_dict", "load_state_dict", "disable_casts",
    "half_function", "float_function", "promote_function", "register_half_function",
    "register_float_function", "register_promote_function", "O1_AUTOCAST_DTYPE",
]
