"""``print_tensor``: print a tensor to stderr when the program runs."""
import numbers

from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .rules import like_input
from .utils import check_in_graph, check_tensor

__all__ = ["print_tensor"]

_FLOAT_FORMATS = ("auto", "fixed", "scientific", "none")


def print_tensor(t: Tensor, title: str = None, print_self: bool = True,
                 print_gradient: bool = False, summarise_threshold: int = 1000,
                 edge_items: int = 3, max_line_width: int = 75, digits: int = 8,
                 float_format: str = "auto", separator: str = " ", open_bracket: str = "[",
                 close_bracket: str = "]") -> Tensor:
    """Print ``t`` to stderr each time the op runs and return a copy of it.

    The output is ``<title>: <tensor>``, the tensor nested in brackets with
    one line per innermost row (layout details in
    cpp/kernels/print_tensor.cpp).

    Args:
        t: the tensor to print (any dtype).
        title: defaults to ``print_<t.name>``.
        print_self: print ``t`` itself (False: print nothing forward).
        print_gradient: also print the gradient of ``t``, titled
            ``<title>_gradient``, in the backward graph made by autodiff.
        summarise_threshold: above this many elements only the first and
            last ``edge_items`` of each dimension are printed, with
            ``...`` between; 0 disables summarising.
        edge_items: see ``summarise_threshold``.
        max_line_width: split longer lines; 0 disables splitting.
        digits: significant digits of floats; 0 disables alignment and
            selects the 'none' float format.
        float_format: 'auto', 'fixed', 'scientific' or 'none'.
        separator, open_bracket, close_bracket: single characters.

    Raises:
        ValueError: separator or a bracket is not exactly one character, or
            a count is negative.
        KeyError: ``float_format`` is not one of the four options.
    Returns:
        A tensor equal to ``t``.
    """
    op = "print_tensor"
    check_tensor(op, "t", t)
    check_in_graph(op, t=t)
    for name, char in (("separator", separator), ("open_bracket", open_bracket),
                       ("close_bracket", close_bracket)):
        if not isinstance(char, str):
            raise TypeError(f"{op}: {name} must be a str, got {type(char).__name__}")
        if len(char) != 1:
            raise ValueError(f"Parameter {name} must be 1 character exactly. "
                             f"Not length {len(char)} and value {char}.")
    if float_format not in _FLOAT_FORMATS:
        raise KeyError(f"{op}: float_format must be one of {_FLOAT_FORMATS}, got {float_format!r}")
    counts = {"summarise_threshold": summarise_threshold, "edge_items": edge_items,
              "max_line_width": max_line_width, "digits": digits}
    for name, v in counts.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{op}: {name} must be an int, got {v!r}")
        if v < 0:
            raise ValueError(f"{op}: {name} must be >= 0, got {v}")
    if title is None:
        title = f"print_{t.name}"
    if not isinstance(title, str):
        raise TypeError(f"{op}: title must be a str, got {type(title).__name__}")
    attrs = {"title": title, "print_self": bool(print_self), "print_gradient": bool(print_gradient),
             "float_format": float_format, "separator": separator, "open_bracket": open_bracket,
             "close_bracket": close_bracket}
    attrs.update({k: int(v) for k, v in counts.items()})
    return create_op("PrintTensor", [t], ["print_out"], attrs, name=op).outputs[0]


# Printing is its effect: it runs even when nothing reads its output, and it
# is not repeated by recomputation in a gradient graph.
define_op("PrintTensor", like_input(0), side_effects=True, recomputable=False, cost="print")


# ---- gradient rule: identity, printing the gradient when asked (PopART's
# PrintTensorOp grad is a PrintTensorOp titled "<title>_gradient").

@register_grad("PrintTensor")
def _print_tensor_grad(ctx):
    g = ctx.g()
    a = ctx.attrs
    if g is None or not a.get("print_gradient"):
        return [g]
    return [print_tensor(g, f"{a['title']}_gradient", True, False, a["summarise_threshold"],
                         a["edge_items"], a["max_line_width"], a["digits"], a["float_format"],
                         a["separator"], a["open_bracket"], a["close_bracket"])]
