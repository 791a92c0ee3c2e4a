"""``NamedTensors``: a ``DotTree`` of popxl Tensors (``popxl_addons.named_tensors``)."""
from typing import Dict, Mapping, Tuple

import numpy as np

from ..tensor import Tensor, Variable
from .dot_tree import DotTree

__all__ = ["NamedTensors", "NamedTensorData", "TensorMap", "print_named_tensors"]

TensorMap = Mapping[Tensor, Tensor]


class NamedTensors(DotTree[Tensor]):
    """A ``DotTree`` whose leaves are Tensors.

    Note the orderings: ``named_tensors`` follows insertion order, while
    ``tensors`` is sorted by **tensor name** (``Tensor.name``), which is what
    popxl_addons code relies on (e.g. ``accumulated.tensors[:-1]`` dropping
    ``mean_accum_counter``)."""

    @property
    def tensors(self) -> Tuple[Tensor, ...]:
        """All leaves sorted by ``Tensor.name``."""
        return tuple(sorted(self.to_dict().values(), key=lambda t: t.name))

    @property
    def named_tensors(self) -> Dict[str, Tensor]:
        """``{flat key: tensor}`` in insertion order."""
        return dict(self.to_dict())

    @property
    def variables(self) -> Tuple[Tensor, ...]:
        """The leaves that are popxl Variables, sorted by name."""
        return tuple(t for t in self.tensors if isinstance(t, Variable))

    @property
    def named_variables(self) -> Dict[str, Tensor]:
        return {k: t for k, t in self.named_tensors.items() if isinstance(t, Variable)}

    def remap(self, mapping: TensorMap) -> "NamedTensors":
        """A tree with the same keys where each leaf ``t`` is ``mapping[t]``.

        Raises:
            KeyError: a leaf is missing from ``mapping``.
        """
        out = type(self)()
        for key, t in self.to_dict().items():
            if t not in mapping:
                raise KeyError(f"remap: no entry for {key!r} ({t}) in the mapping")
            out.insert(key, mapping[t], overwrite=True)  # keys share prefixes
        return out


class NamedTensorData(DotTree[np.ndarray]):
    """A ``DotTree`` of host arrays (e.g. weights read from a session)."""


def print_named_tensors(named_tensors: NamedTensors) -> NamedTensors:
    """``ops.print_tensor`` every leaf (titled by its key); returns the printed tensors."""
    from .. import ops

    return NamedTensors.from_dict({k: ops.print_tensor(t, k)
                                   for k, t in named_tensors.to_dict().items()})
