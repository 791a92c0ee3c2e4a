"""Host conversions for PopXL's 8-bit float types, mirroring
``popxl.fp8_utils``.

Formats (Graphcore's, poplar QUARTER): ``float8_143`` has 4 exponent bits, 3
mantissa bits and exponent bias 8 (largest 240, smallest subnormal 2^-10);
``float8_152`` has 5 exponent bits, 2 mantissa bits and bias 16 (largest
57344, smallest subnormal 2^-17). There are no infinities and one NaN, the
byte ``0x80``, so negative zero is stored as ``0x00``. NumPy has no fp8
type: fp8 data is a structured array of one ``uint8`` field
(``popxl.dtypes.np_dtype_float8_143`` / ``np_dtype_float8_152``).

Casting to fp8 multiplies by ``2 ** log2_scale`` first and rounds to
nearest, ties to even. NaN and infinities give NaN; a finite value beyond
the largest number gives NaN when ``nan_on_overflow`` is set, otherwise
the largest number of its sign. The device casts (``ops.pow2scale_cast_to_fp8``)
compute the same bytes (``cpp/core/fp8.hpp``), with ``nan_on_overflow``.
"""
import math
from collections import defaultdict, namedtuple
from typing import Tuple

import numpy as np

from . import dtypes
from .dtypes import float8_143, float8_152, float16, float32, float64, np_dtype_float8_143, \
    np_dtype_float8_152

__all__ = ["host_pow2scale_cast_to_fp8", "host_pow2scale_cast_from_fp8", "host_fp8_mse_scale",
           "host_fp8_mse_scale_pb"]

max_scaling_bias = 31
min_scaling_bias = -31

#: A floating-point format: exponent and mantissa bits, exponent bias, whether
#: subnormals count, whether a whole exponent code is reserved for inf/NaN.
FpDef = namedtuple("FpDef", ["num_exp_bits", "num_mantissa_bits", "fix_exponent_bias",
                             "include_denorm", "has_nans"])

ieee_fp32_no_denorms = FpDef(8, 23, 127, False, True)
ieee_fp16_denorms = FpDef(5, 10, 15, True, True)
float8_152_def = FpDef(5, 2, 16, True, False)
float8_143_def = FpDef(4, 3, 8, True, False)

_DEFS = {float8_143: float8_143_def, float8_152: float8_152_def}
_NP = {float8_143: np_dtype_float8_143, float8_152: np_dtype_float8_152}
NAN_BYTE = 0x80


def _max_value(fd: FpDef) -> float:
    emax = (1 << fd.num_exp_bits) - 1 - fd.fix_exponent_bias
    return math.ldexp(2.0 - math.ldexp(1.0, -fd.num_mantissa_bits), emax)


def _decode_table(fd: FpDef) -> np.ndarray:
    """The value of every byte (NaN for 0x80) in float64."""
    b = np.arange(256)
    m_bits, bias = fd.num_mantissa_bits, fd.fix_exponent_bias
    e = (b >> m_bits) & ((1 << fd.num_exp_bits) - 1)
    m = b & ((1 << m_bits) - 1)
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - m_bits),
                   np.ldexp(((1 << m_bits) + m).astype(np.float64), e - bias - m_bits))
    v = np.where(b & 0x80, -mag, mag)
    v[NAN_BYTE] = np.nan
    return v


_TABLES = {float8_143: _decode_table(float8_143_def), float8_152: _decode_table(float8_152_def)}


def _encode(x: np.ndarray, fd: FpDef, log2_scale: int, nan_on_overflow: bool) -> np.ndarray:
    """Bytes of ``x * 2**log2_scale`` (float64 array in, uint8 array out)."""
    m_bits, bias = fd.num_mantissa_bits, fd.fix_exponent_bias
    emin = 1 - bias
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.ldexp(x, log2_scale)
    bad = ~np.isfinite(v)
    a = np.where(bad, 0.0, np.abs(v))
    _, e = np.frexp(a)
    qexp = np.maximum(e - 1, emin) - m_bits
    r = np.ldexp(np.rint(np.ldexp(a, -qexp)), qexp)
    mx = _max_value(fd)
    over = r > mx
    r = np.where(over, mx, r)
    _, re = np.frexp(r)
    sub = (re - 1) < emin
    code_sub = np.ldexp(r, -(emin - m_bits))
    code_norm = ((re - 1 + bias) << m_bits) + (np.ldexp(r, -(re - 1 - m_bits)) - (1 << m_bits))
    code = np.where(r == 0, 0, np.where(sub, code_sub, code_norm)).astype(np.int64)
    code = np.where((v < 0) & (r != 0), code | 0x80, code)
    code = np.where(bad | (over & bool(nan_on_overflow)), NAN_BYTE, code)
    return code.astype(np.uint8)


