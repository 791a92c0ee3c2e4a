"""Graph transforms of popxl_addons implemented by ipuxl."""
from .autodiff import autodiff, autodiff_with_accumulation, remap_grad_info

__all__ = ["autodiff", "autodiff_with_accumulation", "remap_grad_info"]
