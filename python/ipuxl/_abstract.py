"""Abstract builds: variables with a shape and a dtype but no host data.

An :class:`~ipuxl.Ir` created while the ``abstract`` setting is on
(``IPUXL_ABSTRACT=1``, ``ipuxl.settings.override(abstract=True)``, or
``ipuxl profile --abstract``) is *abstract*: each ``popxl.variable`` (and
remote, replica-sharded variable) of it keeps only the shape and dtype of
its data, as an :class:`AbstractData`, instead of the Ir's own copy of the
values; popxl-addons' variable factories learn shape and dtype from one
sample and never produce the data of a variable. Everything that needs only
shapes works as for a concrete Ir: building graphs, transforms, autodiff,
lowering, ``profile_ir`` and a Session's IPU-model profile (a large model's
program then builds in seconds with little host memory).

What needs values refuses with :class:`AbstractValueError` naming the
variable: NumPy reading an :class:`AbstractData` (``np.asarray``), and a
Session's run, weight copies and tensor data (the Session holds no Engine).
Constants keep their data (they are part of the program, and small).
"""
from typing import Optional, Tuple

import numpy as np

from . import dtypes

__all__ = ["AbstractData", "AbstractValueError", "abstract_host_array", "is_abstract"]


class AbstractValueError(RuntimeError):
    """Values were asked of an abstract build (a variable without host
    data, or a Session of an abstract Ir)."""


_HOW = ("it was built abstract (ipuxl profile --abstract, IPUXL_ABSTRACT=1 or "
        "ipuxl.settings.override(abstract=True)): its variables have shapes and dtypes but no "
        "values")


class AbstractData:
    """The host side of an abstract variable: ``shape``, ``dtype`` (NumPy),
    ``size``, ``ndim``, ``nbytes`` as an ``np.ndarray`` has them, and no
    values. ``np.asarray(d)`` (and anything else that reads values) raises
    :class:`AbstractValueError` naming ``what``."""

    __slots__ = ("shape", "dtype", "what")

    def __init__(self, shape, dtype, what: str = "variable"):
        self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.what = what

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def named(self, what: str) -> "AbstractData":
        return AbstractData(self.shape, self.dtype, what)

    def refuse(self, action: str = "its values were read") -> AbstractValueError:
        return AbstractValueError(f"{self.what} (shape {self.shape}, {self.dtype}) has no host "
                                  f"data: {action}, but {_HOW}")

    def __array__(self, dtype=None, copy=None):
        raise self.refuse()

    def __getitem__(self, item):
        raise self.refuse()

    def __iter__(self):
        raise self.refuse()

    def astype(self, dtype, *args, **kwargs) -> "AbstractData":
        return AbstractData(self.shape, dtype, self.what)

    def __repr__(self):
        return f"AbstractData({self.what}, shape={self.shape}, dtype={self.dtype})"


def is_abstract(data) -> bool:
    return isinstance(data, AbstractData)


def _shape_dtype(data, what: str):
    """(shape, NumPy dtype) of host data without copying it: an array (NumPy,
    a memmap, torch) by its attributes, anything else (lists, scalars, which
    are small) through ``np.asarray``."""
    if isinstance(data, AbstractData):
        return data.shape, data.dtype
    shape, dt = getattr(data, "shape", None), getattr(data, "dtype", None)
    if shape is not None and dt is not None:
        if type(data).__module__.startswith("torch"):
            import torch  # noqa: PLC0415 - only for torch data

            dt = torch.empty((), dtype=dt).numpy().dtype
        return tuple(int(d) for d in shape), np.dtype(dt)
    try:
        arr = np.asarray(data)
    except (TypeError, ValueError, OverflowError) as e:
        raise type(e)(f"{what}: cannot convert the data to an array: {e}") from None
    return arr.shape, arr.dtype


def abstract_host_array(data, dtype: Optional[dtypes.dtype], downcast: bool, what: str,
                        log2_scale=None, nan_on_overflow=None):
    """What :func:`ipuxl._host_data._to_host_array` gives, ``(host data,
    popxl dtype)``, for an abstract Ir: an :class:`AbstractData` of the
    shape and of the dtype the concrete conversion would give (``dtype``
    if given, else the data's, downcast from 64 bits unless
    ``downcast=False``); the values are neither copied nor checked."""
    from .tensor import Tensor  # noqa: PLC0415 - the module that imports this one

    if isinstance(data, Tensor):
        raise TypeError(f"{what}: data must be host data (numpy, list, scalar), not a Tensor")
    shape, npdt = _shape_dtype(data, what)
    if dtype is not None:
        dt = dtypes.dtype.as_dtype(dtype)
        if (log2_scale is not None or nan_on_overflow is not None) and \
                dt not in (dtypes.float8_143, dtypes.float8_152):
            raise RuntimeError(f"{what}: log2_scale and nan_on_overflow only apply to the float8 "
                               "dtypes popxl.float8_143 and popxl.float8_152")
    else:
        if npdt == object:
            raise TypeError(f"{what}: cannot convert {type(data).__name__} to a tensor")
        try:
            dt = dtypes.dtype.as_dtype(npdt)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
        if downcast:
            dt = dtypes._downcast(dt)
    return AbstractData(shape, dt.as_numpy(), what), dt


