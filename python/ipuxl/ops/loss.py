"""Negative log likelihood losses, mirroring PopXL's ``nll_loss`` and
``nll_loss_with_softmax_grad`` (PopART's NllOp and
NlllWithSoftmaxGradDirectOp).

Shapes: ``probs`` is ``[D1, ..., Dn, C]`` (classes on the *last* axis, unlike
``torch.nn.functional.nll_loss``), float16 or float32; ``labels`` is
``[D1, ..., Dn]``, int32 or uint32. Each of the ``N = D1*...*Dn`` samples
picks ``p = probs[..., labels[...]]``.

* A sample whose label equals ``ignore_index`` adds 0 to the loss (and a zero
  row to the gradient) and is not counted by the ``'mean'`` reduction, which
  divides by the number of counted samples. When none is counted the mean
  loss is NaN (as PyTorch and PopART) and so is the gradient (as PopART;
  PyTorch gives zeros).
* A label outside ``[0, C)`` that is not ignored raises ``RuntimeError`` when
  the program runs, naming the sample (as PyTorch). The IPU's one-hot
  encoding would silently select ``p = 0``, a loss of ``-log(eps)``.
* ``reduction``: ``'mean'`` and ``'sum'`` give a scalar, ``'none'`` one loss
  per sample (the labels' shape). The loss has the probs dtype.
"""
from typing import Optional, Tuple, Union

import numpy as np

from .. import dtypes
from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import check_dtype_in, check_in_graph, same_tile_set, to_tensor

__all__ = ["nll_loss", "nll_loss_with_softmax_grad"]

REDUCTIONS = ("mean", "sum", "none")
_PROB_DTYPES = (dtypes.float16, dtypes.float32)
_LABEL_DTYPES = (dtypes.int32, dtypes.uint32)


def _check_common(name: str, probs: Tensor, labels: Tensor, ignore_index, reduction,
                  any_label_shape: bool = False) -> dict:
    check_dtype_in(name, probs, _PROB_DTYPES, "probs must have")
    check_dtype_in(name, labels, _LABEL_DTYPES, "labels must have")
    if probs.rank == 0:
        raise ValueError(f"{name}: probs {probs.id!r} must have rank >= 1 (classes on the last "
                         "axis)")
    if any_label_shape:
        n = int(np.prod(probs.shape[:-1], dtype=np.int64))
        if labels.nelms != n:
            raise ValueError(
                f"{name}: the label tensor {labels.id!r} {labels.shape} must have {n} "
                f"elements, one per row of the probabilities tensor {probs.id!r} "
                f"{probs.shape} (classes on the last axis)")
    elif labels.shape != probs.shape[:-1]:
        raise ValueError(
            f"{name}: the label tensor {labels.id!r} {labels.shape} must have shape "
            f"{probs.shape[:-1]} to match all but the final dimension of the probabilities "
            f"tensor {probs.id!r} {probs.shape}")
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"{name}: Not a valid reduction: {reduction!r}. Must choose from: "
                         f"{', '.join(REDUCTIONS)}")
    if ignore_index is not None and (not isinstance(ignore_index, (int, np.integer))
                                     or isinstance(ignore_index, bool)):
        raise TypeError(f"{name}: ignore_index must be None or an int, got {ignore_index!r}")
    if ignore_index is not None and not -2**31 <= int(ignore_index) < 2**32:
        raise ValueError(f"{name}: ignore_index {ignore_index} does not fit the 32-bit labels")
    return {"reduction": reduction,
            "has_ignore_index": int(ignore_index is not None),
            "ignore_index": int(ignore_index) if ignore_index is not None else 0}


def nll_loss(probs: Tensor, labels: Tensor, ignore_index: Optional[int] = None,
             reduction: str = "mean", log_prob: bool = False) -> Tensor:
    """Negative log likelihood loss of ``probs`` (expected to be the output
    of :func:`softmax` over the last axis) against class ``labels``.

    Per sample the loss is ``-log(max(p, eps))`` with ``eps = 1e-7``
    (``6.104e-5`` for float16), or ``-p`` when ``log_prob=True`` (``probs``
    then holds log-probabilities, the PyTorch convention). See the module
    docstring for shapes, ``ignore_index`` and ``reduction``.
    """
    name = "nll_loss"
    check_in_graph(name, probs=probs, labels=labels)
    same_tile_set(name, probs, labels)
    attrs = _check_common(name, probs, labels, ignore_index, reduction)
    attrs["log_prob"] = int(bool(log_prob))
    op = create_op("Nll", [probs, labels], ["loss"], attrs, name="nll")
    return op.outputs[0]


