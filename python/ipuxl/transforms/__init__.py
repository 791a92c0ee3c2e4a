"""Graph transforms, mirroring ``popxl.transforms``."""
from .autodiff import ExpectedConnection, ExpectedConnectionType, GradGraphInfo, autodiff
from .decompose_sum import decompose_sum

__all__ = ["autodiff", "decompose_sum", "merge_exchange", "io_tile_exchange", "GradGraphInfo",
           "ExpectedConnection", "ExpectedConnectionType"]


def merge_exchange(*args, **kwargs):
    raise NotImplementedError("popxl.transforms.merge_exchange is not implemented yet in ipuxl")


def io_tile_exchange(*args, **kwargs):
    raise NotImplementedError("popxl.transforms.io_tile_exchange is not implemented yet in ipuxl")
