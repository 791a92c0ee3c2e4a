"""Layers (``popxl_addons.layers``)."""
from .conv import Conv2D
from .embedding import Embedding
from .group_norm import GroupNorm
from .layer_norm import LayerNorm
from .linear import Linear

__all__ = ["Conv2D", "Embedding", "GroupNorm", "LayerNorm", "Linear"]
