"""``Module``: a ``popxl.Module`` whose variables are declared while its
graph is built (``popxl_addons.module``).

``build`` adds its weights with ``self.add_variable_input(name, data_iter,
dtype)``; each call creates a graph input and a ``VariableFactory``.
``create_graph(*args)`` traces ``build`` into a subgraph and returns
``(NamedVariableFactories, GraphWithNamedArgs)``: the caller initialises the
variables (``facts.init()``) and binds them (``graph.bind(vars).call(x)``).

Submodules assigned as attributes (``self.fc1 = Linear(512)``) are inlined
when called from ``build``: their ops go into the parent's graph under the
name scope ``fc1`` and their inputs appear under the key ``fc1.*``. To
outline instead, build the child's graph and add its inputs with
``add_variable_inputs``, or use ``call_module``.

Modules hold no state between builds: after ``create_graph`` the factory and
input trees (shared with submodules) are emptied.
"""
import inspect
import warnings
from contextlib import contextmanager
from functools import wraps
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from .. import dtypes
from ..context import gir, name_scope
from ..graph import Graph
from ..replica_grouping import ReplicaGrouping
from ..module import Module as _PopxlModule
from ..tensor import Tensor, graph_output
from ..transforms.autodiff import ExpectedConnection, ExpectedConnectionType, GradGraphInfo
from .graph import BoundGraph, GraphWithNamedArgs, _normalise_grad_info_map
from .graph_cache import GraphCache
from .named_tensors import NamedTensors
from .utils import OrderedDict, duplicate_items, overrides
from .variable_factory import (NamedVariableFactories, VariableFactory, add_replica_sharded_variable_input,
                               add_variable_input)

__all__ = ["Module", "NameScopeMeta", "create_grad_graph_info", "GraphLike", "GradGraphInfoLike"]

GraphLike = Union[Graph, GraphWithNamedArgs, BoundGraph]
GradGraphInfoLike = Union[GradGraphInfo, GraphWithNamedArgs]

_BUILD_CONTEXT: List["Module"] = []
_BUILD_GRAD_CONTEXT: List["Module"] = []


@contextmanager
def _context(stack: list, module: "Module"):
    stack.append(module)
    try:
        yield
    finally:
        stack.pop()


def _current(stack: list) -> Optional["Module"]:
    return stack[-1] if stack else None


class NameScopeMeta(type):
    """Wraps every ``build`` defined in a class body so that it runs under
    ``popxl.name_scope(self._name_scope)`` once a parent module has named it."""

    def __new__(mcs, name, bases, dct):
        fn = dct.get("build")
        if fn is not None and callable(fn):
            @wraps(fn)
            def build(self, *args, **kwargs):
                scope = self.__dict__.get("_name_scope")
                if scope is None:
                    return fn(self, *args, **kwargs)
                with name_scope(scope):
                    return fn(self, *args, **kwargs)

            dct["build"] = build
        return super().__new__(mcs, name, bases, dct)


class _Aux:
    """Forward tensors a ``build_grad`` needs: set in ``build``
    (``self.aux["x"] = x``), read in ``build_grad`` (``self.aux["x"]``,
    which becomes a gradient-graph input stitched to that forward tensor)."""

    def __init__(self):
        self._dict: Dict[str, Any] = OrderedDict()
        self._grad_to_fwd: Dict[Tensor, Tensor] = OrderedDict()
        self._key_to_tensor: Dict[str, Tensor] = OrderedDict()

    def __setitem__(self, key, value):
        self._dict[key] = value

    def __getitem__(self, key):
        from ..tensor import graph_input

        module = _current(_BUILD_GRAD_CONTEXT)
        if module is None or module.aux is not self:
            raise RuntimeError("aux: you can only get items within the `build_graph` method "
                               "(`build_grad`), which runs through `create_grad_graph` or "
                               "`autodiff`")
        value = self._dict[key]
        if not isinstance(value, Tensor):
            return value
        if key not in self._key_to_tensor:
            t = graph_input(value.shape, value.dtype, key, False, value.meta_shape or None)
            self._key_to_tensor[key] = t
            self._grad_to_fwd[t] = value
        return self._key_to_tensor[key]

    def __contains__(self, key) -> bool:
        return key in self._dict

    def copy(self) -> "_Aux":
        new = _Aux()
        new._dict = OrderedDict(self._dict)
        new._grad_to_fwd = OrderedDict(self._grad_to_fwd)
        new._key_to_tensor = OrderedDict(self._key_to_tensor)
        return new

    def __repr__(self):
        return repr(self._dict)


