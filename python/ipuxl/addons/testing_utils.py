"""Test helpers of ``popxl_addons.testing_utils``: run one ``Module`` on
host data and get its outputs back, and count ops by type."""
from typing import Callable, Dict, Iterable, List, Optional, Union

import numpy as np

from .. import dtypes
from ..ir import Ir
from ..session import Session
from ..tensor import Tensor, Variable, variable
from .module import Module
from .named_tensors import NamedTensors
from .ops import host_store

__all__ = ["TensorInput", "run_module", "ops_of_type"]


def ops_of_type(ops: Iterable, op_type: Union[type, str]) -> int:
    """How many of ``ops`` are of ``op_type``: a class (``isinstance``) or an
    op type name such as ``"MatMul"``."""
    if isinstance(op_type, str):
        return sum(1 for op in ops if getattr(op, "type", None) == op_type)
    return sum(1 for op in ops if isinstance(op, op_type))


class TensorInput:
    """Host data to pass to :func:`run_module` where the module takes a
    tensor: it becomes a variable of ``dtype`` (default: the array's
    dtype)."""

    def __init__(self, data: np.ndarray, dtype: Optional[dtypes.dtype] = None) -> None:
        self.data = data
        self.dtype = dtype


def run_module(module: Module, *args,
               weights: Optional[Union[Callable[[NamedTensors], Dict[Variable, np.ndarray]],
                                       Dict[Variable, np.ndarray]]] = None,
               **kwargs) -> List[np.ndarray]:
    """Build ``module`` on ``args``/``kwargs`` in a new Ir (each
    :class:`TensorInput` becomes a variable; other arguments are passed as
    they are), initialise its variables, call it once, and return its outputs
    as NumPy arrays. ``weights`` (a mapping ``variable -> array``, or a
    callable taking the module's variables and returning one) overwrites
    variables before the run."""

    def as_arg(a):
        if isinstance(a, TensorInput):
            dt = a.dtype if a.dtype is not None else dtypes.dtype.as_dtype(np.asarray(a.data))
            return variable(a.data, dtype=dt)
        return a

    ir = Ir()
    with ir.main_graph:
        call_args = [as_arg(a) for a in args]
        call_kwargs = {k: as_arg(v) for k, v in kwargs.items()}
        factories, graph = module.create_graph(*call_args, **call_kwargs)
        variables = factories.init()
        outputs = graph.bind(variables).call(
            *[a for a in call_args if isinstance(a, Tensor)],
            **{k: a for k, a in call_kwargs.items() if isinstance(a, Tensor)})
        streams = [host_store(o) for o in outputs]

    with Session(ir, "ipu_model") as session:
        if weights is not None:
            if callable(weights):
                weights = weights(variables)
            session.write_variables_data(weights)
        results = session.run()
    return [results[s] for s in streams]
