"""``popxl_addons.ops``: ops and helpers built from popxl ops."""
from .cross_entropy import cross_entropy, cross_entropy_with_grad
from .streams import host_load, host_store

__all__ = ["cross_entropy", "cross_entropy_with_grad", "host_load", "host_store"]
