"""``GradGraphInfo`` and its connections: what ``autodiff`` returns, with
PopXL's contract (``popxl.transforms.autodiff.GradGraphInfo``; see
:mod:`ipuxl.transforms.autodiff` for how the connections are ordered)."""
from enum import Enum
from typing import Dict, Sequence, Tuple

from ..graph import Graph
from ..tensor import Tensor

__all__ = ["GradGraphInfo", "ExpectedConnection", "ExpectedConnectionType"]


class ExpectedConnectionType(Enum):
    """Whether a gradient-graph input/output is a forward tensor (``Fwd``) or
    the gradient of one (``FwdGrad``)."""
    Fwd = "Fwd"
    FwdGrad = "FwdGrad"


class ExpectedConnection:
    """One input or output of a gradient graph: a forward tensor (``Fwd``) or
    the gradient of one (``FwdGrad``). Created by autodiff only; constructing
    one directly raises TypeError."""

    def __init__(self):
        raise TypeError("ExpectedConnection should not be constructed directly; it is created "
                        "by popxl.transforms.autodiff")

    @classmethod
    def _create(cls, fwd_tensor: Tensor, kind: ExpectedConnectionType):
        self = object.__new__(cls)
        self._fwd_tensor = fwd_tensor
        self._type = kind
        return self

    @property
    def fwd_tensor(self) -> Tensor:
        """The forward tensor this connection is about."""
        return self._fwd_tensor

    @property
    def connection_type(self) -> ExpectedConnectionType:
        return self._type

    def __repr__(self):
        return f"({self._type}, {self._fwd_tensor})"


class GradGraphInfo:
    """The result of :func:`autodiff`: the gradient graph and how to connect
    it. Constructing one directly raises TypeError."""

    def __init__(self):
        raise TypeError("GradGraphInfo should not be constructed directly; use "
                        "popxl.transforms.autodiff")

    @classmethod
    def _create(cls, graph: Graph, forward_graph: Graph,
                expected_inputs: Sequence[ExpectedConnection],
                expected_outputs: Sequence[ExpectedConnection]):
        self = object.__new__(cls)
        self._graph = graph
        self._fwd = forward_graph
        self._ins = tuple(expected_inputs)
        self._outs = tuple(expected_outputs)
        return self

    @property
    def graph(self) -> Graph:
        """The gradient graph."""
        return self._graph

    @property
    def forward_graph(self) -> Graph:
        """The graph that was differentiated."""
        return self._fwd

    @property
    def expected_inputs(self) -> Tuple[ExpectedConnection, ...]:
        """One connection per input of the gradient graph, in input order."""
        return self._ins

    @property
    def expected_outputs(self) -> Tuple[ExpectedConnection, ...]:
        """One ``FwdGrad`` connection per output of the gradient graph."""
        return self._outs

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        """The forward tensors of ``expected_inputs``."""
        return tuple(ec.fwd_tensor for ec in self._ins)

    @property
    def outputs(self) -> Tuple[Tensor, ...]:
        """The forward tensors whose gradients ``expected_outputs`` are."""
        return tuple(ec.fwd_tensor for ec in self._outs)

    def inputs_dict(self, fwd_call_info) -> Dict[Tensor, Tensor]:
        """``{gradient-graph input: parent tensor}`` for every ``Fwd``
        connection, resolved through a call site of the forward graph (from
        ``ops.call_with_info``). The ``FwdGrad`` inputs (the seeds) are not
        included. Raises TypeError for a call site of another graph."""
        called = getattr(fwd_call_info, "called_graph", None)
        if not isinstance(called, Graph) or called != self._fwd:
            name = called.name if isinstance(called, Graph) else repr(called)
            raise TypeError(
                f"The called graph of the call site ({name}) does not match the graph that was "
                f"differentiated ({self._fwd.name}).")
        out = {}
        for ec, t in zip(self._ins, self._graph._inputs):
            if ec.connection_type == ExpectedConnectionType.Fwd:
                out[t] = fwd_call_info.graph_to_parent(ec.fwd_tensor)
        return out

    def fwd_graph_ins_to_grad_parent_outs(self, grad_call_info) -> Dict[Tensor, Tensor]:
        """``{forward-graph tensor: its gradient in the parent of the gradient
        call}``, from the call site of the gradient graph."""
        return {ec.fwd_tensor: grad_call_info.parent_output(i) for i, ec in enumerate(self._outs)}

    def fwd_parent_ins_to_grad_parent_outs(self, fwd_call_info, grad_call_info) -> Dict[Tensor, Tensor]:
        """``{parent tensor fed to the forward call: its gradient from the
        gradient call}``."""
        return {fwd_call_info.graph_to_parent(k): v
                for k, v in self.fwd_graph_ins_to_grad_parent_outs(grad_call_info).items()}

    def __repr__(self):
        ins = "".join(f"    {e!r}\n" for e in self._ins)
        outs = "".join(f"    {e!r}\n" for e in self._outs)
        return (f"GradGraphInfo[\n  graph={self._graph.id}\n  expected_inputs=[\n{ins}  ]\n"
                f"  expected_outputs=[\n{outs}  ]\n]")
