"""Graph transforms, mirroring ``popxl.transforms``."""
from .autodiff import ExpectedConnection, ExpectedConnectionType, GradGraphInfo, autodiff
from .decompose_sum import decompose_sum
from .merge_exchange import io_tile_exchange, merge_exchange

__all__ = ["autodiff", "decompose_sum", "merge_exchange", "io_tile_exchange", "GradGraphInfo",
           "ExpectedConnection", "ExpectedConnectionType"]

