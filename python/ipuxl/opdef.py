"""The op registry: everything ipuxl knows about an op type, declared once.

An :class:`OpDef` holds an op type's

* **shape rule**: ``shape(inputs, attrs, graphs) -> [(shape, dtype), ...]``,
  the abstract evaluation of the op (JAX's ``abstract_eval``): the shapes
  and dtypes of its outputs from those of its inputs, raising ``ValueError``
  / ``TypeError`` naming the op for inputs it cannot take. ``create_op``
  computes every output from it; builders only convert arguments and
  normalise attributes.
* **kernel**: the C++ kernel that runs it (``kind="kernel"``), or how the
  lowering turns it into program structure (``"call"``, ``"repeat"``,
  ``"if"``, ``"host_load"``, ``"host_store"``, ``"ipu_copy"``: a Copy
  between IPUs).
* **traits**: ``aliases`` (output/input pairs sharing storage) and
  ``modifies`` (inputs the op writes), each a tuple or a rule of the inputs
  and attributes; ``side_effects`` (runs even when nothing reads its
  results); ``recomputable`` (autodiff may compute it again in a gradient
  graph: false for random, host IO and remote ops); ``stash_outputs``
  (PopART's gradient op reads the forward output, ``ElementWiseBinaryGradOp``
  takes GradOut, In0, In1 and Out, so autodiff makes it available even when
  our rule does not read it: after ``autodiff`` of ``x * W + b`` the forward
  graph has the 2 outputs PopXL gives it).
* **cost**: the op's cost class in the IPU model (``ipuxl.profile``,
  ``cpp/model``) and its parameters, a :class:`Cost` (or a class name):
  which estimator prices the op (``COST_CLASSES``, the core's
  ``CostClass``: ``"elementwise"``, ``"matmul"``, ``"conv"``, ``"pool"``,
  ``"norm"``, ``"reduce"``, ``"gather"``, ``"random"``, ...). Every kernel
  op declares one: the model refuses a kernel op without, and
  ``ipu_model_tests/ir`` checks every registered op. Ops of the other kinds
  are costed by their kind (``"program"``, the default for them).
* **merge**: what ``popxl.transforms.merge_exchange`` may do with the op:
  ``"exchange"`` (host and remote loads and stores, code loads, a
  MultiExchange: merged into one exchange), ``"init"`` (Init: may be
  scheduled before the exchange it feeds) or None (ends a group).
* **gradient**: a rule registered with :func:`ipuxl.grad.register_grad`
  beside the builder, a decomposition autodiff differentiates instead, or
  ``no_grad``: the reason the op has none (integer outputs, side effects,
  an optimizer update...).

Autodiff, the lowering, the host passes and the C++ core read traits from
here (the core receives them as typed fields of each op record); nothing
tests an op's type string to learn a trait. ``ipu_model_tests/ir`` checks
that every op a builder can create is registered, and that every registered
op has a kernel and a gradient rule or a reason.
"""
import importlib
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

from ._core_loader import core

__all__ = ["OpDef", "Cost", "define_op", "get_opdef", "registered_ops", "KINDS",
           "COST_CLASSES"]

#: Op kinds: the C++ core's ``OpKind`` (its names, in code order); then
#: ``"multi_exchange"``, which never reaches the core: the lowering emits a
#: MultiExchange's members (``popxl.transforms.merge_exchange``) in its place.
KINDS = tuple(core.OpKind.__members__) + ("multi_exchange",)
#: Cost classes of the IPU model: the core's ``CostClass`` but "none".
COST_CLASSES = tuple(n for n in core.CostClass.__members__ if n != "none")
# The enums' members, read once (pybind11 builds ``__members__`` anew on each access).
_COST_CODES = dict(core.CostClass.__members__)
_KIND_CODES = dict(core.OpKind.__members__)


@dataclass(frozen=True)
class Cost:
    """An op's cost class in the IPU model and the parameters its estimator
    reads (``cpp/model/costs.cpp``).

    ``vertex`` names the op in its vertex type (``"Exp"``:
    ``popops::UnaryOp<Exp,float32>``; default the op type: in-place variants
    give their out-of-place op's). For ``"elementwise"``, ``header``,
    ``per_vector`` (worker cycles before the loop, per vector) and
    ``unroll`` (elements per vector) are each ``(any dtype but float16,
    float16)``; 0 keeps the class's default (poplibs' UnaryOp/BinaryOp
    figures, shared/reference/ipu_model.md §3.1). ``flops``: the op's FLOP
    count as ``popxl_addons.performance_utils`` gives it (``flops(op) ->
    int``), for the op types it counts; None for the others.
    """

    cls: str
    vertex: Optional[str] = None
    header: Tuple[int, int] = (0, 0)
    per_vector: Tuple[int, int] = (0, 0)
    unroll: Tuple[int, int] = (0, 0)
    flops: Optional[Callable] = None

    def __post_init__(self):
        if self.cls not in COST_CLASSES:
            raise ValueError(f"Cost: the class must be one of {COST_CLASSES}, got {self.cls!r}")
        for f in ("header", "per_vector", "unroll"):
            v = getattr(self, f)
            if len(v) != 2 or any(not isinstance(x, int) or x < 0 for x in v):
                raise ValueError(f"Cost({self.cls!r}): {f} must be two ints >= 0 (other dtypes, "
                                 f"float16), got {v!r}")

    @property
    def code(self):
        """The core's ``CostClass`` value."""
        return _COST_CODES[self.cls]

