"""``ipuxl.compat`` and ``ipuxl run``: unmodified PopXL scripts run on ipuxl,
and a real popxl, when importable, is never shadowed."""
import os
import subprocess
import sys
import textwrap

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
