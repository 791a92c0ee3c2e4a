"""``popxl_addons.ops``: ops and helpers built from popxl ops."""
from .cross_entropy import cross_entropy, cross_entropy_with_grad
from .fp8_amax_scale import fp8_amax_scale
from .grad_reduce_square_add import grad_reduce_square_add
from .streams import host_load, host_store

__all__ = ["cross_entropy", "cross_entropy_with_grad", "host_load", "host_store", "fp8_amax_scale",
           "grad_reduce_square_add"]
