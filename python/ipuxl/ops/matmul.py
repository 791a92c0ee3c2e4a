"""``matmul`` with NumPy semantics (1-D operands promoted, batch broadcast)."""
from typing import Optional

import numpy as np

from .. import dtypes
from ..grad import register_grad
from ..op import create_op
from ..opdef import Cost, define_op
from ..tensor import Tensor
from .utils import NUMERIC_DTYPES, check_dtype_in, check_in_graph, check_same_dtype, to_tensor

__all__ = ["matmul", "matmul_pow2scaled"]


def matmul_shape(op: str, a: Tensor, b: Tensor):
    if a.rank == 0 or b.rank == 0:
        raise ValueError(f"{op}: operands must have rank >= 1, got {a.id!r} {a.shape} and "
                         f"{b.id!r} {b.shape}")
    sa = (1,) + a.shape if a.rank == 1 else a.shape
    sb = b.shape + (1,) if b.rank == 1 else b.shape
    if sa[-1] != sb[-2]:
        raise ValueError(
            f"{op}: contraction dimensions differ: {a.id!r} {a.shape} @ {b.id!r} {b.shape} "
            f"({sa[-1]} != {sb[-2]})")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise ValueError(f"{op}: batch dimensions do not broadcast: {a.id!r} {a.shape} @ "
                         f"{b.id!r} {b.shape}") from None
    out = batch
    if a.rank > 1:
        out += (sa[-2],)
    if b.rank > 1:
        out += (sb[-1],)
    return out


def matmul(lhs: Tensor, rhs: Tensor, available_memory_proportion: Optional[float] = None,
           output_type: Optional[dtypes.dtype] = None,
           partials_type: Optional[dtypes.dtype] = None) -> Tensor:
    """Matrix product of ``lhs`` and ``rhs`` (``numpy.matmul`` semantics).

    ``available_memory_proportion`` and ``partials_type`` tune the IPU
    implementation: the IPU model plans the matmul with them (the share of a
    tile its temporaries may use; the type of its partial sums, float16 or
    float32). ``partials_type`` follows PopXL: given, it must be
    ``float16`` or ``float32`` (else ``ValueError``); omitted, the Ir's
    session option ``partialsTypeMatMuls`` at the time of the call decides
    (``""`` or ``"float"``: float32, ``"half"``: float16). The simulator's
    float16 products accumulate in float16 with half partials on a CPU with
    AVX512-FP16 at the avx512 level (``cpp/core/hgemm.hpp``: blocks of 256
    products of the contraction in float16, their sums in float32), and in
    float32 otherwise.
    ``output_type`` casts the result.
    """
    lhs = to_tensor(lhs, like=rhs if isinstance(rhs, Tensor) else None, op="matmul")
    rhs = to_tensor(rhs, like=lhs, op="matmul")
    check_in_graph("matmul", lhs=lhs, rhs=rhs)
    from .utils import check_tensor_ipu_and_tile_set

    check_tensor_ipu_and_tile_set(lhs=lhs, rhs=rhs)
    check_same_dtype("matmul", lhs, rhs)
    check_dtype_in("matmul", lhs, NUMERIC_DTYPES)
    if available_memory_proportion is not None and not 0 < available_memory_proportion <= 1:
        raise ValueError(f"matmul: available_memory_proportion must be in (0, 1], got "
                         f"{available_memory_proportion}")
    matmul_shape("matmul", lhs, rhs)
    attrs = {"partials_type": _partials_type(partials_type)}
    if available_memory_proportion is not None:
        attrs["available_memory_proportion"] = float(available_memory_proportion)
    out = create_op("MatMul", [lhs, rhs], ["matmul"], attrs, name="matmul").outputs[0]
    if output_type is not None and dtypes.dtype.as_dtype(output_type) != out.dtype:
        from .cast import cast

        out = cast(out, dtypes.dtype.as_dtype(output_type))
    return out


def _partials_type(partials_type) -> str:
    """PopXL's ``ops.matmul`` precedence for the partials type ("half" or
    "float"): the argument when given (float16 or float32), else the current
    Ir's ``partialsTypeMatMuls`` ("" and "float": float, "half": half)."""
    if partials_type is not None:
        if partials_type == dtypes.float16:
            return "half"
        if partials_type == dtypes.float32:
            return "float"
        raise ValueError(f"matmul: partials_type {partials_type} is not valid, must be float16 "
                         "or float32")
    from ..context import get_current_graph
    from ..session_options import _options

    opt = _options(get_current_graph().ir).get("partialsTypeMatMuls", "").lower()
    return "half" if opt == "half" else "float"


