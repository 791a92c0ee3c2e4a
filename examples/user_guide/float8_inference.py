"""Float8 inference: a convolution whose input and weights are float8.

Mirrors the PopXL user-guide program ``float8_inference.py``: a float16
batch streamed in, cast on the device to float8_143
(``ops.pow2scale_cast_to_fp8``), convolved with float8_143 weights converted
on the host (``popxl.fp8_utils.host_pow2scale_cast_to_fp8``) by
``ops.conv_pow2scaled`` (the result times 2**log2_scale, in float16), then a
GELU. The module is a ``popxl.Module`` whose weight is a graph input bound
at the call site, and the session is entered twice (nested contexts).
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.fp8_utils import host_pow2scale_cast_from_fp8, host_pow2scale_cast_to_fp8

BATCH, C_IN, C_OUT, H, W, K, LOG2_SCALE = 2, 10, 20, 5, 5, 3, 1


class ConvFloat8(popxl.Module):
    def __init__(self):
        self.W = None

    def build(self, x: popxl.Tensor, log2_scale: popxl.Tensor) -> popxl.Tensor:
        self.W = popxl.graph_input((C_OUT, C_IN, K, K), popxl.float8_143, "W")
        return ops.gelu(ops.conv_pow2scaled(x, self.W, log2_scale, stride=(1, 1)))


rng = np.random.default_rng(0)
t = rng.random((BATCH, C_IN, H, W)).astype(np.float16)
weight = rng.random((C_OUT, C_IN, K, K)).astype(np.float16)

ir = popxl.Ir()
with ir.main_graph:
    log2_scale = popxl.variable(LOG2_SCALE, dtype=popxl.int32)
    stream = popxl.h2d_stream([BATCH, C_IN, H, W], popxl.float16, name="in_stream_0")
    a = ops.host_load(stream, "a")
    a_fp8 = ops.pow2scale_cast_to_fp8(a, data_type=popxl.float8_143,
                                      log2_scale=popxl.constant(0))
    conv = ConvFloat8()
    weight_fp8 = host_pow2scale_cast_to_fp8(weight, popxl.float8_143, 0, False)
    W_t = popxl.variable(weight_fp8, popxl.float8_143)
    graph = ir.create_graph(conv, a_fp8, log2_scale)
    out = ops.call_with_info(graph, a_fp8, log2_scale, inputs_dict={conv.W: W_t}).outputs[0]
    out_stream = popxl.d2h_stream(out.shape, out.dtype, name="out_stream")
    ops.host_store(out_stream, out)

with popxl.Session(ir, "ipu_model") as session:
    with session:
        result = session.run({stream: t})[out_stream]

print(f"result shape = {result.shape}, dtype = {result.dtype}")
assert result.shape == (BATCH, C_OUT, H - K + 1, W - K + 1) and result.dtype == np.float16

# NumPy reference on the values float8 holds: the convolution of the
# float8-rounded operands, times 2**LOG2_SCALE, then the tanh GELU.
xq = host_pow2scale_cast_from_fp8(host_pow2scale_cast_to_fp8(t, popxl.float8_143, 0),
                                  popxl.float64)
wq = host_pow2scale_cast_from_fp8(weight_fp8, popxl.float64)
ref = np.zeros(result.shape)
for i in range(H - K + 1):
    for j in range(W - K + 1):
        ref[:, :, i, j] = np.einsum("nckl,mckl->nm", xq[:, :, i:i + K, j:j + K], wq)
ref = np.float16(ref * 2.0 ** LOG2_SCALE).astype(np.float64)
ref = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref ** 3)))
np.testing.assert_allclose(result.astype(np.float64), ref, rtol=2e-3, atol=2e-2)
print("float8_inference: OK")
