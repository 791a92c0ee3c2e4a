"""Second order: differentiate a graph that calls a forward graph and its
gradient graph; compare with PyTorch (create_graph=True)."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms

from grad_harness import second_order_of, torch_second_order

torch = pytest.importorskip("torch")


def test_seed_notebook_example():
    """simple(a, b) = (a + b) * b; L0 = sum(simple); L1 = sum(dL0/da^2 + dL0/db^2)."""
    ad = np.array([0.5, -1.0, 2.0], np.float32)
    bd = np.array([1.5, 0.25, -0.75], np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((3,), popxl.float32)
        simple = ir.create_graph(lambda a, b: (a + b) * b, spec, spec)
        info0 = transforms.autodiff(simple)

        def l1(a, b):
            c = ops.call_with_info(simple, a, b)
            one = popxl.constant(np.ones(3, np.float32), name="one")
            da, db = ops.call(info0.graph, one, inputs_dict=info0.inputs_dict(c))
            return ops.sum(da * da + db * db)

        g1 = ir.create_graph(l1, spec, spec)
        a, b = popxl.variable(ad, name="a"), popxl.variable(bd, name="b")
        c1 = ops.call_with_info(g1, a, b)
        info1 = transforms.autodiff(g1)
        da, db = ops.call(info1.graph, popxl.constant(np.ones((), np.float32)),
                          inputs_dict=info1.inputs_dict(c1))
        ss = [popxl.d2h_stream(t.shape, t.dtype) for t in (c1.outputs[0], da, db)]
        for s, t in zip(ss, (c1.outputs[0], da, db)):
            ops.host_store(s, t)
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    ta, tb = torch.tensor(ad, requires_grad=True), torch.tensor(bd, requires_grad=True)
    l0 = ((ta + tb) * tb).sum()
    ga, gb = torch.autograd.grad(l0, [ta, tb], create_graph=True)
    L1 = (ga ** 2 + gb ** 2).sum()
    ea, eb = torch.autograd.grad(L1, [ta, tb])
    np.testing.assert_allclose(r[ss[0]], L1.item(), rtol=1e-5)
    np.testing.assert_allclose(r[ss[1]], ea.numpy(), rtol=1e-5)
    np.testing.assert_allclose(r[ss[2]], eb.numpy(), rtol=1e-5)


@pytest.mark.parametrize("case", ["cube", "bilinear", "sin_matmul"])
def test_hessian_vector_products_against_torch(case):
    rng = np.random.default_rng(7)
    if case == "cube":
        fn_i = fn_t = lambda x: x * x * x
        arrays = [rng.standard_normal(4).astype(np.float32)]
    elif case == "bilinear":
        fn_i = fn_t = lambda x, w: x * w
        arrays = [rng.standard_normal(3).astype(np.float32) for _ in range(2)]
    else:
        fn_i = lambda x, w: ops.sin(x @ w)  # noqa: E731
        fn_t = lambda x, w: torch.sin(x @ w)  # noqa: E731
        arrays = [rng.standard_normal((2, 3)).astype(np.float32),
                  rng.standard_normal((3, 2)).astype(np.float32)]
    got, seeds, v = second_order_of(fn_i, *arrays)
    want = torch_second_order(fn_t, *arrays, seeds=seeds, v=v)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
