"""``disable_fc_pass`` / ``enable_fc_pass`` (``popxl_addons.transforms.use_fc_pass``).

PopART's fully-connected pass lets a matmul's weight layout be planned for
its transposed use in the backward pass. These record the flag on every
matmul (``op.attrs["_use_fully_connected_pass"]``; unset means on, as in
PopART); ipuxl's IPU model does not model the pass, so the flag changes
neither results nor estimates.
"""
from ...opdef import get_opdef

__all__ = ["disable_fc_pass", "enable_fc_pass"]


def _set(ir, flag: bool) -> None:
    for g in ir._graphs.values():
        for op in g._ops:
            if get_opdef(op.type).cost_class == "matmul":
                op.attrs["_use_fully_connected_pass"] = flag


def disable_fc_pass(ir) -> None:
    """Turn the fully-connected pass off on every matmul of ``ir``."""
    _set(ir, False)


def enable_fc_pass(ir) -> None:
    """Turn it back on (the default)."""
    _set(ir, True)
