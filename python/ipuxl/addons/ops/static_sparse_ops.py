"""Static sparse matmul (``popxl_addons.ops.static_sparse_ops``): dense x
constant sparse = dense, for inference with a fixed sparsity pattern.

The sparse right-hand side is a host CSR matrix (``scipy.sparse.csr_matrix``
or anything with ``data``, ``indices`` and ``indptr``) that becomes part of
the op (op ``SparseMatMul``, kernel ``cpp/kernels/sparse_matmul.cpp``). Its
values are rounded to the left-hand side's dtype, as popsparse keeps them on
the device. Unlike popxl_addons' custom op, it has a gradient for the dense
input: the same product with the transposed constant.
"""
import numpy as np

from ... import dtypes
from ...grad import register_grad
from ...op import create_op
from ...opdef import define_op
from ...ops.utils import check_in_graph
from ...tensor import Tensor

__all__ = ["dense_const_sparse_matmul", "random_sparse"]


def random_sparse(dense: np.ndarray, density: float = 0.5) -> np.ndarray:
    """Zero each element of ``dense`` (in place) with probability
    ``1 - density``, keeping at least one; returns ``dense``. Draws from
    NumPy's global generator (``binomial(1, 1 - density)``, the stream of
    ``scipy.stats.bernoulli.rvs`` that popxl_addons uses)."""
    mask = np.random.binomial(1, 1 - density, size=dense.shape).astype(np.bool_)
    if np.all(mask):
        mask.reshape(-1)[0] = False
    dense[mask] = 0
    return dense


def _shape(ins, attrs, graphs=()):
    (lhs,) = ins
    k = len(attrs["rows"]) - 1
    if len(lhs.shape) < 2:
        raise ValueError(f"the dense input {lhs.id!r} must have rank >= 2, got shape {lhs.shape}")
    if lhs.shape[-1] != k:
        raise ValueError(f"the dense input {lhs.id!r} has {lhs.shape[-1]} columns but the sparse "
                         f"matrix has {k} rows")
    return [((*lhs.shape[:-1], int(attrs["output_cols"])), lhs.dtype)]


define_op("SparseMatMul", _shape, cost="elementwise")


def _csr_attrs(data, indices, indptr, output_cols):
    return {"nz": [float(v) for v in data], "cols": [int(c) for c in indices],
            "rows": [int(r) for r in indptr], "output_cols": int(output_cols)}


def dense_const_sparse_matmul(lhs: Tensor, rhs, output_cols: int) -> Tensor:
    """``lhs @ rhs`` for a dense ``lhs`` ``(..., m, k)`` (float16 or
    float32) and a constant sparse ``rhs`` ``(k, output_cols)`` in CSR form.

    Raises:
        RuntimeError: ``lhs`` is not float16 or float32.
        ValueError: the CSR matrix does not fit ``lhs`` or is malformed.
    """
    check_in_graph("dense_const_sparse_matmul", lhs=lhs)
    if lhs.dtype not in (dtypes.float16, dtypes.float32):
        raise RuntimeError(f"dtype {lhs.dtype} not currently supported.")
    data = np.asarray(rhs.data, dtype=np.float32).reshape(-1)
    indices = np.asarray(rhs.indices, dtype=np.int64).reshape(-1)
    indptr = np.asarray(rhs.indptr, dtype=np.int64).reshape(-1)
    output_cols = int(output_cols)
    if data.size != indices.size or indptr.size < 1 or indptr[0] != 0 \
            or indptr[-1] != data.size or np.any(np.diff(indptr) < 0):
        raise ValueError("dense_const_sparse_matmul: rhs is not a valid CSR matrix "
                         f"({data.size} values, {indices.size} column indices, row pointers "
                         f"{indptr.size})")
    if indices.size and (indices.min() < 0 or indices.max() >= output_cols):
        raise ValueError(f"dense_const_sparse_matmul: rhs has a column index outside "
                         f"[0, output_cols={output_cols})")
    shape = getattr(rhs, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] > output_cols:
        raise ValueError(f"dense_const_sparse_matmul: output_cols ({output_cols}) is smaller "
                         f"than the sparse matrix's {shape[1]} columns")
    return create_op("SparseMatMul", [lhs], ["sparse_matmul_out"],
                     _csr_attrs(data, indices, indptr, output_cols),
                     name="sparse_matmul").outputs[0]


def _transposed(attrs):
    nz = np.asarray(attrs["nz"], dtype=np.float64)
    cols = np.asarray(attrs["cols"], dtype=np.int64)
    rows = np.asarray(attrs["rows"], dtype=np.int64)
    k, n = rows.size - 1, int(attrs["output_cols"])
    row_of = np.repeat(np.arange(k), np.diff(rows))
    order = np.argsort(cols, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=n))])
    return {"nz": nz[order].tolist(), "cols": row_of[order].tolist(), "rows": indptr.tolist(),
            "output_cols": k}


@register_grad("SparseMatMul")
def _sparse_matmul_grad(ctx):
    # d lhs = g @ rhs^T: the same op with the transposed constant.
    g = ctx.g()
    return [create_op("SparseMatMul", [g], ["sparse_matmul_grad"], _transposed(ctx.attrs),
                      name="sparse_matmul_grad").outputs[0]]