Pairs = Tuple[Tuple[int, int], ...]
PairsRule = Union[Pairs, Callable[..., Sequence[Tuple[int, int]]]]
IndexRule = Union[Tuple[int, ...], Callable[..., Sequence[int]]]


class OpDef:
    """The declaration of one op type (see the module docstring)."""

    __slots__ = ("type", "shape", "kind", "kernel", "_aliases", "_modifies", "side_effects",
                 "recomputable", "stash_outputs", "no_grad", "module", "cost", "merge")

    def __init__(self, type: str, shape: Callable, *, kind: str = "kernel",  # noqa: A002
                 kernel: Optional[str] = None, aliases: PairsRule = (),
                 modifies: IndexRule = (), side_effects: bool = False,
                 recomputable: bool = True, stash_outputs: bool = False,
                 no_grad: Optional[str] = None, module: str = "",
                 cost: Union[Cost, str, None] = None, merge: Optional[str] = None):
        if kind not in KINDS:
            raise ValueError(f"OpDef {type!r}: kind must be one of {KINDS}, got {kind!r}")
        if not callable(shape):
            raise TypeError(f"OpDef {type!r}: the shape rule must be callable")
        self.type = type
        self.shape = shape
        self.kind = kind
        self.kernel = (kernel or type) if kind == "kernel" else None
        self._aliases = aliases
        self._modifies = modifies
        self.side_effects = bool(side_effects)
        self.recomputable = bool(recomputable)
        self.stash_outputs = bool(stash_outputs)
        self.no_grad = no_grad
        self.module = module
        if cost is None and kind != "kernel":
            cost = "program"  # program structure: costed by its kind
        if isinstance(cost, str):
            cost = Cost(cost)
        if cost is not None and not isinstance(cost, Cost):
            raise TypeError(f"OpDef {type!r}: cost must be an ipuxl.opdef.Cost or a class name, "
                            f"got {cost!r}")
        if cost is not None and (cost.cls == "program") != (kind != "kernel"):
            raise ValueError(f"OpDef {type!r}: cost class 'program' is for ops that are not "
                             f"kernels, and only for them (kind {kind!r}, cost {cost.cls!r})")
        #: None: not declared (a kernel op the IPU model cannot price).
        self.cost: Optional[Cost] = cost
        if merge not in (None, "exchange", "init"):
            raise ValueError(f"OpDef {type!r}: merge must be None, 'exchange' or 'init', got "
                             f"{merge!r}")
        self.merge = merge

    def infer(self, inputs, attrs, graphs=()):
        """The shape rule's ``[(shape, dtype), ...]``; its errors name the op type."""
        try:
            return self.shape(inputs, attrs, graphs)
        except (ValueError, TypeError) as e:
            msg = str(e)
            if msg.split(":")[0].strip().lower() in (self.type.lower(), "broadcast"):
                msg = msg.split(":", 1)[1].strip()
            raise type(e)(f"{self.type}: {msg}") from None

    @property
    def cost_class(self) -> Optional[str]:
        """The name of its cost class, None when it declares none."""
        return self.cost.cls if self.cost is not None else None

    @property
    def kind_code(self):
        """The core's ``OpKind`` value (not for "multi_exchange")."""
        return _KIND_CODES[self.kind]

    def aliases(self, inputs, attrs, graphs=()) -> Pairs:
        """The output/input pairs sharing storage for these inputs and attributes."""
        a = self._aliases
        if not a:
            return ()
        return tuple(tuple(p) for p in (a(inputs, attrs, graphs) if callable(a) else a))

    def modifies(self, inputs, attrs, graphs=()) -> Tuple[int, ...]:
        """The input indices an op with these inputs and attributes writes."""
        m = self._modifies
        return tuple(m(inputs, attrs, graphs) if callable(m) else m)

    def __repr__(self):
        traits = [t for t in ("side_effects", "stash_outputs") if getattr(self, t)]
        if not self.recomputable:
            traits.append("not recomputable")
        where = self.kernel if self.kind == "kernel" else self.kind
        return f"OpDef({self.type} -> {where}{', ' if traits else ''}{', '.join(traits)})"


_REGISTRY: Dict[str, OpDef] = {}
_ALL_LOADED = False


def define_op(type: str, shape: Callable, **traits) -> OpDef:  # noqa: A002
    """Declare op type ``type``; see :class:`OpDef` for the arguments.
    Declaring a type twice is an error (two modules would disagree)."""
    import inspect

    if type in _REGISTRY:
        raise ValueError(f"op type {type!r} is already declared in {_REGISTRY[type].module}")
    frame = inspect.currentframe()
    module = frame.f_back.f_globals.get("__name__", "") if frame and frame.f_back else ""
    d = OpDef(type, shape, module=module, **traits)
    _REGISTRY[type] = d
    return d


def _load_all() -> None:
    global _ALL_LOADED
    if not _ALL_LOADED:
        _ALL_LOADED = True
        importlib.import_module("ipuxl.ops").import_all()


def get_opdef(type: str) -> OpDef:  # noqa: A002
    """The declaration of ``type``. Op families are imported on first use,
    so an unknown type first imports them all; still unknown is an error."""
    d = _REGISTRY.get(type)
    if d is None:
        _load_all()
        d = _REGISTRY.get(type)
        if d is None:
            raise NotImplementedError(
                f"op type {type!r} is not declared in ipuxl's op registry (ipuxl.opdef)")
    return d


def registered_ops() -> Dict[str, OpDef]:
    """Every declared op type (all op families imported)."""
    _load_all()
    return dict(sorted(_REGISTRY.items()))
