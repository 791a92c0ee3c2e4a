"""Layers (``popxl_addons.layers``)."""
from .embedding import Embedding
from .layer_norm import LayerNorm
from .linear import Linear

__all__ = ["Embedding", "LayerNorm", "Linear"]
