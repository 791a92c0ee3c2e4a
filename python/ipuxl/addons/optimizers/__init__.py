"""Optimiser modules (``popxl_addons.optimizers``)."""
from .adam import AdamOptimizerStep
from .sgd import SGDOptimizerStep

__all__ = ["AdamOptimizerStep", "SGDOptimizerStep"]
