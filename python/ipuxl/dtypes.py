"""Element types, mirroring ``popxl.dtypes``.

Each dtype the core can hold carries the core's code for it, read from the
core's own table (``ipuxl._core.DType``, exported from cpp/core/dtype.hpp
under these names), so the two sides cannot disagree. The fp8 types (one byte each; conversions in
``ipuxl.fp8_utils``) move through streams, variables and the data-movement
ops, and are read by the pow2-scaled casts, matmul and conv; arithmetic ops
reject them. Complex types exist so that programs naming them import; the
core cannot run them.
"""
from collections.abc import Mapping
from typing import Any, Dict

import numpy as np

from ._core_loader import core as _core

__all__ = [
    "dtype", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "half", "float8_143", "float8_152", "float16", "float", "float32", "double",
    "float64", "complex64", "complex128",
]

_builtin_bool = bool
_builtin_float = float
_builtin_int = int

np_dtype_float8_143 = np.dtype([("float8_143", "u1")])
np_dtype_float8_152 = np.dtype([("float8_152", "u1")])

# Lookup tables with PopXL's names (tests and user code import them).
_NP_TO_POPXL: Dict[np.dtype, "dtype"] = {}   # numpy dtype -> dtype
_STR_TO_POPXL: Dict[str, "dtype"] = {}       # name -> dtype
_PY_TO_POPXL: Dict[type, "dtype"] = {}       # Python type -> dtype


class _TorchToPopxl(Mapping):
    """torch dtype -> dtype, for the dtypes PopXL maps (torch has no unsigned
    types beyond uint8, nor fp8 ones there). Filled on first use, so that
    importing ipuxl does not import torch; empty when torch is absent."""

    _NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32",
              "float64", "complex64", "complex128")

    def __init__(self):
        self._data = None

    def _table(self):
        if self._data is None:
            try:
                import torch
            except ImportError:
                self._data = {}
            else:
                self._data = {getattr(torch, n): dtype.from_name(n) for n in self._NAMES}
        return self._data

    def __getitem__(self, key):
        return self._table()[key]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())

    def __repr__(self):
        return repr(self._table())


_PT_TO_POPXL = _TorchToPopxl()


class dtype:
    """A PopXL element type. Instances are unique: compare with ``==`` or ``is``."""

    _by_name: Dict[str, "dtype"] = {}
    _by_np: Dict[Any, "dtype"] = {}

    def __init__(self):
        raise TypeError("popxl.dtype cannot be constructed directly; use popxl.float32 and friends")

    @classmethod
    def _new(cls, name, np_type, is_complex=False, is_int=False, is_fp=False,
             is_signed=False, torch_name=None):
        self = object.__new__(cls)
        self._name = name
        core_type = _core.DType.__members__.get(name)
        self._code = None if core_type is None else int(core_type)
        self._np_type = np_type
        # numpy's dtype of it, made once (np.dtype() per call costs more than
        # the callers' own work; numpy returns the same object every time).
        self._np_dtype = None if np_type is None else np.dtype(np_type)
        self._is_complex = is_complex
        self._is_int = is_int
        self._is_fp = is_fp
        self._is_signed = is_signed
        self._torch_name = torch_name or name
        cls._by_name[name] = self
        _STR_TO_POPXL[name] = self
        if np_type is not None:
            cls._by_np.setdefault(np.dtype(np_type), self)
            _NP_TO_POPXL.setdefault(np.dtype(np_type), self)
        return self

    name = property(lambda self: self._name)
    is_complex = property(lambda self: self._is_complex)
    is_int = property(lambda self: self._is_int)
    is_floating_point = property(lambda self: self._is_fp)
    is_signed = property(lambda self: self._is_signed)

    @property
    def itemsize(self) -> int:
        return np.dtype(self._np_type).itemsize if self._np_dtype is None else \
            self._np_dtype.itemsize

    @property
    def _core_code(self) -> int:
        if self._code is None:
            raise NotImplementedError(f"dtype {self!r} is not supported by the ipuxl core")
        return self._code

    @classmethod
    def from_name(cls, name: str) -> "dtype":
        try:
            return cls._by_name[name]
        except KeyError:
            raise ValueError(f"{name!r} is not a valid popxl dtype name") from None

    @classmethod
    def as_dtype(cls, d: Any) -> "dtype":
        """A dtype from a numpy dtype/array, a Python type, a torch dtype or a name."""
        if isinstance(d, dtype):
            return d
        if isinstance(d, str):
            return cls.from_name(d)
        if d is _builtin_bool:
            return bool_
        if d is _builtin_int:
            return int64
        if d is _builtin_float:
            return float32  # as PopXL
        if isinstance(d, np.ndarray):
            d = d.dtype
        mod = type(d).__module__
        if mod.startswith("torch"):
            name = str(d).replace("torch.", "")
            aliases = {"half": "float16", "float": "float32", "double": "float64"}
            return cls.from_name(aliases.get(name, name))
        try:
            npd = np.dtype(d)
        except TypeError:
            raise ValueError(f"cannot convert {d!r} to a popxl dtype") from None
        if npd in cls._by_np:
            return cls._by_np[npd]
        raise ValueError(f"numpy dtype {npd} has no popxl equivalent")

    def as_numpy(self) -> np.dtype:
        if self._np_type is None:
            raise TypeError(f"{self!r} has no numpy equivalent")
        return self._np_dtype

    def as_torch(self):
        import torch  # optional dependency

        return getattr(torch, self._torch_name)

    def __repr__(self) -> str:
        return f"popxl.dtypes.{self._name}"

    __str__ = __repr__

    def __reduce__(self):
        return (dtype.from_name, (self._name,))


bool_ = dtype._new("bool", np.bool_)
int8 = dtype._new("int8", np.int8, is_int=True, is_signed=True)
uint8 = dtype._new("uint8", np.uint8, is_int=True)
int16 = dtype._new("int16", np.int16, is_int=True, is_signed=True)
uint16 = dtype._new("uint16", np.uint16, is_int=True)
int32 = dtype._new("int32", np.int32, is_int=True, is_signed=True)
uint32 = dtype._new("uint32", np.uint32, is_int=True)
int64 = dtype._new("int64", np.int64, is_int=True, is_signed=True)
uint64 = dtype._new("uint64", np.uint64, is_int=True)
float16 = dtype._new("float16", np.float16, is_fp=True, is_signed=True)
float32 = dtype._new("float32", np.float32, is_fp=True, is_signed=True)
float64 = dtype._new("float64", np.float64, is_fp=True, is_signed=True)
float8_143 = dtype._new("float8_143", np_dtype_float8_143, is_fp=True, is_signed=True)
float8_152 = dtype._new("float8_152", np_dtype_float8_152, is_fp=True, is_signed=True)
complex64 = dtype._new("complex64", np.complex64, is_complex=True, is_signed=True)
complex128 = dtype._new("complex128", np.complex128, is_complex=True, is_signed=True)

globals()["bool"] = bool_
_PY_TO_POPXL.update({_builtin_bool: bool_, _builtin_float: float32})
half = float16
float = float32  # noqa: A001 - mirrors popxl.float
double = float64

# 64-bit host data is downcast to these when ``downcast=True``.
_DOWNCAST = {int64: int32, uint64: uint32, float64: float32}


def _downcast(d: dtype) -> dtype:
    return _DOWNCAST.get(d, d)