class _VarGrads:
    """``self.var_grad[name] = g`` in ``build_grad`` declares the gradient
    of the forward variable input ``name``."""

    def __init__(self, variables: Optional[Dict[str, Tensor]] = None):
        self._dict: Dict[str, Tensor] = OrderedDict()
        self._vars = variables

    def _check(self):
        module = _current(_BUILD_GRAD_CONTEXT)
        if module is None or module.var_grad is not self or self._vars is None:
            raise RuntimeError("var_grad can only be used within the `build_graph` method "
                               "(`build_grad`), which runs through `create_grad_graph` or "
                               "`autodiff`")

    def __getitem__(self, key):
        self._check()
        return self._dict[key]

    def __setitem__(self, key, tensor):
        self._check()
        if not isinstance(tensor, Tensor):
            raise TypeError(f"var_grad[{key!r}]: Not a tensor: {tensor!r}")
        if key not in self._vars:
            raise KeyError(f"var_grad: Not a variable: {key!r}. Variables of the forward graph: "
                           f"{list(self._vars)}")
        var = self._vars[key]
        if var.shape != tensor.shape or var.meta_shape != tensor.meta_shape:
            raise ValueError(f"var_grad[{key!r}]: Shape or meta-shape of Tensor does not match "
                             f"variable. Tensor: {tensor.shape} (meta-shape {tensor.meta_shape}), "
                             f"variable: {var.shape} (meta-shape {var.meta_shape})")
        self._dict[key] = tensor

    def __contains__(self, key) -> bool:
        return key in self._dict

    def __repr__(self):
        return repr(self._dict)


class _CalledGraphsGradInfoRefs:
    """``{forward graph: GradGraphInfo}`` of a module, with sub-maps of its
    submodules held by reference (they fill them while the parent builds)."""

    def __init__(self, mapping: Optional[Mapping] = None):
        self.map: Dict[Graph, GradGraphInfo] = _normalise_grad_info_map(mapping)
        self.submaps: List["_CalledGraphsGradInfoRefs"] = []

    def consolidate(self) -> Dict[Graph, GradGraphInfo]:
        out: Dict[Graph, GradGraphInfo] = {}
        for sub in self.submaps:
            out.update(sub.consolidate())
        out.update(self.map)  # this module's own entries win
        return out

    def add(self, fwd: GraphLike, grad: GradGraphInfoLike) -> None:
        self.map.update(_normalise_grad_info_map({fwd: grad}))

    def add_submap(self, sub) -> None:
        if not isinstance(sub, _CalledGraphsGradInfoRefs):
            sub = _CalledGraphsGradInfoRefs(sub)
        self.submaps.append(sub)

    def clear(self) -> None:
        for sub in self.submaps:
            sub.clear()
        self.map = {}


