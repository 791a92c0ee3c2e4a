"""addons layers Conv2D, GroupNorm, LayerNorm and LinearFP8, and the fp8
scale ops, against PyTorch and the host fp8 utilities."""
from functools import partial

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ipuxl as popxl  # noqa: E402
import ipuxl.addons as addons  # noqa: E402
from ipuxl.addons.layers import Conv2D, GroupNorm, LayerNorm  # noqa: E402
from ipuxl.addons.layers.linear_fp8 import LinearFP8  # noqa: E402
from ipuxl.addons.ops.fp8_amax_scale import fp8_amax_scale  # noqa: E402
from ipuxl.addons.ops.fp8_mse_scale import fp8_mse_scale  # noqa: E402
from ipuxl.addons.testing_utils import TensorInput, run_module  # noqa: E402
from ipuxl.fp8_utils import host_fp8_mse_scale  # noqa: E402

RNG = np.random.default_rng(5)


@pytest.mark.slow  # trains a conv layer
@pytest.mark.parametrize("kwargs,tkwargs", [
    ({"strides": (1, 2)}, {"stride": (1, 2)}),
    ({"paddings": "same_upper"}, {"padding": "same"}),
    ({"paddings": (1, 2, 1, 2), "groups": 3, "dilations": (2, 1)},
     {"padding": (1, 2), "groups": 3, "dilation": (2, 1)}),
])
def test_conv2d_layer(kwargs, tkwargs):
    x = RNG.random((2, 3, 12, 11)).astype(np.float32)
    layer = torch.nn.Conv2d(3, 6, 3 if "groups" in kwargs else 2, **tkwargs)
    want = layer(torch.tensor(x)).detach().numpy()
    (got,) = run_module(Conv2D(6, 3 if "groups" in kwargs else 2, **kwargs), TensorInput(x),
                        weights=partial(Conv2D.torch_mapping, nn_layer=layer))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 6), (2, 6, 10), (2, 6, 4, 5)])
def test_group_norm_layer_any_rank(shape):
    x = RNG.random(shape).astype(np.float32)
    layer = torch.nn.GroupNorm(3, 6, eps=1e-6)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(RNG.random(6)))
        layer.bias.copy_(torch.tensor(RNG.random(6)))
    want = layer(torch.tensor(x)).detach().numpy()
    (got,) = run_module(GroupNorm(3, eps=1e-6), TensorInput(x),
                        weights=partial(GroupNorm.torch_mapping, nn_layer=layer))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_layer_norm_layer_and_helper():
    x = RNG.random((4, 6, 5)).astype(np.float32)
    layer = torch.nn.LayerNorm([6, 5])
    want = layer(torch.tensor(x)).detach().numpy()
    (got,) = run_module(LayerNorm(), TensorInput(x.reshape(4, 30)),
                        weights=partial(LayerNorm.torch_mapping, nn_layer=layer))
    np.testing.assert_allclose(got, want.reshape(4, 30), rtol=1e-4, atol=1e-5)
    with popxl.Ir().main_graph, pytest.raises(ValueError, match="LayerNorm"):
        LayerNorm().create_graph(popxl.variable(x).spec)
    from ipuxl.addons.layers.layer_norm import layer_norm
    from harness import run_fn

    w, b = RNG.random(5).astype(np.float32), RNG.random(5).astype(np.float32)
    got = run_fn(layer_norm, x, w, b)
    want = torch.nn.functional.layer_norm(torch.tensor(x), (5,), torch.tensor(w),
                                          torch.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fmt", [popxl.float8_143, popxl.float8_152])
@pytest.mark.parametrize("dt", [np.float16, np.float32])
def test_fp8_scales_match_the_host(fmt, dt):
    datas = [RNG.uniform(-(2 ** 6), -(2 ** 5), 10), RNG.standard_normal(100) * 1e-3,
             RNG.standard_normal((4, 5)) * 300]
    for data in datas:
        data = data.astype(dt)
        ir = popxl.Ir()
        with ir.main_graph:
            src = popxl.variable(data)
            mse = addons.host_store(fp8_mse_scale(src, fmt))
            amax = addons.host_store(fp8_amax_scale(src, fmt))
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run()
        assert int(out[mse]) == host_fp8_mse_scale(data, fmt)[1]
        top = 240.0 if fmt == popxl.float8_143 else 57344.0
        # the ratio is computed in the input's dtype: float16 overflows to inf (-> 31)
        with np.errstate(over="ignore"):
            ratio = (np.float32(top) / np.abs(data).max().astype(np.float32)).astype(dt)
        want = np.clip(np.floor(np.log2(ratio.astype(np.float32))), -31, 31)
        assert int(out[amax]) == int(want)


@pytest.mark.parametrize("metric", ["amax", "mse", "manual_scale"])
def test_linear_fp8_forward_and_build_grad(metric):
    x = RNG.random((3, 8)).astype(np.float16)
    layer = torch.nn.Linear(8, 5)
    want = layer(torch.tensor(x, dtype=torch.float32)).detach().numpy()
    (got,) = run_module(LinearFP8(5, scale_metric=metric), TensorInput(x),
                        weights=partial(LinearFP8.torch_mapping, nn_layer=layer,
                                        dtype=popxl.float16))
    np.testing.assert_allclose(got.astype(np.float32), want, atol=0.1)
    # backward through build_grad: float8 products, close to the exact ones
    dy = RNG.standard_normal((3, 5)).astype(np.float16)
    w = layer.weight.detach().numpy().T.astype(np.float16)
    ir = popxl.Ir()
    with ir.main_graph:
        xv = popxl.variable(x)
        dyv = popxl.variable(dy)
        facts, fwd = LinearFP8(5, scale_metric=metric).create_graph(xv)
        bwd = fwd.autodiff(method="build_grad")
        variables = facts.init()
        call = fwd.bind(variables).call_with_info(xv)
        grads = bwd.call(dyv, args=bwd.grad_graph_info.inputs_dict(call))
        streams = [addons.host_store(t) for t in grads]
    with popxl.Session(ir, "ipu_model") as sess:
        sess.write_variables_data({variables.weight: w,
                                   variables.bias: layer.bias.detach().numpy().astype(np.float16)})
        out = [sess.run()[st].astype(np.float32) for st in streams]
    d32, x32, w32 = dy.astype(np.float32), x.astype(np.float32), w.astype(np.float32)
    np.testing.assert_allclose(out[0], d32 @ w32.T, atol=0.1)
    np.testing.assert_allclose(out[1], x32.T @ d32, atol=0.25)  # dy in float8_152
    np.testing.assert_allclose(out[2], d32.sum(0), atol=1e-2)
    with pytest.raises(ValueError, match="scale_metric option bad"):
        LinearFP8(5, scale_metric="bad")