def nll_loss_with_softmax_grad(probs: Tensor, labels: Tensor, loss_grad: Union[float, Tensor] = 1,
                               ignore_index: Optional[int] = None,
                               reduction: str = "mean") -> Tuple[Tensor, Tensor]:
    """The NLL loss ``l`` of ``probs = softmax(x)`` (over the last axis) and
    the gradient ``dE/dx`` with respect to the softmax *input* ``x``.

    ``loss_grad`` is ``dE/dl`` (1 when ``E = l``): a number (made a float32
    constant), a tensor with a single element, or, with ``reduction='none'``,
    one value per sample (the labels' shape); its dtype is float32 or the
    probs dtype. Per sample ``l = -log(p + 1e-7)`` and
    ``dE/dx[s, c] = (probs[s, c] - onehot(labels[s])[c]) * loss_grad``,
    divided by the number of counted samples for ``'mean'``; ignored samples
    give zero rows. Returns ``(loss, dx)``; ``dx`` has the shape and dtype
    of ``probs``.

    ``labels`` may have any shape with one label per row of ``probs``
    (``prod(probs.shape[:-1])`` elements, e.g. ``(n, 1)`` for ``(n, C)``
    probs): PopART's op checks no label shape and flattens both. A
    ``'none'``-reduced loss has the labels' shape.

    Note: for probs of rank > 2 without ``ignore_index``, PopART divides
    ``dx`` by ``probs.shape[0]`` rather than by the number of samples; ipuxl
    divides by the number of samples, so ``dx`` is the gradient of ``loss``.
    """
    name = "nll_loss_with_softmax_grad"
    if not isinstance(loss_grad, Tensor):
        if isinstance(loss_grad, bool) or not np.isscalar(loss_grad) or isinstance(loss_grad, str):
            raise TypeError(f"{name}: loss_grad must be a number or a Tensor, got {loss_grad!r}")
        loss_grad = to_tensor(loss_grad, dtype=dtypes.float32, op=name)
    check_in_graph(name, probs=probs, labels=labels, loss_grad=loss_grad)
    same_tile_set(name, probs, labels, loss_grad)
    attrs = _check_common(name, probs, labels, ignore_index, reduction, any_label_shape=True)
    if loss_grad.dtype not in (dtypes.float32, probs.dtype):
        raise TypeError(f"{name}: loss_grad {loss_grad.id!r} has dtype {loss_grad.dtype.name}; "
                        f"expected float32 or the probs dtype {probs.dtype.name}")
    if loss_grad.nelms != 1 and not (reduction == "none" and loss_grad.shape == labels.shape):
        raise ValueError(
            f"{name}: loss_grad {loss_grad.id!r} has shape {loss_grad.shape}; expected a single "
            "element" + (f" or the labels shape {labels.shape}" if reduction == "none" else "")
            + f" (reduction={reduction!r})")
    labels_shape = labels.shape
    if labels_shape != probs.shape[:-1]:
        # One label per row of probs, in any shape (PopART's Opx flattens
        # both): the op sees them as probs.shape[:-1]; a per-sample loss
        # (and its incoming gradient) keeps the labels' shape.
        from .shape import reshape

        labels = reshape(labels, probs.shape[:-1])
        if loss_grad.shape == labels_shape and loss_grad.nelms != 1:
            loss_grad = reshape(loss_grad, probs.shape[:-1])
    op = create_op("NlllWithSoftmaxGradDirect", [probs, labels, loss_grad], ["loss", "dx"], attrs,
                   name=name)
    loss, dx = op.outputs
    if reduction == "none" and loss.shape != labels_shape:
        from .shape import reshape

        loss = reshape(loss, labels_shape)
    return loss, dx


def _loss_spec(ins, attrs):
    probs, labels = ins[0], ins[1]
    return ((labels.shape if attrs["reduction"] == "none" else ()), probs.dtype)


define_op("Nll", lambda ins, attrs, graphs=(): [_loss_spec(ins, attrs)], cost="loss")
define_op("NlllWithSoftmaxGradDirect", cost="loss", shape=
          lambda ins, attrs, graphs=(): [_loss_spec(ins, attrs), (ins[0].shape, ins[0].dtype)],
          no_grad="returns its own gradient (as in PopXL)")


# ---- gradient rules
#
# Nll: d loss / d probs is 0 off the label and, at the label, ``-1/max(p, eps)``
# (``eps = 1e-10``, ``6.104e-5`` for float16: PopART's NllGradOp, whose eps
# differs from the forward's) or ``-1`` when ``log_prob=True``; times the
# incoming gradient, zero for ignored samples, divided for ``'mean'`` by the
# number of counted samples (NaN when none is counted, as the forward and
# PopART). PopART's NllGradOp divides by ``probs.shape[0]`` instead of the
# number of samples when probs has rank > 2 and no ignore_index; ipuxl keeps
# the gradient of the returned loss. The label selection is built from
# ``equal``/``cast``, so the gradient is differentiable again with respect to
# probs. The labels get no gradient.
#
# NlllWithSoftmaxGradDirect has no rule, as in PopXL: it already returns its
# own gradient, and autodiff raises if a gradient reaches it.

@register_grad("Nll", nondiff=(1,))
def _nll_grad(ctx):
    from .. import ops
    from ..tensor import constant

    probs = ctx.x(0)
    labels = ctx.x(1)
    a = ctx.attrs
    dt = probs.dtype
    n_cls = probs.shape[-1]
    col = labels.shape + (1,)
    lab_np = labels.dtype.as_numpy()
    classes = constant(np.arange(n_cls, dtype=np.int64).astype(lab_np), name="nll_classes")
    # Labels outside [0, C) select no class, as the forward's one-hot encoding.
    sel = ops.equal(ops.reshape(labels, col), classes)
    keep = None
    if a["has_ignore_index"]:
        ign = constant(np.array(a["ignore_index"], dtype=np.int64).astype(lab_np),
                       name="nll_ignore_index")
        keep = ops.logical_not(ops.equal(labels, ign))
        sel = ops.logical_and(sel, ops.reshape(keep, col))
    sel = ops.cast(sel, dt)

    g = ctx.g()
    if a["reduction"] == "none":
        g = ops.reshape(g, col)
    elif a["reduction"] == "mean":
        if keep is not None:
            g = g / ops.sum(ops.cast(keep, dt))
        else:
            n = labels.nelms
            g = g * (1.0 / n if n else float("nan"))
    if a["log_prob"]:
        return [sel * (-g), None]
    eps = 6.104e-05 if dt == dtypes.float16 else 1.0e-10
    p = ops.sum(probs * sel, axis=-1, keepdims=True)
    p_safe = ops.where(ops.greater(p, eps), p, eps)
    return [sel * (-g / p_safe), None]
