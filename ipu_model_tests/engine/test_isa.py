"""Runtime instruction-set dispatch (cpp/core/isa.hpp).

The core picks its kernels by the CPU at import (IPUXL_ISA forces a level).
These tests check that the dispatcher picks a level the CPU supports, that a
bad IPUXL_ISA is refused with an error naming the setting, and that every
level the CPU has computes the same results (against NumPy float64, and
against each other) - the GEMM and matmul tests run once per forced level,
each in a fresh interpreter.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ipuxl import _core as core

pytestmark = pytest.mark.slow  # reruns test files at every instruction-set level

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
LEVELS = core.isa_levels()


def _env(**extra):
    env = dict(os.environ)
    if "IPUXL_CORE_DIR" in env:  # developer build: the same package as this process
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + \
            env.get("PYTHONPATH", "")
    env.pop("IPUXL_ISA", None)
    env.update(extra)
    return env


def _run(code, **extra):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=_env(**extra),
                          capture_output=True, text=True, timeout=300)


def test_dispatcher_picks_a_supported_level():
    assert LEVELS, "no level at all"
    assert LEVELS[0] in ("sse", "neon", "generic")  # the baseline is always there
    assert core.isa() in LEVELS
    if os.environ.get("IPUXL_ISA") in (None, "", "best", "auto"):
        assert core.isa() == LEVELS[-1]  # the best one by default
    # A fresh process without the setting picks the best level.
    r = _run("from ipuxl import _core as c; print(c.isa(), *c.isa_levels())")
    assert r.returncode == 0, r.stderr
    picked, *levels = r.stdout.split()
    assert levels == LEVELS and picked == LEVELS[-1]


@pytest.mark.parametrize("value", ["avx1024", "AVX-2", "x87"])
def test_unknown_level_is_refused(value):
    r = _run("import ipuxl", IPUXL_ISA=value)
    assert r.returncode != 0
    assert "ValueError" in r.stderr and f"IPUXL_ISA={value}" in r.stderr, r.stderr


def test_unsupported_level_is_refused():
    known = ["sse", "avx2", "avx512"] if LEVELS[0] == "sse" else LEVELS
    missing = [lv for lv in known if lv not in LEVELS]
    if not missing:
        pytest.skip("this CPU supports every level of the build")
    r = _run("import ipuxl", IPUXL_ISA=missing[0])
    assert r.returncode != 0
    assert f"IPUXL_ISA={missing[0]}" in r.stderr and "does not support" in r.stderr, r.stderr


@pytest.mark.parametrize("level", LEVELS)
def test_forced_level_is_used(level):
    r = _run("from ipuxl import _core as c; print(c.isa())", IPUXL_ISA=level)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == level


@pytest.mark.parametrize("level", LEVELS)
def test_fma_peak_probe(level):
    assert core.fma_peak(level, 1, 0.005) > 0.1
    with pytest.raises(ValueError, match="not a level"):
        core.fma_peak("avx9000", 1, 0.005)
    assert core.fma_peak_cpu(level, 0.005) > 0.1
    with pytest.raises(ValueError, match="fma_peak_cpu: 'avx9000' is not a level"):
        core.fma_peak_cpu("avx9000", 0.005)


# The GEMM tests (every GEMM path), the fused input-gradient update's and
# the convolutions' (per-level direct kernel);
# the elementwise copies, the folded updates and the SGD updates are covered
# by test_levels_agree_with_each_other_and_float64 below.
LEVEL_TESTS = ["engine/test_gemm.py", "lowering/test_input_grad_update_fusion.py",
               "examples/test_transformer_block.py", "ops/test_conv_pool.py"]


@pytest.mark.parametrize("level", LEVELS)
def test_gemm_and_matmul_tests_at_each_level(level):
    args = [os.path.join(TESTS, t) for t in LEVEL_TESTS]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        *args], env=_env(IPUXL_ISA=level), capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout


# Results of one program at every level: GEMMs of the MLP's shapes (both
# implementations), the fused update, GELU and a few SGD steps of an MLP.
_LEVEL_PROGRAM = """
import json, sys
import numpy as np
import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import _core as core

