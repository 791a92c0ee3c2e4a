"""The session option PopXL programs set through ``ir._pb_ir``.

PopXL has no setter for the number of IO tiles: programs write PopART's
session option directly, ``ir._pb_ir.getSessionOptions().numIOTiles = 32``
(Graphcore's tutorial 6 and popxl_addons' batch serialisation do). ipuxl has
no PopART; ``Ir._pb_ir`` is a handle that offers exactly that path and
nothing else, so that those programs run unchanged. Any other attribute is
an ``AttributeError`` that says so.

``numIOTiles`` follows PopART (``IrLowering``): 0 (the default) sets no IO
tiles aside; otherwise it must be even and at least 32, and fewer than the
tiles of an IPU (checked when a Session models its IPU). The IPU model maps
``popxl.io_tiles()`` ops and their tensors onto that many tiles of each IPU
and lets their exchanges overlap compute (docs/ipu_model.md).
"""

__all__ = ["SessionOptions", "IrHandle", "check_num_io_tiles"]


def check_num_io_tiles(n: int, tiles_per_ipu: int = 0) -> None:
    """PopART's checks of ``numIOTiles`` (``RuntimeError``, as popart raises)."""
    if n > 0:
        if n < 32 or n % 2:
            raise RuntimeError(f"{n} is an invalid number of IO tiles. Number of IO tiles must "
                               "be an even number and >= 32.")
        if tiles_per_ipu and n >= tiles_per_ipu:
            raise RuntimeError(f"Tiles per IPU {tiles_per_ipu} should exceed number of IO tiles "
                               f"{n}.")


class SessionOptions:
    """``numIOTiles``: the IO tiles set aside on each IPU (see the module docstring)."""

    __slots__ = ("_ir",)

    def __init__(self, ir):
        object.__setattr__(self, "_ir", ir)

    @property
    def numIOTiles(self) -> int:  # noqa: N802 - PopART's name
        return self._ir.__dict__.get("_num_io_tiles", 0)

    @numIOTiles.setter
    def numIOTiles(self, value: int) -> None:  # noqa: N802
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"numIOTiles must be a non-negative int, got {value!r}")
        if getattr(self._ir, "_prepared", False):
            raise RuntimeError(f"numIOTiles cannot change: a Session has already compiled Ir "
                               f"{self._ir.id}")
        check_num_io_tiles(value)
        self._ir.__dict__["_num_io_tiles"] = value

    def __getattr__(self, name):
        raise AttributeError(
            f"ipuxl has no PopART session options; Ir._pb_ir.getSessionOptions() offers only "
            f"'numIOTiles', not {name!r}")

    def __setattr__(self, name, value):
        if name != "numIOTiles":
            raise AttributeError(
                f"ipuxl has no PopART session options; Ir._pb_ir.getSessionOptions() offers "
                f"only 'numIOTiles', not {name!r}")
        object.__setattr__(self, name, value)

    def __repr__(self):
        return f"SessionOptions(numIOTiles={self.numIOTiles})"


class IrHandle:
    """What ``Ir._pb_ir`` gives: ``getSessionOptions()`` only."""

    __slots__ = ("_ir",)

    def __init__(self, ir):
        self._ir = ir

    def getSessionOptions(self) -> SessionOptions:  # noqa: N802 - PopART's name
        return SessionOptions(self._ir)

    def __getattr__(self, name):
        raise AttributeError(
            f"ipuxl has no PopART Ir: Ir._pb_ir offers only getSessionOptions().numIOTiles, "
            f"not {name!r}")