def matmul_flops(op) -> int:
    """``(.., n, k) @ (.., k, m)``: 2 k per output element (popxl_addons'
    performance_utils count)."""
    a, b = op.inputs[0], op.inputs[1]
    k = a.shape[-1]
    expected = b.shape[-2] if len(b.shape) > 1 else b.shape[-1]
    if k != expected:
        raise ValueError(f"{op.name}: contraction sizes differ ({k} and {expected})")
    return int(2 * k * int(np.prod(op.outputs[0].shape, dtype=np.int64)))


define_op("MatMul", lambda ins, attrs, graphs=(): [(matmul_shape("MatMul", ins[0], ins[1]),
                                                    ins[0].dtype)],
          cost=Cost("matmul", flops=matmul_flops))


def matmul_pow2scaled(lhs: Tensor, rhs: Tensor, log2_scale: Tensor,
                      available_memory_proportion: Optional[float] = None) -> Tensor:
    """``matmul(lhs, rhs) * 2**log2_scale`` of float8 operands (``float8_143``
    / ``float8_152``, NumPy matmul rules), returned as float16. The operands
    are decoded exactly and accumulate in float32; ``log2_scale`` is an int32
    scalar tensor in [-32, 32) (checked when the program runs).

    Raises:
        TypeError: an operand is not float8, or ``log2_scale`` is not int32.
        ValueError: ``log2_scale`` is not a scalar, or the shapes do not fit.
    """
    from .utils import FP8_DTYPES, check_tensor_ipu_and_tile_set

    if lhs.dtype not in FP8_DTYPES or rhs.dtype not in FP8_DTYPES:
        raise TypeError("Scaled matmul operands must be of dtype popxl.float8_143 or "
                        "popxl.float8_152")
    if log2_scale.rank > 0:
        raise ValueError("Log2 scale argument must be a scalar tensor")
    if log2_scale.dtype != dtypes.int32:
        raise TypeError("Log2 scale tensor must be of type popxl.int32")
    check_in_graph("matmul_pow2scaled", lhs=lhs, rhs=rhs, log2_scale=log2_scale)
    check_tensor_ipu_and_tile_set(lhs=lhs, rhs=rhs)
    if available_memory_proportion is not None and not 0 < available_memory_proportion <= 1:
        raise ValueError(f"matmul_pow2scaled: available_memory_proportion must be in (0, 1], got "
                         f"{available_memory_proportion}")
    # PopXL creates the MatMulOp with MatMulPartialsType::HALF (PopART
    # requires half partials for float8 operands).
    attrs = {"partials_type": "half"}
    if available_memory_proportion is not None:
        attrs["available_memory_proportion"] = float(available_memory_proportion)
    return create_op("MatMulPow2Scaled", [lhs, rhs, log2_scale], ["matmul_pow2scaled_out"], attrs,
                     name="matmul_pow2scaled").outputs[0]


define_op("MatMulPow2Scaled",
          lambda ins, attrs, graphs=(): [(matmul_shape("matmul_pow2scaled", ins[0], ins[1]),
                                          dtypes.float16)],
          no_grad="float8 is not supported for training (as PopART)", cost="matmul")


def _swap_last(t: Tensor) -> Tensor:
    from .shape import transpose

    perm = list(range(t.rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return transpose(t, perm)


@register_grad("MatMul")
def _matmul_grad(ctx):
    """dA = G @ B^T, dB = A^T @ G on the promoted (>= 2-D) operands, summed
    over broadcast batch axes and reshaped back to the operand shapes."""
    from ..grad import sum_to_shape
    from .shape import reshape

    a, b, g = ctx.x(0), ctx.x(1), ctx.g()
    A = a if a.rank > 1 else reshape(a, (1, a.shape[0]))
    B = b if b.rank > 1 else reshape(b, (b.shape[0], 1))
    gshape = list(g.shape)
    if a.rank == 1:
        gshape.insert(len(gshape) - (0 if b.rank == 1 else 1), 1)
    if b.rank == 1:
        gshape.append(1)
    G = reshape(g, tuple(gshape)) if tuple(gshape) != g.shape else g
    # PopART's MatMulLhsGradOp / MatMulRhsGradOp take the forward op's
    # partials type (and its available memory proportion).
    pt = dtypes.float16 if ctx.attrs.get("partials_type") == "half" else dtypes.float32
    amp = ctx.attrs.get("available_memory_proportion")
    da = db = None
    if ctx.needs(0):
        da = matmul(G, _swap_last(B), available_memory_proportion=amp, partials_type=pt)
        da = sum_to_shape(da, (1,) * max(0, da.rank - A.rank) + A.shape)
        da = reshape(da, a.shape) if da.shape != a.shape else da
    if ctx.needs(1):
        db = matmul(_swap_last(A), G, available_memory_proportion=amp, partials_type=pt)
        db = sum_to_shape(db, (1,) * max(0, db.rank - B.rank) + B.shape)
        db = reshape(db, b.shape) if db.shape != b.shape else db
    return [da, db]