def _check_log2_scale(log2_scale) -> int:
    if isinstance(log2_scale, bool) or not isinstance(log2_scale, (int, np.integer)):
        raise RuntimeError(f"log2_scale must be an int, got {log2_scale!r}")
    return int(log2_scale)


def host_pow2scale_cast_to_fp8(src: np.ndarray, dtype: "dtypes.dtype" = None,
                               log2_scale: int = 0, nan_on_overflow: bool = True) -> np.ndarray:
    """``cast(src * 2**log2_scale, dtype)`` on the host.

    Args:
        src: float16, float32 or float64 data (NumPy, or a torch tensor).
        dtype: ``popxl.float8_143`` or ``popxl.float8_152``.
        log2_scale: the power-of-two scale applied before the cast.
        nan_on_overflow: values beyond the format's range become NaN (True)
            or saturate (False).

    Returns:
        A structured array of dtype ``np_dtype_float8_143`` /
        ``np_dtype_float8_152`` with ``src``'s shape.

    Raises:
        RuntimeError: an unsupported ``dtype`` or ``src`` dtype.
    """
    if type(src).__module__.split(".")[0] == "torch" and hasattr(src, "detach"):
        src = src.detach().cpu().numpy()
    if not isinstance(src, np.ndarray):
        src = np.asarray(src, order="C")
    if dtype not in (float8_143, float8_152):
        raise RuntimeError(f"dtype {dtype} not currently supported.")
    if src.dtype not in (np.float16, np.float32, np.float64):
        raise RuntimeError(f"src.dtype {src.dtype} not currently supported.")
    scale = _check_log2_scale(log2_scale)
    b = _encode(np.asarray(src, dtype=np.float64), _DEFS[dtype], scale, nan_on_overflow)
    return np.ascontiguousarray(b.reshape(src.shape)).view(_NP[dtype])


def host_pow2scale_cast_from_fp8(src: np.ndarray, dtype: "dtypes.dtype" = None,
                                 log2_scale: int = 0) -> np.ndarray:
    """``cast(src, dtype) * 2**log2_scale`` on the host, for fp8 data as
    :func:`host_pow2scale_cast_to_fp8` returns it; ``dtype`` is
    ``popxl.float16``, ``float32`` or ``float64``.

    Raises:
        RuntimeError: ``src`` is not fp8 data or ``dtype`` is unsupported.
    """
    if not isinstance(src, np.ndarray) or src.dtype not in (np_dtype_float8_143,
                                                            np_dtype_float8_152):
        raise RuntimeError(f"src.dtype {getattr(src, 'dtype', type(src))} not currently "
                           "supported.")
    fmt = float8_143 if src.dtype == np_dtype_float8_143 else float8_152
    if dtype not in (float16, float32, float64):
        raise RuntimeError(f"dtype {dtype} not currently supported.")
    scale = _check_log2_scale(log2_scale)
    b = np.ascontiguousarray(src).view(np.uint8)
    vals = np.ldexp(_TABLES[fmt][b], scale)
    with np.errstate(over="ignore"):
        return vals.astype(dtype.as_numpy()).reshape(src.shape)


# ---------------------------------------------------------------- MSE scale

def find_exponential_range(fp_def: FpDef) -> Tuple[int, int]:
    """The smallest and largest binary exponents of a format's numbers
    (subnormals included when the format has them), without scaling."""
    lo = 1 - fp_def.fix_exponent_bias
    hi = (1 << fp_def.num_exp_bits) - 1 - fp_def.has_nans - fp_def.fix_exponent_bias
    if fp_def.include_denorm:
        lo -= fp_def.num_mantissa_bits
    return lo, hi


def log_histogram(src: np.ndarray, ftype: FpDef):
    """Counts of ``|src|`` per binade ``[2^k, 2^(k+1))`` of ``ftype``'s range:
    bin 0 holds values below the smallest limit, the last bin values above
    the largest. Returns ``(histogram, limits)``."""
    lo, hi = find_exponential_range(ftype)
    limits = [2.0 ** i for i in range(lo, hi)]
    hist = np.zeros(len(limits) + 1)
    a = np.abs(np.asarray(src, dtype=np.float64).reshape(-1))
    under = a < limits[0]
    over = a > limits[-1]
    mid = ~(under | over)
    _, e = np.frexp(a[mid])
    hist[0] += int(under.sum())
    hist[-1] += int(over.sum())
    np.add.at(hist, e - lo, 1)
    return hist, limits


