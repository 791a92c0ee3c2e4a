"""``ipuxl.compat`` and ``ipuxl run``: unmodified PopXL scripts run on ipuxl,
and a real popxl, when importable, is never shadowed."""
import os
import subprocess
import sys
import textwrap
import pytest

pytestmark = pytest.mark.slow  # runs scripts in subprocesses

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import popxl
    import popxl.ops as ops
    from popxl.ops.call import CallSiteInfo

    ir = popxl.Ir()
    with ir.main_graph:
        def increment(x: popxl.Tensor):
            return x + popxl.constant(np.ones(x.shape, x.dtype.as_numpy()), name="one")
        x = popxl.variable(np.full((2, 2), 3.0, np.float32), name="x")
        g = ir.create_graph(increment, x)
        info = ops.call_with_info(g, x)
        assert isinstance(info, CallSiteInfo)
        s = popxl.d2h_stream((2, 2), popxl.float32, name="y")
        ops.host_store(s, info.outputs[0])
    with popxl.Session(ir, "ipu_model") as session:
        out = session.run()[s]
    assert (out == 4.0).all(), out
    print("ok", popxl.__name__, sys.argv[1:])
""")


def _env(extra_path=None):
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_ipuxl_run_executes_an_unmodified_popxl_script(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, "-m", "ipuxl", "run", str(script), "--flag", "7"],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ok ipuxl ['--flag', '7']" in r.stdout


def test_ipuxl_run_propagates_the_scripts_exit_code(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys\nimport popxl\nsys.exit(3)\n")
    r = subprocess.run([sys.executable, "-m", "ipuxl", "run", str(script)],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert r.returncode == 3


def test_real_popxl_is_not_shadowed(tmp_path):
    fake = tmp_path / "site" / "popxl"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    code = ("import ipuxl.compat as c; c.install(); import popxl; "
            "print('real' if getattr(popxl, 'REAL', False) else 'alias')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_env(str(tmp_path / "site")), timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "real"


def test_submodule_imports_share_ipuxl_objects():
    code = textwrap.dedent("""
        import ipuxl, ipuxl.compat as c
        c.install()
        import popxl, popxl.ops, popxl.ops.call
        from popxl.ops.call import CallSiteInfo
        import ipuxl.ops
        assert popxl is ipuxl and popxl.ops is ipuxl.ops
        assert callable(popxl.ops.call), popxl.ops.call
        assert CallSiteInfo is ipuxl.ops.CallSiteInfo
        assert popxl.Tensor is ipuxl.tensor.Tensor
        print("shared")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "shared" in r.stdout


ADDONS_SCRIPT = textwrap.dedent("""
    import numpy as np
    import popxl
    import popxl.ops as ops
    import popxl_addons as addons


    class Linear(addons.Module):
        def __init__(self, out_features):
            super().__init__()
            self.out_features = out_features

        def build(self, x):
            w = self.add_variable_input("weight", lambda: np.full((x.shape[-1], self.out_features), 0.5,
                                        np.float32), popxl.float32)
            b = self.add_variable_input("bias", lambda: np.zeros(self.out_features, np.float32),
                                        popxl.float32)
            return x @ w + b


    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 3), np.float32), name="x")
        facts, graph = Linear(4).create_graph(x)
        bwd = addons.autodiff(graph)
        variables = facts.init()
        info = graph.bind(variables).call_with_info(x)
        y = info.outputs[0]
        seed = popxl.constant(np.ones((2, 4), np.float32))
        bwd_info = bwd.call_with_info(seed, args=bwd.grad_graph_info.inputs_dict(info))
        grads = bwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(info, bwd_info)
        for v in variables.tensors:
            ops.scaled_add_(v, grads[v], b=-0.1)
        s = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(s, y)
    with popxl.Session(ir, "ipu_model") as session:
        out = session.run()[s]
        w = session.get_tensor_data(variables.weight)
    assert np.allclose(out, 1.5), out
    assert np.allclose(w, 0.5 - 0.1 * 2.0), w  # dW = x^T @ ones = 2
    print("addons ok", type(addons).__name__, addons.__name__)
""")


def test_ipuxl_run_executes_an_unmodified_popxl_addons_program(tmp_path):
    script = tmp_path / "addons_prog.py"
    script.write_text(ADDONS_SCRIPT)
    r = subprocess.run([sys.executable, "-m", "ipuxl", "run", str(script)],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "addons ok module ipuxl.addons" in r.stdout
