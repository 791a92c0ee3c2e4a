"""``IpuModel``: which IPU the analytical model describes, and the
out-of-memory error a program that does not fit raises."""
import math
from typing import Optional

__all__ = ["IpuModel", "OutOfMemoryError", "MODEL_ENV"]

#: Environment variable with default IpuModel options for ``"ipu_model"``
#: sessions, e.g. ``IPUXL_IPU_MODEL="version=ipu21,tiles_per_ipu=16,allow_out_of_memory=1"``
#: (read and checked by :mod:`ipuxl.settings`).
MODEL_ENV = "IPUXL_IPU_MODEL"

_VERSIONS = ("ipu1", "ipu2", "ipu21")


class IpuModel:
    """The IPU a ``Session`` models (PopXL passes a ``popart.DeviceInfo``
    from ``createIpuModelDevice({"numIPUs": n, "tilesPerIPU": t})``; ipuxl
    takes this object as ``Session(ir, ipuxl.IpuModel(...))``).

    Args:
        version: ``"ipu1"`` (Mk1, 1216 tiles of 256 KiB), ``"ipu2"`` (Mk2,
            1472 tiles of 624 KiB, the default) or ``"ipu21"`` (Bow).
        tiles_per_ipu: fewer tiles than the chip has (PopXL's own
            ``"ipu_model"`` default is 4; ipuxl models the whole chip).
        num_ipus: IPUs of the device; by default what the program's
            ``popxl.ipu(n)`` placement needs, rounded up to a power of two.
        num_io_tiles: tiles set aside for ``io_tiles()`` ops.
        memory_per_tile: bytes per tile instead of the chip's (0: no limit).
        allow_out_of_memory: build and run a program that does not fit, as
            the IPUModel does ("The IPUModel is designed not to stop for OOM
            errors"); the profile shows the overflow.
        clock_hz, host_bandwidth, streaming_bandwidth (bytes/s): model
            parameters (not published per IPU, see docs/ipu_model.md).
        available_memory_proportion: share of a tile a matmul plan may use
            for temporaries (PopART's default 0.6).
    """

    def __init__(self, version: str = "ipu2", tiles_per_ipu: Optional[int] = None,
                 num_ipus: Optional[int] = None, num_io_tiles: int = 0,
                 memory_per_tile: Optional[int] = None, allow_out_of_memory: bool = False,
                 clock_hz: Optional[float] = None, host_bandwidth: Optional[float] = None,
                 streaming_bandwidth: Optional[float] = None,
                 available_memory_proportion: Optional[float] = None):
        if version not in _VERSIONS:
            raise ValueError(f"IpuModel: version must be one of {_VERSIONS}, got {version!r}")
        for name, v in (("tiles_per_ipu", tiles_per_ipu), ("num_ipus", num_ipus)):
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"IpuModel: {name} must be a positive int, got {v!r}")
        if not isinstance(num_io_tiles, int) or num_io_tiles < 0:
            raise ValueError(f"IpuModel: num_io_tiles must be a non-negative int, got {num_io_tiles!r}")
        if memory_per_tile is not None and (not isinstance(memory_per_tile, int) or memory_per_tile < 0):
            raise ValueError(f"IpuModel: memory_per_tile must be a non-negative int, got "
                             f"{memory_per_tile!r}")
        if available_memory_proportion is not None and not 0 < available_memory_proportion <= 1:
            raise ValueError("IpuModel: available_memory_proportion must be in (0, 1]")
        for name, v in (("clock_hz", clock_hz), ("host_bandwidth", host_bandwidth),
                        ("streaming_bandwidth", streaming_bandwidth)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or
                                  not math.isfinite(v) or v <= 0):
                raise ValueError(f"IpuModel: {name} must be a positive finite number, got {v!r}")
        self.version = version
        self.tiles_per_ipu = tiles_per_ipu
        self.num_ipus = num_ipus
        self.num_io_tiles = num_io_tiles
        self.memory_per_tile = memory_per_tile
        self.allow_out_of_memory = bool(allow_out_of_memory)
        self.clock_hz = clock_hz
        self.host_bandwidth = host_bandwidth
        self.streaming_bandwidth = streaming_bandwidth
        self.available_memory_proportion = available_memory_proportion

    @classmethod
    def from_env(cls, default: Optional["IpuModel"] = None) -> "IpuModel":
        """Options from ``IPUXL_IPU_MODEL`` (``key=value`` pairs separated by
        commas, each key and value checked by :mod:`ipuxl.settings`) over
        ``default``."""
        from .. import settings  # noqa: PLC0415

        base = dict(vars(default)) if default is not None else {}
        base.update(settings.current().ipu_model_options)
        return cls(**base)

    def core_options(self, cpu: bool = False) -> dict:
        """The options ``core.ipu_model`` takes."""
        o = {"version": "cpu" if cpu else self.version, "tiles_per_ipu": self.tiles_per_ipu,
             "num_ipus": self.num_ipus, "num_io_tiles": self.num_io_tiles,
             "memory_per_tile": self.memory_per_tile, "clock_hz": self.clock_hz,
             "host_bandwidth": self.host_bandwidth, "streaming_bandwidth": self.streaming_bandwidth,
             "available_memory_proportion": self.available_memory_proportion}
        return {k: v for k, v in o.items() if v is not None}

    def __repr__(self):
        items = [f"{k}={v!r}" for k, v in vars(self).items()
                 if v is not None and not (k == "num_io_tiles" and v == 0)
                 and not (k == "allow_out_of_memory" and not v)]
        return f"IpuModel({', '.join(items)})"


class OutOfMemoryError(MemoryError):
    """The program does not fit in the modelled IPU's tile memory.

    A ``MemoryError`` (so ``except MemoryError`` catches it, like the core's
    own allocation failures) carrying what Poplar's out-of-memory report
    gives: ``tile`` (the worst tile, global index), ``ipu``,
    ``categories`` (bytes per PopVision category on it), ``tensors``
    (the largest tensors with bytes on it) and ``profile`` (the whole
    :class:`~ipuxl.profile.Profile`, which shows the overflow).
    """

    def __init__(self, message: str, profile=None, tile: int = -1, ipu: int = 0,
                 categories=None, tensors=None):
        super().__init__(message)
        self.profile = profile
        self.tile = tile
        self.ipu = ipu
        self.categories = dict(categories or {})
        self.tensors = list(tensors or [])