class CandidateConfig:
    """The scales a destination format can take for data of a source format."""

    def __init__(self, format, src_ftype: FpDef, dest_ftype: FpDef, src_type):  # noqa: A002
        self.format = format
        self.exponent_size = dest_ftype.num_exp_bits
        self.mantissa_size = dest_ftype.num_mantissa_bits
        self.fix_exponent_bias = dest_ftype.fix_exponent_bias
        src_bits = (ieee_fp32_no_denorms.num_mantissa_bits if src_type == np.float32
                    else ieee_fp16_denorms.num_mantissa_bits)
        self.quantisation_error = 2 ** (-2.0 * (src_bits - self.mantissa_size))
        src_lo, src_hi = find_exponential_range(src_ftype)
        dst_lo, dst_hi = find_exponential_range(dest_ftype)
        self.format_span = dst_hi - dst_lo + 1
        self.min_src_exp_index = max(0, dst_lo + min_scaling_bias - src_lo)
        self.max_src_exp_index = min(dst_lo + max_scaling_bias - src_lo, src_hi - src_lo)
        self.num_exp_src = self.max_src_exp_index - self.min_src_exp_index + 1


def calculate_metric_mse(histogram, limits, src_bias_starting_indices, candidate):
    """``(lowest mse, scaling bias)``: for each candidate scaling bias the
    squared error of the histogram's underflow, quantisation and overflow;
    among the biases of equal lowest error the median one."""
    span, qerr = candidate.format_span, candidate.quantisation_error
    n = len(limits)
    by_mse = defaultdict(list)
    for index, start in enumerate(src_bias_starting_indices):
        start = int(start)
        mse = 0
        for i in range(0, start):  # underflow (the first term as PopXL counts it)
            if i == 0:
                mse += (limits[0] / 2) ** 2
            mse += (limits[i] ** 2) * histogram[i + 1]
        for i in range(start, min(start + span, n)):  # representable: quantisation error
            mse += limits[i] ** 2 * histogram[i + 1] * qerr
        for i in range(start + span, n):  # overflow
            mse += (limits[index + span - 1] - limits[i]) ** 2 * histogram[i + 1]
        by_mse[mse].append(index + min_scaling_bias)
    lowest = sorted(by_mse)[0]
    biases = sorted(by_mse[lowest])
    return lowest, biases[len(biases) // 2]


def calculate_candidate_metric(hist_norm, limits, candidate, metric_type=None):
    indices = np.arange(candidate.min_src_exp_index,
                        candidate.min_src_exp_index + candidate.num_exp_src)
    if metric_type != "MSE":
        raise RuntimeError("Only MSE metric is supported.")
    return calculate_metric_mse(hist_norm, limits, indices, candidate)


def host_fp8_mse_scale(src: np.ndarray, dtype: "dtypes.dtype" = None):
    """The power-of-two scale ``s`` for which ``cast(src * 2**s, dtype)``
    loses the least (mean squared error over a log2 histogram of ``src``;
    scales in [-31, 31]). ``src`` is float16 or float32 data, ``dtype``
    ``float8_143`` (the default) or ``float8_152``. Returns ``(mse, s)``.

    Raises:
        RuntimeError: ``src`` has another dtype.
    """
    src = np.asarray(src)
    if src.dtype not in (np.float32, np.float16):
        raise RuntimeError(f"dtype {src.dtype} not currently supported.")
    dest = float8_152_def if dtype == float8_152 else float8_143_def
    flat = np.ascontiguousarray(src).reshape(-1)
    hist, limits = log_histogram(flat, ieee_fp32_no_denorms)
    hist_norm = hist / sum(hist)
    cand = CandidateConfig(dtype, ieee_fp32_no_denorms, dest, src.dtype)
    metric, bias = calculate_candidate_metric(hist_norm, limits, cand, "MSE")
    return metric, -bias


def host_fp8_mse_scale_pb(src: np.ndarray, dtype: "dtypes.dtype" = None) -> int:
    """The scale of :func:`host_fp8_mse_scale` alone (PopXL computes it with
    poplar's ``calculateMetadataForConversion``; ipuxl with the same MSE
    search). ``dtype`` must be ``float8_143`` or ``float8_152``.

    Raises:
        RuntimeError: an unsupported ``dtype`` or ``src`` dtype.
    """
    if dtype not in (float8_143, float8_152):
        raise RuntimeError(f"dtype {dtype} not currently supported.")
    if type(src).__module__.split(".")[0] == "torch" and hasattr(src, "detach"):
        src = src.detach().cpu().numpy()
    src = np.asarray(src, order="C")
    if src.dtype not in (np.float16, np.float32):
        raise RuntimeError(f"src.dtype {src.dtype} not currently supported.")
    return int(host_fp8_mse_scale(src, dtype)[1])
