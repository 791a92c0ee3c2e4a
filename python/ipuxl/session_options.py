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

Graphcore's applications (nlp/*/popxl in graphcore/examples) also set three
more of PopART's options on every Ir; ipuxl takes them with these meanings:

* ``partialsTypeMatMuls``: ``""`` (the default), ``"float"`` or ``"half"``,
  checked as PopART checks it. As in PopXL, ``ops.matmul`` reads it when the
  op is created, unless given its own ``partials_type``; the IPU model plans
  each matmul with the result (poplin's ``partialsType``: 2-byte partial
  sums and the fp16.16 conv units with half partials). The simulator's
  float16 products with half partials accumulate in float16 where the CPU
  has AVX512-FP16 at the avx512 level (blocks of 256 products of K in float16,
  the blocks' sums in float32: cpp/core/hgemm.hpp), elsewhere in float32.
* ``enableStochasticRounding``: a bool (default ``False``). The simulator
  rounds to nearest even; a Session whose Ir sets ``True`` says so once on
  stderr (as ``"ipu_hw"`` does when it falls back to the simulator) and runs.
* ``engineOptions``: Poplar engine options, a ``dict`` of ``str`` to ``str``
  as PopART's (item assignment ``opts.engineOptions["k"] = "v"`` is kept, as
  PopART's dict wrapper keeps it). Only the options in
  :data:`ENGINE_OPTIONS_WITHOUT_EFFECT_HERE` are accepted: they tune how
  Poplar compiles or synchronises the program, not what it computes, and the
  IPU model has no equivalent; any other raises ``NotImplementedError``
  naming it.
"""

import sys

__all__ = ["SessionOptions", "IrHandle", "check_num_io_tiles", "ENGINE_OPTIONS_WITHOUT_EFFECT_HERE",
           "warn_unmodelled_options"]

#: Poplar engine options accepted in ``engineOptions``, with what each does on
#: an IPU (none changes the values a program computes).
ENGINE_OPTIONS_WITHOUT_EFFECT_HERE = {
    "target.syncReplicasIndependently": "replicas synchronise with the host independently",
    "target.extendedMemory": "lets Poplar address the upper half of tile memory on IPU Mk2",
    "opt.internalExchangeOptimisationTarget": "trades exchange code size against cycles",
}
_PARTIALS = ("", "float", "half")


def check_num_io_tiles(n: int, tiles_per_ipu: int = 0) -> None:
    """PopART's checks of ``numIOTiles`` (``RuntimeError``, as popart raises)."""
    if n > 0:
        if n < 32 or n % 2:
            raise RuntimeError(f"{n} is an invalid number of IO tiles. Number of IO tiles must "
                               "be an even number and >= 32.")
        if tiles_per_ipu and n >= tiles_per_ipu:
            raise RuntimeError(f"Tiles per IPU {tiles_per_ipu} should exceed number of IO tiles "
                               f"{n}.")


def _options(ir) -> dict:
    """The PopART options an Ir carries besides numIOTiles (kept in its __dict__)."""
    return ir.__dict__.setdefault("_popart_session_options", {})


def _check_not_compiled(ir, name):
    if getattr(ir, "_prepared", False):
        raise RuntimeError(f"{name} cannot change: a Session has already compiled Ir {ir.id}")


def _check_engine_option(key, value) -> None:
    if not isinstance(key, str) or not isinstance(value, str):
        raise TypeError(f"engineOptions maps str to str (as Poplar's OptionFlags), got "
                        f"{key!r}: {value!r}")
    if key not in ENGINE_OPTIONS_WITHOUT_EFFECT_HERE:
        raise NotImplementedError(
            f"Poplar engine option {key!r} is not supported by ipuxl; engineOptions accepts "
            f"only {sorted(ENGINE_OPTIONS_WITHOUT_EFFECT_HERE)}")


class _EngineOptions(dict):
    """``engineOptions``: a dict whose item assignments are checked and stored
    on the Ir (PopART's ``DictWrapper`` also writes assignments back)."""

    def __init__(self, ir):
        super().__init__(_options(ir).get("engineOptions", {}))
        self._ir = ir

    def __setitem__(self, key, value):
        _check_engine_option(key, value)
        _check_not_compiled(self._ir, "engineOptions")
        super().__setitem__(key, value)
        _options(self._ir)["engineOptions"] = dict(self)

    def __delitem__(self, key):
        _check_not_compiled(self._ir, "engineOptions")
        super().__delitem__(key)
        _options(self._ir)["engineOptions"] = dict(self)

    def _unsupported(self, *args, **kwargs):
        raise NotImplementedError("engineOptions: assign items one by one "
                                  "(opts.engineOptions[key] = value) or assign a whole dict")

    update = setdefault = pop = popitem = clear = _unsupported


class SessionOptions:
    """The PopART session options ipuxl supports (see the module docstring):
    ``numIOTiles``, ``partialsTypeMatMuls``, ``enableStochasticRounding`` and
    ``engineOptions``."""

    __slots__ = ("_ir",)
    _NAMES = ("numIOTiles", "partialsTypeMatMuls", "enableStochasticRounding", "engineOptions")

    def __init__(self, ir):
        object.__setattr__(self, "_ir", ir)

    @property
    def numIOTiles(self) -> int:  # noqa: N802 - PopART's name
        return self._ir.__dict__.get("_num_io_tiles", 0)

    @numIOTiles.setter
    def numIOTiles(self, value: int) -> None:  # noqa: N802
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"numIOTiles must be a non-negative int, got {value!r}")
        _check_not_compiled(self._ir, "numIOTiles")
        check_num_io_tiles(value)
        self._ir.__dict__["_num_io_tiles"] = value

    @property
    def partialsTypeMatMuls(self) -> str:  # noqa: N802 - PopART's name
        return _options(self._ir).get("partialsTypeMatMuls", "")

    @partialsTypeMatMuls.setter
    def partialsTypeMatMuls(self, value: str) -> None:  # noqa: N802
        if not isinstance(value, str):
            raise TypeError(f"partialsTypeMatMuls must be a str, got {value!r}")
        if value.lower() not in _PARTIALS:
            # PopART: "Unable to get partials type from partialsTypeMatMuls option"
            raise ValueError(f"partialsTypeMatMuls must be 'float' or 'half' (or '' for none), "
                             f"got {value!r}")
        _check_not_compiled(self._ir, "partialsTypeMatMuls")
        _options(self._ir)["partialsTypeMatMuls"] = value

    @property
    def enableStochasticRounding(self) -> bool:  # noqa: N802 - PopART's name
        return _options(self._ir).get("enableStochasticRounding", False)

    @enableStochasticRounding.setter
    def enableStochasticRounding(self, value: bool) -> None:  # noqa: N802
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise TypeError(f"enableStochasticRounding must be a bool, got {value!r}")
        _check_not_compiled(self._ir, "enableStochasticRounding")
        _options(self._ir)["enableStochasticRounding"] = bool(value)

    @property
    def engineOptions(self) -> dict:  # noqa: N802 - PopART's name
        return _EngineOptions(self._ir)

    @engineOptions.setter
    def engineOptions(self, value: dict) -> None:  # noqa: N802
        if not isinstance(value, dict):
            raise TypeError(f"engineOptions must be a dict of str to str, got {value!r}")
        for k, v in value.items():
            _check_engine_option(k, v)
        _check_not_compiled(self._ir, "engineOptions")
        _options(self._ir)["engineOptions"] = dict(value)

    def __getattr__(self, name):
        raise AttributeError(
            f"ipuxl has no PopART session options; Ir._pb_ir.getSessionOptions() offers only "
            f"{', '.join(map(repr, self._NAMES))}, not {name!r}")

    def __setattr__(self, name, value):
        if name not in self._NAMES:
            raise AttributeError(
                f"ipuxl has no PopART session options; Ir._pb_ir.getSessionOptions() offers "
                f"only {', '.join(map(repr, self._NAMES))}, not {name!r}")
        object.__setattr__(self, name, value)

    def __repr__(self):
        return ("SessionOptions(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._NAMES)
                + ")")


def warn_unmodelled_options(ir) -> None:
    """Say once on stderr, when a Session compiles ``ir``, which of its options
    the simulator does not model (stochastic rounding)."""
    if _options(ir).get("enableStochasticRounding"):
        print(f"ipuxl: warning: Ir {ir.id} sets enableStochasticRounding; the simulator rounds "
              "to nearest even", file=sys.stderr)


class IrHandle:
    """What ``Ir._pb_ir`` gives: ``getSessionOptions()`` only."""

    __slots__ = ("_ir",)

    def __init__(self, ir):
        self._ir = ir

    def getSessionOptions(self) -> SessionOptions:  # noqa: N802 - PopART's name
        return SessionOptions(self._ir)

    def __getattr__(self, name):
        raise AttributeError(
            f"ipuxl has no PopART Ir: Ir._pb_ir offers only getSessionOptions(), not {name!r}")