# ---- Sessions of abstract Irs -------------------------------------------

#: Session methods an abstract Session takes: attaching and detaching copy
#: no weights (there are none), everything else that reaches the device
#: refuses (:func:`refuse_session`).
SESSION_ALLOWED = frozenset({"__enter__", "__exit__", "_unshare"})


def refuse_session(session, method: str) -> AbstractValueError:
    name = "run" if method == "run_with_outputs" else method
    return AbstractValueError(
        f"Session.{name}: the program of Ir {session._ir.id} cannot run: {_HOW}. Profile it "
        "instead (session.profile(), ipuxl.profile.profile_ir(ir), ipuxl profile --abstract), "
        "or build it without the abstract setting to run it")


class AbstractProgram:
    """What an abstract Session holds instead of a LoweredProgram: the
    faithful lowering and its core description (for the IPU model), no
    Engine and no host passes."""

    def __init__(self, ir):
        from .lowering import lower  # noqa: PLC0415 - lowering imports tensor, which imports this
        from .lowering.program import to_desc  # noqa: PLC0415

        self.faithful = lower(ir)
        self.model_desc = to_desc(self.faithful, with_data=False, with_index=False)[0]
        self.engine = None
        self.host_passes: dict = {}
        self.variables: list = []
        self.remote_variables: list = []
        self.direct_store_streams: list = []


def init_session(session, device_desc: str, model) -> None:
    """The state of a Session of an abstract Ir: its program modelled (an
    ``"ipu_model"``/``"ipu_hw"`` program that does not fit raises, as for a
    concrete one, unless the model allows it) and no Engine."""
    from .profile import session_model  # noqa: PLC0415

    ir = session._ir
    session._prog = AbstractProgram(ir)
    session._engine = None
    session._instances = None
    session._hosteng = None
    session._model = model
    session._host_pass_checker = None
    session._host = {}
    session._remote = None
    session._all_replicas = {}
    session._shared = frozenset()
    session._attached = False
    session._host_in_sync = True
    session._failed_run = None
    session._shared_written = frozenset()
    session._half_applied = frozenset()
    session._short_warned = set()
    session._overflow_warned = set()
    session._op_count = ir._op_counter
    session._attach_stack = []
    session._h2d = frozenset(ir.get_all_h2d_streams())
    session._d2h = frozenset(ir.get_all_d2h_streams())
    session._io = {s: (None, session._full_shape(s.shape), s.dtype.as_numpy())
                   for s in session._h2d | session._d2h}
    session._aligned_outputs = frozenset()
    session._d2h_sorted = sorted(session._d2h)
    session._n_transfers = ir.num_host_transfers
    session._profile = session_model(session, device_desc, model)


# ---- samples of variable factories, without drawing them ----------------

_SHAPE_FIRST = {"zeros", "ones", "empty", "full"}   # numpy creators: shape first
_RANDOM = {"normal": 2, "uniform": 2, "standard_normal": 0, "random": 0, "random_sample": 0,
           "randint": 2, "integers": 2, "lognormal": 2, "laplace": 2, "standard_t": 1,
           "truncated_normal": 0}  # where `size` is positional (after the parameters)


def _as_shape(size):
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(d) for d in size)


def sample_spec(fn) -> Optional[Tuple[Tuple[int, ...], np.dtype]]:
    """(shape, NumPy dtype) of what ``fn()`` would return, read from a
    ``functools.partial`` of a known array source without calling it:
    NumPy's ``zeros``/``ones``/``empty``/``full``, ``np.random``'s and a
    ``Generator``'s samplers (``normal``, ``uniform``, ...), a SciPy
    distribution's ``rvs(..., size=...)``, and popxl-addons'
    ``truncated_normal(size)``. None for anything else (a lambda, another
    function): the caller then draws one sample."""
    import functools  # noqa: PLC0415

    if not isinstance(fn, functools.partial):
        return None
    f, args, kw = fn.func, fn.args, dict(fn.keywords or {})
    name = getattr(f, "__name__", "")
    owner = getattr(f, "__self__", None)
    module = getattr(f, "__module__", "") or ""
    try:
        if f in (np.zeros, np.ones, np.empty, np.full) and name in _SHAPE_FIRST:
            shape = _as_shape(args[0] if args else kw["shape"])
            if name == "full":
                fill = args[1] if len(args) > 1 else kw["fill_value"]
                dt = kw.get("dtype", args[2] if len(args) > 2 else np.asarray(fill).dtype)
            else:
                dt = kw.get("dtype", args[1] if len(args) > 1 else np.float64)
            return shape, np.dtype(dt)
        if name == "rvs" and type(owner).__module__.startswith("scipy.stats"):
            return (_as_shape(kw["size"]), np.dtype(np.float64)) if "size" in kw else None
        is_random = isinstance(owner, (np.random.RandomState, np.random.Generator)) or \
            (name == "truncated_normal" and module.startswith("ipuxl.addons"))
        if is_random and name in _RANDOM:
            pos = _RANDOM[name]
            if "size" in kw:
                size = kw["size"]
            elif len(args) > pos:
                size = args[pos]
            else:
                return None
            dt = np.int64 if name in ("randint", "integers") else np.float64
            return _as_shape(size), np.dtype(kw.get("dtype", dt))
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return None
