"""``fp8_mse_scale`` (``popxl_addons.ops.fp8_mse_scale``): the device form of
``popxl.fp8_utils.host_fp8_mse_scale``."""
from ... import dtypes
from ...op import create_op
from ...opdef import define_op
from ...tensor import Tensor
from ...ops.utils import check_in_graph

__all__ = ["fp8_mse_scale"]

max_scaling_bias = 31
min_scaling_bias = -31

define_op("Fp8MseScale", lambda ins, attrs, graphs=(): [((), dtypes.int32)],
          no_grad="a scale search: its integer result carries no gradient", cost="reduce")


def fp8_mse_scale(src: Tensor, dtype=dtypes.float8_143) -> Tensor:
    """The int32 power-of-two scale ``s`` for which ``cast(src * 2**s,
    dtype)`` loses the least (the MSE search of
    ``popxl.fp8_utils.host_fp8_mse_scale``, computed on the device; the
    result equals the host function's). ``src`` is float16 or float32."""
    from ...fp8_utils import (CandidateConfig, float8_143_def, float8_152_def,
                              ieee_fp32_no_denorms)

    check_in_graph("fp8_mse_scale", src=src)
    if src.dtype not in (dtypes.float32, dtypes.float16):
        raise RuntimeError(f"dtype {src.dtype} not currently supported.")
    dest = float8_152_def if dtype == dtypes.float8_152 else float8_143_def
    cand = CandidateConfig(dtype, ieee_fp32_no_denorms, dest, src.dtype.as_numpy())
    attrs = {"format_span": int(cand.format_span), "min_src_index": int(cand.min_src_exp_index),
             "num_candidates": int(cand.num_exp_src),
             "quantisation_error": float(cand.quantisation_error)}
    return create_op("Fp8MseScale", [src], ["scaling_bias"], attrs,
                     name="fp8_mse_scale").outputs[0]