class Module(_PopxlModule, metaclass=NameScopeMeta):
    """Base class of stateful graph builders.

    Args:
        cache: reuse graphs across ``create_graph`` calls with compatible
            arguments (a GraphCache keyed on this module and the argument
            specs). Any truthy value enables it.
        grad_inlining_error: what happens when a module implementing
            ``build_grad`` is inlined (called directly): "error", "warning"
            or "none".

    Raises:
        ValueError: invalid ``grad_inlining_error``, or ``cache`` combined
            with ``build_grad``.
    """

    def __init__(self, cache: bool = False, grad_inlining_error: str = "error"):
        d = self.__dict__
        d["_variable_factories"] = NamedVariableFactories()
        d["_named_inputs"] = NamedTensors()
        d["_graph_cache"] = GraphCache() if cache else None
        d["_args_cache"] = {}
        d["aux"] = _Aux()
        d["var_grad"] = _VarGrads()
        d["called_graphs_grad_info"] = _CalledGraphsGradInfoRefs()
        if grad_inlining_error not in ("error", "warning", "none"):
            raise ValueError("grad_inlining_error should be one of 'error', 'warning', 'none', "
                             f"not {grad_inlining_error!r}")
        d["grad_inlining_error"] = grad_inlining_error
        if cache and self.implements_grad_graph:
            raise ValueError("You cannot use graph caching if you have implemented `build_grad`.")

    # ---- building
    def __call__(self, *args, **kwargs):
        """Inline ``build`` into the current graph."""
        self._require_init()
        if self.implements_grad_graph and _current(_BUILD_CONTEXT) is not self:
            msg = ("You are calling this module directly but `build_grad` has been implemented: "
                   "autodiff would not use `build_grad`. Create a graph of the module and call "
                   "it instead (e.g. `self.call_module`), or set grad_inlining_error='none'.")
            if self.grad_inlining_error == "error":
                raise RuntimeError(msg)
            if self.grad_inlining_error == "warning":
                warnings.warn(msg)
        return self.build(*args, **kwargs)

    def build_grad(self, *args, **kwargs):
        """Optionally implement the gradient graph by hand; see ``create_grad_graph``."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement `build_grad` to create a gradient graph")

    @property
    def implements_grad_graph(self) -> bool:
        """Whether this class overrides ``build_grad``."""
        return overrides(type(self), Module, "build_grad")

    def _require_init(self):
        if "_variable_factories" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() "
                               "before the module is used")

    def _reset(self) -> None:
        # _clear keeps nested trees, so submodules sharing them are reset too.
        self._variable_factories._clear()
        self._named_inputs._clear()
        self.called_graphs_grad_info.clear()
        self.__dict__["aux"] = _Aux()
        self.__dict__["var_grad"] = _VarGrads()

    def create_graph(self, *args, **kwargs) -> Tuple[NamedVariableFactories, GraphWithNamedArgs]:
        """Trace ``build(*args, **kwargs)`` into a new subgraph.

        Tensor and TensorSpec arguments become graph inputs (by reference
        when annotated ``popxl.TensorByRef``), other values are baked in;
        variable inputs follow in creation order.

        Returns:
            ``(factories, graph)``: copies; the module is reset afterwards.
        """
        self._require_init()
        if self._graph_cache is not None:
            graph = self._graph_cache.create_graph(self, *args, **kwargs)
            if graph not in self._args_cache:
                self._args_cache[graph] = (self._variable_factories.copy(), self._named_inputs.copy())
            facts, inputs = self._args_cache[graph]
        else:
            self.__dict__["aux"] = _Aux()
            with _context(_BUILD_CONTEXT, self):
                graph = gir().create_graph(self, *args, **kwargs)
            if self.implements_grad_graph:
                # Autodiff of a caller must use the hand-written gradient.
                graph._can_be_recursively_autodiffed = False
            facts, inputs = self._variable_factories, self._named_inputs
        gwna = GraphWithNamedArgs(graph, inputs.copy(), from_module=self, aux=self.aux.copy(),
                                  called_graphs_grad_info=self.called_graphs_grad_info.consolidate())
        facts = facts.copy()
        self._reset()
        return facts, gwna

    # ---- hand-written gradients (popxl_addons 3.4)
    def create_grad_graph(self, fwd_graph: GraphWithNamedArgs,
                          grads_provided: Optional[Iterable[Tensor]] = None,
                          grads_required: Optional[Iterable[Tensor]] = None) -> GraphWithNamedArgs:
        """Build the gradient graph of ``fwd_graph`` with ``build_grad``.

        ``build_grad`` takes one gradient per ``grads_provided`` (default:
        all forward outputs) and returns the gradients of the non-variable
        ``grads_required`` (default: all forward inputs), in order; it sets
        ``self.var_grad[key]`` for the required variable inputs and reads
        forward tensors stashed in ``build`` through ``self.aux[key]``. Those
        aux tensors are added as outputs of ``fwd_graph`` (so call it after
        this), and the returned graph's ``grad_graph_info`` connects them.
        """
        if not self.implements_grad_graph:
            raise RuntimeError("create_grad_graph needs `build_grad` to be implemented")
        if not isinstance(fwd_graph, GraphWithNamedArgs):
            raise TypeError("create_grad_graph expects a GraphWithNamedArgs")
        for pname, p in inspect.signature(self.build_grad).parameters.items():
            if p.kind not in (inspect.Parameter.POSITIONAL_ONLY,
                              inspect.Parameter.POSITIONAL_OR_KEYWORD):
                raise TypeError("The `build_grad` method signature must only have a fixed number of "
                                "positional parameters as inputs. Not a positional parameter: "
                                f"{pname!r}")
        fg = fwd_graph.graph
        provided = self._check_subset(grads_provided, fg.outputs, "grads_provided", "output")
        required = self._check_subset(grads_required, fg.inputs, "grads_required", "input")
        name_to_var = fwd_graph.args.to_dict()
        var_to_name = {t: k for k, t in name_to_var.items()}
        req_vars = OrderedDict((var_to_name[t], t) for t in required if t in var_to_name)
        req_other = [t for t in required if t not in var_to_name]

        ir = gir()
        self.__dict__["var_grad"] = _VarGrads(dict(name_to_var))
        self.__dict__["aux"] = fwd_graph._aux.copy() if fwd_graph._aux is not None else _Aux()
        with _context(_BUILD_GRAD_CONTEXT, self):
            grad_graph = ir.create_graph(self.build_grad, *provided)
        missing = [k for k in req_vars if k not in self.var_grad._dict]
        if missing:
            raise RuntimeError(f"Not all variable gradients have been specified in self.var_grad: "
                               f"{missing} are missing (pass grads_required to request fewer "
                               "gradients)")
        outs = list(grad_graph.outputs)
        if len(outs) > len(req_other):
            raise RuntimeError(f"Too many outputs in the grad graph: build_grad returned {len(outs)} "
                               f"gradients, `grads_required` has {len(req_other)} non-variable "
                               "inputs (pass grads_required to request fewer gradients)")
        if len(outs) < len(req_other):
            raise RuntimeError("Not all forward graph inputs have been specified as outputs in the "
                               f"grad graph: build_grad returned {len(outs)} gradients, "
                               f"`grads_required` has {len(req_other)} non-variable inputs")
        for i, (o, t) in enumerate(zip(outs, req_other)):
            if o.shape != t.shape or o.meta_shape != t.meta_shape:
                raise ValueError(f"Shape or meta-shape of output Tensor at position {i} does not "
                                 f"match the `grads_required` tensor at position {i}: {o.shape} "
                                 f"(meta-shape {o.meta_shape}) against {t.shape} (meta-shape "
                                 f"{t.meta_shape})")
        with grad_graph:
            for k in req_vars:
                graph_output(self.var_grad._dict[k])
        with fg:
            for v in self.aux._dict.values():
                if isinstance(v, Tensor) and v not in fg.outputs:
                    graph_output(v)
        in_map = OrderedDict(zip(grad_graph.inputs, provided))
        in_map.update(self.aux._grad_to_fwd)
        out_map = OrderedDict(zip(grad_graph.outputs, req_other + list(req_vars.values())))
        info = create_grad_graph_info(ir, fg, grad_graph, in_map, out_map,
                                      set(self.aux._grad_to_fwd.values()))
        self._reset()
        return GraphWithNamedArgs.from_grad_graph(info)

    @staticmethod
    def _check_subset(ts, allowed, what, role) -> List[Tensor]:
        if ts is None:
            return list(allowed)
        ts = list(ts)
        for t in ts:
            if not isinstance(t, Tensor) or t not in allowed:
                # (popxl_addons' wording, which programs match on)
                raise ValueError(f"A Tensor specified in `{what}` is not a {role} of `fwd_graph` "
                                 f"or not a Tensor: {t}")
        dups = duplicate_items(ts)
        if dups:
            raise ValueError(f"Tensors listed more than once in `{what}`: {dups}")
        return ts

    # ---- variables
    def add_variable_input(self, name: str, data_iter, dtype: Optional[dtypes.dtype] = None,
                           by_ref: bool = False, replica_grouping: Optional[ReplicaGrouping] = None,
                           overwrite: bool = False) -> Tensor:
        """Add a graph input in the current graph and the VariableFactory that
        initialises it, both under ``name`` (``overwrite`` merges dotted names).

        Args:
            data_iter: callable returning a host array, or an iterable of them.
            dtype: dtype (default: inferred from the data).
            by_ref: pass the input by reference.
            replica_grouping: replicas with identical data.
        """
        self._require_init()
        t, f = add_variable_input(name, data_iter, dtype, by_ref, replica_grouping)
        self._variable_factories.insert(name, f, overwrite=overwrite)
        self._named_inputs.insert(name, t, overwrite=overwrite)
        return t

    def add_replica_sharded_variable_input(self, name: str, data_iter,
                                           dtype: Optional[dtypes.dtype] = None, by_ref: bool = False,
                                           replica_grouping: Optional[ReplicaGrouping] = None,
                                           shard_over: Optional[int] = None) -> Tensor:
        """Like ``add_variable_input`` but the input is a replica shard; the
        factory still initialises the whole tensor."""
        self._require_init()
        t, f = add_replica_sharded_variable_input(name, data_iter, dtype, by_ref, replica_grouping,
                                                  shard_over)
        self._variable_factories.insert(name, f)
        self._named_inputs.insert(name, t)
        return t

    def add_variable_factory(self, variable_f: VariableFactory, name: Optional[str] = None) -> Tensor:
        """Add a graph input for an existing factory (under ``name`` or its own name)."""
        self._require_init()
        if not isinstance(variable_f, VariableFactory):
            raise TypeError(f"add_variable_factory expects a VariableFactory, got "
                            f"{type(variable_f).__name__}")
        t = variable_f.create_input()
        key = name or variable_f.name
        self._variable_factories.insert(key, variable_f)
        self._named_inputs.insert(key, t)
        return t

    def add_variable_inputs(self, name: Union[str, int], variable_f: NamedVariableFactories,
                            overwrite: bool = False) -> NamedTensors:
        """Add a graph input for every factory of ``variable_f`` (another
        graph's factories) under ``name``; returns them as NamedTensors.

        The outlining idiom::

            facts, g = Linear(512).create_graph(x)
            y, = g.bind(self.add_variable_inputs("fc2", facts)).call(x)
        """
        self._require_init()
        if isinstance(name, int) and not isinstance(name, bool):
            if name < 0:
                raise ValueError(f"add_variable_inputs: an int name must be non-negative, got {name}")
            name = str(name)
        if not isinstance(variable_f, NamedVariableFactories):
            raise TypeError("add_variable_inputs expects NamedVariableFactories, got "
                            f"{type(variable_f).__name__}")
        tensors = NamedTensors.from_dict({k: f.create_input() for k, f in variable_f.to_dict().items()})
        self._variable_factories.insert(name, variable_f.copy(), overwrite=overwrite)
        self._named_inputs.insert(name, tensors, overwrite=overwrite)
        return tensors

    # ---- submodules
    def set_name_scope(self, name: str) -> None:
        self.__dict__["_name_scope"] = name

    def __setattr__(self, key: str, value: Any) -> None:
        if isinstance(value, Module):
            self._require_init()
            value.set_name_scope(key)
            # Shared by reference: the child's variables land under `key`.
            self._variable_factories.insert(key, value._variable_factories)
            self._named_inputs.insert(key, value._named_inputs)
            self.called_graphs_grad_info.add_submap(value.called_graphs_grad_info)
        super().__setattr__(key, value)

    @classmethod
    def from_list(cls, sub_modules: List["Module"]) -> "Module":
        """A module whose submodules are named "0", "1", ... (iterable)."""
        self = cls()
        for i, m in enumerate(sub_modules):
            setattr(self, str(i), m)
        self.__dict__["_sub_modules"] = list(sub_modules)
        return self

    @classmethod
    def from_variable_factories(cls, inputs: List[VariableFactory]) -> "Module":
        """A module with one variable input per factory, named "0", "1", ..."""
        self = cls()
        for i, f in enumerate(inputs):
            setattr(self, str(i), self.add_variable_factory(f, name=str(i)))
        return self

    def get(self, key: Union[str, int]):
        return getattr(self, str(key) if isinstance(key, int) else key)

    def __getitem__(self, key: Union[str, int]):
        return self.get(key)

    def __iter__(self):
        subs = self.__dict__.get("_sub_modules")
        if subs is None:
            raise AttributeError("Only modules created with Module.from_list can be iterated")
        return iter(subs)

    def call_module(self, module: "Module", name: Optional[str] = None, autodiff: str = "auto",
                    grads_provided: Optional[Callable] = None,
                    grads_required: Optional[Callable] = None) -> "_CallModule":
        """Outline ``module``: returns a callable that creates its graph, adds
        its variables under ``name`` (default: the class name), differentiates
        it when asked (``autodiff`` "autodiff"/"build_grad", or "auto" for
        modules implementing ``build_grad``; the gradient is recorded in
        ``called_graphs_grad_info``) and calls it, returning its outputs.

        ``grads_provided``/``grads_required`` are callables mapping the child
        GraphWithNamedArgs to tensor lists.
        """
        if autodiff not in ("auto", "build_grad", "autodiff", "none"):
            raise ValueError(f"call_module: autodiff must be 'auto', 'build_grad', 'autodiff' or "
                             f"'none', not {autodiff!r}")
        return _CallModule(self, module, name, autodiff, grads_provided, grads_required)


class _CallModule:
    def __init__(self, caller: Module, callee: Module, name: Optional[str], autodiff: str,
                 grads_provided, grads_required):
        self.caller = caller
        self.callee = callee
        self.name = name or type(callee).__name__
        self.autodiff = autodiff
        self.grads_provided = grads_provided
        self.grads_required = grads_required

    def __call__(self, *args, **kwargs) -> Tuple[Tensor, ...]:
        facts, graph = self.callee.create_graph(*args, **kwargs)
        graph_vars = self.caller.add_variable_inputs(self.name, facts)
        self.caller.called_graphs_grad_info.add_submap(graph.called_graphs_grad_info)
        n_out = len(graph.graph.outputs)
        if not (self.autodiff == "none" or
                (self.autodiff == "auto" and not self.callee.implements_grad_graph)):
            # Before the call site: autodiff adds outputs to the forward graph.
            gp = self.grads_provided(graph) if self.grads_provided else None
            gr = self.grads_required(graph) if self.grads_required else None
            grad = graph.autodiff(method=self.autodiff, grads_provided=gp, grads_required=gr)
            self.caller.called_graphs_grad_info.add(graph, grad)
        tensor_args = [a for a in args if isinstance(a, (Tensor, list, tuple))]
        tensor_args += [v for v in kwargs.values() if isinstance(v, Tensor)]
        outs = graph.bind(graph_vars).call(*tensor_args)
        self.var_factories, self.graph, self.n_outputs_pre_autodiff = facts, graph, n_out
        return outs[:n_out]


def create_grad_graph_info(ir, fwd_graph: Graph, grad_graph: Graph,
                           grad_input_to_fwd_output: Mapping[Tensor, Tensor],
                           grad_output_to_fwd_input: Mapping[Tensor, Tensor],
                           fwd_tensors: Iterable[Tensor]) -> GradGraphInfo:
    """A GradGraphInfo for a hand-built gradient graph.

    Args:
        grad_input_to_fwd_output: every gradient-graph input, in order, to the
            forward tensor it connects to: a ``Fwd`` connection (the tensor
            itself) when that tensor is in ``fwd_tensors``, else ``FwdGrad``
            (its gradient).
        grad_output_to_fwd_input: every gradient-graph output, in order, to
            the forward input whose gradient it is.
    """
    fwd_set = set(fwd_tensors)
    if list(grad_input_to_fwd_output) != list(grad_graph.inputs):
        raise ValueError("create_grad_graph_info: grad_input_to_fwd_output must list the gradient "
                         "graph's inputs in order")
    if list(grad_output_to_fwd_input) != list(grad_graph.outputs):
        raise ValueError("create_grad_graph_info: grad_output_to_fwd_input must list the gradient "
                         "graph's outputs in order")
    ins = [ExpectedConnection._create(
        f, ExpectedConnectionType.Fwd if f in fwd_set else ExpectedConnectionType.FwdGrad)
        for f in grad_input_to_fwd_output.values()]
    outs = [ExpectedConnection._create(f, ExpectedConnectionType.FwdGrad)
            for f in grad_output_to_fwd_input.values()]
    return GradGraphInfo._create(grad_graph, fwd_graph, ins, outs)
