"""Host-speed rewrites of the lowered program, applied only for execution.

The faithful lowering (:func:`ipuxl.lowering.lower`) is the program PopXL
would build; ``describe()``, reports and the IPU model read it. These passes
rewrite a copy of it so that the host runs it faster. Each one states in its
docstring what it relies on, checks it, and declines (leaves the program as
it is) rather than rejecting a valid graph. Results with and without them
agree to float32 rounding; ``IPUXL_CHECK_HOST_PASSES=1`` makes every Session
run both and compare.

Each pass can be switched off by name: ``IPUXL_HOST_PASSES=none`` (or the
older ``IPUXL_NO_FUSION=1``) runs none, ``IPUXL_HOST_PASSES=-fuse_epilogues,
-reshape_views`` all but those, ``IPUXL_HOST_PASSES=fold_transposes`` only
those named; ``Session(..., host_passes=...)`` takes the same forms.
"""
from typing import Dict, Iterable, Optional, Sequence, Tuple, Union

from ..program import Program
from . import (dead_ops, direct_stores, epilogues, input_grad_update, prune_outputs, remote_views,
               reshape_views, transposes, update_folding)

__all__ = ["PASSES", "apply", "enabled_passes"]

#: Every pass, in the order they run.
PASSES = (transposes, epilogues, prune_outputs, update_folding, dead_ops, input_grad_update,
          reshape_views, remote_views, direct_stores)
NAMES = tuple(p.NAME for p in PASSES)

Selection = Union[None, str, Iterable[str]]


def enabled_passes(selection: Selection = None) -> Tuple[str, ...]:
    """The names of the passes a selection enables. ``None`` takes the
    settings' (``IPUXL_HOST_PASSES``, ``IPUXL_NO_FUSION``); a string is
    ``"all"``, ``"none"`` or a comma list of names, each optionally prefixed
    with ``-`` to remove it from all; an iterable lists names."""
    if selection is None:
        from ... import settings  # noqa: PLC0415

        selection = settings.current().host_passes
    if isinstance(selection, str):
        items = [s.strip() for s in selection.split(",") if s.strip()]
    else:
        items = list(selection)
    if items in (["all"], []):
        return NAMES
    if items == ["none"]:
        return ()
    unknown = [s for s in items if s.lstrip("-") not in NAMES]
    if unknown:
        raise ValueError(f"host passes: unknown pass(es) {', '.join(unknown)}; known: "
                         f"{', '.join(NAMES)} (or 'all', 'none')")
    negative = [s for s in items if s.startswith("-")]
    if negative and len(negative) != len(items):
        raise ValueError("host passes: give either names to enable or -names to disable, not "
                         f"both: {','.join(items)}")
    if negative:
        off = {s[1:] for s in negative}
        return tuple(n for n in NAMES if n not in off)
    return tuple(n for n in NAMES if n in items)


def apply(prog: Program, names: Sequence[str]) -> Dict[str, int]:
    """Run the named passes on ``prog`` in place; returns the number of
    rewrites each made."""
    counts = {}
    for p in PASSES:
        if p.NAME in names:
            counts[p.NAME] = p.run(prog)
    return counts
