"""``gc_paused()``: no cyclic garbage collection inside the block.

Lowering and autodiff allocate many small objects (entries, tensors, ops)
and free almost none, while the Ir they walk may hold millions of live
objects. Each automatic collection of the oldest generation scans all of
them, which made building a 10,000-deep program quadratic in its depth.
Nothing these passes allocate relies on prompt collection of cycles, so they
run with collection paused; it resumes (and catches up) when they return.
``Session.__init__`` runs paused as a whole (``@gc_paused()``): its model
step and host state come after lowering, and the catch-up collections of
what lowering allocated would otherwise run there.
"""
import gc
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
