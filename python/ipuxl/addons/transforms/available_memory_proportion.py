"""``set_available_memory_proportion_by_ipu`` and
``set_graph_available_memory_proportion_by_ipu``
(``popxl_addons.transforms.available_memory_proportion``).

They set the ``availableMemoryProportion`` of every op that has one (the
matmuls: the ops whose IPU-model cost class is ``"matmul"``) to the
proportion given for the IPU the op is on (``proportions[ipu]``, the first
one for IPUs the list does not reach), overriding what the op was built
with. ipuxl's IPU model plans those matmuls with it (the share of a tile the
planner may use for temporaries), as poplin does.
"""
from typing import Dict, Iterable

from ...graph import Graph
from ...opdef import get_opdef

__all__ = ["set_available_memory_proportion_by_ipu",
           "set_graph_available_memory_proportion_by_ipu"]


def _proportions(proportions: Iterable[float]) -> Dict[int, float]:
    out = {}
    for i, p in enumerate(proportions):
        p = float(p)
        if not 0 < p <= 1:
            raise ValueError(f"available memory proportion for IPU {i} must be in (0, 1], "
                             f"got {p}")
        out[i] = p
    if not out:
        raise ValueError("available memory proportions: give at least one (for IPU 0)")
    return out


def _set(op, props: Dict[int, float]) -> None:
    if get_opdef(op.type).cost_class == "matmul":
        op.attrs["available_memory_proportion"] = props.get(op.ipu or 0, props[0])


def set_available_memory_proportion_by_ipu(ir, proportions: Iterable[float]) -> None:
    """For every op of every graph of ``ir`` that has an available memory
    proportion, set it to ``proportions[ipu of the op]``."""
    props = _proportions(proportions)
    for g in ir._graphs.values():
        for op in g._ops:
            _set(op, props)


def set_graph_available_memory_proportion_by_ipu(graph: Graph, proportions: Iterable[float]) -> None:
    """As :func:`set_available_memory_proportion_by_ipu`, for the ops of
    ``graph`` and of the graphs it calls (transitively)."""
    props = _proportions(proportions)
    seen, stack = set(), [graph]
    while stack:
        g = stack.pop()
        if g.name in seen:
            continue
        seen.add(g.name)
        for op in g._ops:
            stack.extend(op.called_graphs)
            _set(op, props)