rng = np.random.default_rng(5)
out = {"isa": core.isa()}
for ta, tb, M, N, K in [(0, 0, 8, 512, 784), (0, 1, 8, 784, 512), (1, 0, 784, 512, 8),
                        (0, 0, 128, 512, 512), (1, 0, 512, 10, 128), (0, 1, 33, 65, 129)]:
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
    B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
    for impl in (1, 3):  # the core's kernel, and with B pre-packed
        C = np.zeros((M, N), np.float32)
        core._test_sgemm(bool(ta), bool(tb), 1.0, A, B, 0.0, C, impl)
        out[f"gemm{impl}_{ta}{tb}_{M}x{N}x{K}"] = C.tolist()

# An MLP trained a few steps with SGD at batch 8, as bench/mnist_step.py does
# it (GEMMs with bias and GELU epilogues, the fused input-gradient update,
# folded updates, bias-gradient reductions).
import ipuxl.addons as addons
w0 = [rng.normal(0, 0.1, s).astype(np.float32) for s in [(64, 96), (96, 96), (96, 10)]]


class Linear(addons.Module):
    def __init__(self, w):
        super().__init__()
        self.w0 = w

    def build(self, x):
        w = self.add_variable_input("weight", lambda: self.w0.copy(), x.dtype)
        b = self.add_variable_input("bias", lambda: np.zeros(self.w0.shape[1], np.float32),
                                    x.dtype)
        return x @ w + b


class Net(addons.Module):
    def __init__(self):
        super().__init__()
        self.l0, self.l1, self.l2 = (Linear(w) for w in w0)

    def build(self, x):
        return self.l2(ops.gelu(self.l1(ops.gelu(self.l0(x)))))


ir = popxl.Ir()
with ir.main_graph:
    xs = popxl.h2d_stream((8, 64), popxl.float32, "x")
    ls = popxl.h2d_stream((8,), popxl.int32, "labels")
    x, labels = ops.host_load(xs), ops.host_load(ls)
    facts, fwd = Net().create_graph(x)
    bwd = addons.autodiff(fwd)
    variables = facts.init()
    info = fwd.bind(variables).call_with_info(x)
    loss, dlogits = addons.ops.cross_entropy_with_grad(info.outputs[0], labels)
    ys = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
    ops.host_store(ys, loss)
    binfo = bwd.call_with_info(dlogits, args=bwd.grad_graph_info.inputs_dict(info))
    grads = bwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(info, binfo)
    for v in variables.tensors:
        ops.scaled_add_(v, grads[v], b=-0.05)
with popxl.Session(ir, "ipu_model") as s:
    losses = [float(s.run({xs: rng.standard_normal((8, 64)).astype(np.float32),
                           ls: rng.integers(0, 10, 8).astype(np.int32)})[ys])
              for _ in range(5)]
    fused = "MatMulInputGradUpdate" in s.engine.describe(host=True)
out["mlp_losses"] = losses
out["fused"] = fused
json.dump(out, sys.stdout)
"""


def _fp64_gemm(key):
    impl, rest = key[4:].split("_", 1)
    flags, shape = rest.split("_")
    return flags, [int(v) for v in shape.split("x")]


def test_levels_agree_with_each_other_and_float64():
    results = {}
    for level in LEVELS:
        r = _run(_LEVEL_PROGRAM, IPUXL_ISA=level)
        assert r.returncode == 0, r.stderr
        results[level] = json.loads(r.stdout)
        assert results[level]["isa"] == level
    # Regenerate the operands (same seed, same order) for the float64 reference.
    rng = np.random.default_rng(5)
    base = results[LEVELS[0]]
    for key in [k for k in base if k.startswith("gemm1_")]:
        flags, (M, N, K) = _fp64_gemm(key)
        ta, tb = int(flags[0]), int(flags[1])
        A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32).astype(np.float64)
        B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32).astype(np.float64)
        opa, opb = (A.T if ta else A), (B.T if tb else B)
        ref = opa @ opb
        # float32 rounding of a K-term sum, whatever the order of summation
        tol = 2e-7 * K * (np.abs(opa) @ np.abs(opb)) + 1e-6
        for level in LEVELS:
            for impl in (1, 3):
                got = np.array(results[level][key.replace("gemm1_", f"gemm{impl}_")])
                assert np.all(np.abs(got - ref) <= tol), (level, impl, key)
    losses = {lv: np.array(results[lv]["mlp_losses"]) for lv in LEVELS}
    for lv in LEVELS[1:]:
        np.testing.assert_allclose(losses[lv], losses[LEVELS[0]], rtol=1e-5)
