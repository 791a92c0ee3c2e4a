"""Facts about a graph's entries that host passes check before rewriting:
who reads a tensor, which storage a tensor shares, what an entry writes."""
from typing import Dict, List, Optional, Tuple

from ..program import Entry

__all__ = ["readers", "alias_roots", "root_of", "touches", "writes", "producer", "read_count",
           "is_f32", "is_half_or_f32", "writes_between"]


def is_f32(t) -> bool:
    return t is not None and t.dtype.name == "float32"


def is_half_or_f32(t) -> bool:
    """float32 or float16: the dtypes whose MatMul kernel takes transpose
    flags and fused bias / GELU epilogues (float16 rounding after each
    fused op as the unfused kernels round, cpp/kernels/matmul.cpp)."""
    return t is not None and t.dtype.name in ("float32", "float16")


def readers(entries: List[Entry]) -> Dict[int, List[Entry]]:
    """``{id(tensor): [entries reading it, in order]}``."""
    out: Dict[int, List[Entry]] = {}
    for e in entries:
        for t in e.inputs:
            if t is not None:
                out.setdefault(id(t), []).append(e)
    return out


def alias_roots(entries: List[Entry]) -> Dict[int, int]:
    """``{id(tensor): id(storage root)}`` for tensors that alias another one."""
    root: Dict[int, int] = {}
    for e in entries:
        for o, i in e.aliases:
            src = e.inputs[i]
            root[id(e.outputs[o])] = root.get(id(src), id(src))
    return root


def root_of(roots: Dict[int, int], t) -> int:
    return roots.get(id(t), id(t))


def touches(e: Entry, roots, targets) -> bool:
    """Whether ``e`` reads or writes (any view of) a storage in ``targets``."""
    return any(t is not None and root_of(roots, t) in targets
               for t in list(e.inputs) + list(e.outputs))


def writes(e: Entry, roots, targets) -> bool:
    """Whether ``e`` writes (any view of) a storage in ``targets``. A call or
    loop writes what its graph writes only through inputs marked modified."""
    return any(root_of(roots, t) in targets for t in e.written_inputs())


def writes_between(entries: List[Entry], start: int, end: int, tensors, roots) -> bool:
    """Whether an entry at a position in ``(start, end)`` writes one of ``tensors``."""
    targets = {root_of(roots, t) for t in tensors if t is not None}
    return any(writes(e, roots, targets) for e in entries[start + 1:end])


def producer(entries: List[Entry], t) -> Tuple[Optional[int], Optional[Entry], Optional[int]]:
    """``(position, entry, output index)`` of the entry producing ``t``."""
    for pos, e in enumerate(entries):
        for k, o in enumerate(e.outputs):
            if o is t:
                return pos, e, k
    return None, None, None


def read_count(entries: List[Entry], t) -> int:
    return sum(1 for e in entries for x in e.inputs if x is t)
