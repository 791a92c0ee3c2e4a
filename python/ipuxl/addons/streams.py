"""``InputStreams`` / ``OutputStreams``, mirroring ``popxl_addons.streams``:
named collections of host streams created in one call.

    inputs = InputStreams(x=((2, 4), popxl.float32), y=((2,), popxl.int32))
    x = ops.host_load(inputs.x)

A collection is an ordered mapping ``name -> stream``; a stream is reached by
attribute (``inputs.x``), by name (``inputs["x"]``) or by position
(``inputs[0]``, slices too), and iterating gives the streams themselves
(not the names).
"""
from typing import Iterable, Tuple, Union

from ..dtypes import dtype
from ..streams import d2h_stream, h2d_stream
from .utils import OrderedDict

__all__ = ["InputStreams", "OutputStreams"]


class _Streams(OrderedDict):
    _make = None  # h2d_stream or d2h_stream

    def __init__(self, **streams: Tuple[Tuple[int, ...], dtype]):
        super().__init__()
        for name, (shape, dt) in streams.items():
            self[name] = type(self)._make(shape, dt, name=name)

    @classmethod
    def from_streams(cls, streams: Iterable):
        """A collection of existing streams, each named by its tensor id."""
        self = cls()
        for s in streams:
            self[s.tensor_id] = s
        return self

    def _names(self) -> str:
        return "\n    ".join(self.keys())

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return super().__getitem__(name)
        except KeyError:
            raise AttributeError(f"No attribute '{name}'. Available Keys:\n    {self._names()}") \
                from None

    def __getitem__(self, key: Union[str, int, slice]):
        if isinstance(key, (int, slice)):
            return list(self.values())[key]
        try:
            return super().__getitem__(key)
        except KeyError:
            raise KeyError(f"No key '{key}'. Available Keys:\n    {self._names()}") from None

    def __iter__(self):
        return iter(list(self.values()))


class InputStreams(_Streams):
    """Named ``popxl.h2d_stream``s: ``InputStreams(name=(shape, dtype), ...)``."""
    _make = staticmethod(h2d_stream)


class OutputStreams(_Streams):
    """Named ``popxl.d2h_stream``s: ``OutputStreams(name=(shape, dtype), ...)``."""
    _make = staticmethod(d2h_stream)
