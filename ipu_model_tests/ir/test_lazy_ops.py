"""``ipuxl.ops`` imports each op family on first use: the public surface,
gradient rules and user rules must behave as if every family were imported."""
import importlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import grad

HERE = os.path.dirname(os.path.abspath(__file__))


def run_fresh(code: str) -> str:
    """Run code in a fresh interpreter (nothing imported yet); its stdout."""
    env = dict(os.environ)
    python_dir = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
    if "IPUXL_CORE_DIR" in env:  # developer build: same package as this process
        env["PYTHONPATH"] = python_dir + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("family", sorted(ops.EXPORTS))
def test_exports_table_matches_each_family(family):
    mod = importlib.import_module(f"ipuxl.ops.{family}")
    assert tuple(mod.__all__) == ops.EXPORTS[family]
    for name in mod.__all__:
        assert getattr(ops, name) is getattr(mod, name)


def test_every_ops_module_is_listed():
    ops_dir = os.path.dirname(ops.__file__)
    modules = {f[:-3] for f in os.listdir(ops_dir) if f.endswith(".py") and f != "__init__.py"}
    packages = {d for d in os.listdir(ops_dir)
                if os.path.exists(os.path.join(ops_dir, d, "__init__.py"))}
    listed = set(ops.EXPORTS) | set(ops.SUBPACKAGES) | set(ops.RULE_MODULES) | {"utils", "rules"}
    assert modules | packages <= listed, (modules | packages) - listed


def test_public_names_and_star_import():
    for name in ("gather", "conditional", "softmax", "var_updates", "collectives", "PadType"):
        assert name in dir(ops)
    ns = {}
    exec("from ipuxl.ops import *", ns)
    assert set(ops.__all__) <= set(ns)
    assert callable(ns["gather"]) and callable(ns["call"]) and callable(ns["matmul"])
    with pytest.raises(AttributeError, match="no attribute 'no_such_op'"):
        ops.no_such_op  # noqa: B018


@pytest.mark.slow  # runs fresh interpreters
def test_import_ipuxl_imports_no_op_family():
    out = run_fresh("""
        import sys
        import ipuxl, ipuxl.addons
        print(sorted(m for m in sys.modules if m.startswith("ipuxl.ops.")))
    """)
    assert out.strip() == "[]"


@pytest.mark.slow  # runs fresh interpreters
def test_family_named_after_its_builder_keeps_the_builder():
    # Importing the submodule directly (not through ops.<name>) must not
    # replace the builder ops.call / ops.where with the module.
    out = run_fresh("""
        import types
        import ipuxl.ops as ops
        import ipuxl.ops.where, ipuxl.ops.call
        from ipuxl.ops.conditional import ConditionalSiteInfo
        print(all(isinstance(getattr(ops, n), types.FunctionType)
                  for n in ("where", "call", "call_with_info", "conditional")))
    """)
    assert out.strip() == "True"


@pytest.mark.slow  # runs fresh interpreters
def test_rules_of_unimported_families_are_found():
    out = run_fresh("""
        import sys
        from ipuxl import grad
        assert "ipuxl.ops.gather" not in sys.modules
        kinds = grad.registered_op_types()
        print(kinds.get("Gather"), grad.get_grad_rule("TopK") is not None)
    """)
    assert out.split() == ["rule", "True"]


@pytest.mark.slow  # runs fresh interpreters
def test_user_rule_survives_the_lazy_import_of_its_family():
    # A user registers a rule for Softmax before ipuxl.ops.softmax is
    # imported; the family's own registration must not replace it.
    out = run_fresh("""
        import sys
        import numpy as np
        import ipuxl as popxl
        import ipuxl.ops as ops
        from ipuxl.grad import register_grad, get_grad_rule
        assert "ipuxl.ops.softmax" not in sys.modules

        @register_grad("Softmax")
        def user_rule(ctx):
            return [ctx.g() * 0.0]

        ir = popxl.Ir()
        with ir.main_graph:
            x = popxl.variable(np.ones((2, 3), np.float32))
            ops.softmax(x, axis=1)  # imports ipuxl.ops.softmax now
        print(get_grad_rule("Softmax").build is user_rule)
    """)
    assert out.strip() == "True"


def test_autodiff_through_lazily_imported_families_matches_numpy():
    # gather and slicing are imported on first use inside the graph build.
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((5, 4)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_empty_graph("f")
        with g:
            x = popxl.graph_input((5, 4), popxl.float32, "x")
            idx = popxl.constant(np.array([4, 0, 0], np.int32))
            y = ops.slice(ops.gather(x, idx), start=[0, 1], stop=[3, 3])
            popxl.graph_output(ops.sum(y * y))
        from ipuxl.transforms import autodiff
        gi = autodiff(g)
        xv = popxl.variable(x0, name="x")
        info = ops.call_with_info(g, xv)
        (dx,) = ops.call(gi.graph, popxl.constant(np.float32(1.0)),
                         inputs_dict=gi.inputs_dict(info))
        d2h = popxl.d2h_stream(dx.shape, dx.dtype, "dx")
        ops.host_store(d2h, dx)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run()[d2h]
    want = np.zeros_like(x0)
    for r in [4, 0, 0]:
        want[r, 1:3] += 2 * x0[r, 1:3]
    np.testing.assert_allclose(got, want, rtol=1e-6)
