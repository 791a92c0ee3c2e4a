"""Catalogue: settings read from the environment and PopART session options.
A bad value is an error naming the setting (at import, or when the Session
is built), never silently ignored."""
import os
import subprocess
import sys

import pytest

import ipuxl as popxl

PROGRAM = """
import numpy as np, ipuxl as popxl, ipuxl.ops as ops
ir = popxl.Ir()
with ir.main_graph:
    a = popxl.variable(np.ones((8, 8), np.float32), name="a")
    y = ops.matmul(a, a)
    s = popxl.d2h_stream(y.shape, y.dtype, name="y")
    ops.host_store(s, y)
with popxl.Session(ir, "ipu_model") as sess:
    print(sess.run()[s][0, 0])
"""

ENV_CASES = [
    ("gemm_typo", {"IPUXL_GEMM": "fast"}, r"ValueError: IPUXL_GEMM=fast is not one of auto, core, blas"),
    ("fused_update_typo", {"IPUXL_FUSED_UPDATE": "sometimes"}, r"ValueError: IPUXL_FUSED_UPDATE=sometimes is not one of auto, always, never"),
    ("threads_negative", {"IPUXL_NUM_THREADS": "-1"}, r"ValueError: IPUXL_NUM_THREADS=-1 is not a positive integer"),
    ("threads_word", {"IPUXL_NUM_THREADS": "two"}, r"ValueError: IPUXL_NUM_THREADS=two is not a positive integer"),
    ("isa_unknown", {"IPUXL_ISA": "sse9"}, r"ValueError: IPUXL_ISA=sse9 is not an instruction-set level"),
    ("host_passes_unknown", {"IPUXL_HOST_PASSES": "bogus"}, r"ValueError: host passes: unknown pass\(es\) bogus"),
    ("core_dir_empty", {"IPUXL_CORE_DIR": "/nonexistent-ipuxl-core"}, r"ImportError: IPUXL_CORE_DIR='/nonexistent-ipuxl-core' holds no _core extension"),
    # Issue 42, item 7: numbers past the core's int, and past the bound, are refused whole
    # (100,000 threads: ipu_model_tests/session/test_settings.py, under a memory limit).
    ("threads_overflow", {"IPUXL_NUM_THREADS": "99999999999999999999"}, r"ValueError: IPUXL_NUM_THREADS=99999999999999999999 is not accepted; expected a whole number from 1 to 1024"),
    ("threads_wrap", {"IPUXL_NUM_THREADS": "4294967298"}, r"ValueError: IPUXL_NUM_THREADS=4294967298 is not accepted; expected a whole number from 1 to 1024"),
    ("threads_zero", {"IPUXL_NUM_THREADS": "0"}, r"ValueError: IPUXL_NUM_THREADS=0 is not a positive integer"),
    # Issue 42, item 10: the variable and the key are named.
    ("ipu_model_bool", {"IPUXL_IPU_MODEL": "allow_out_of_memory=maybe"}, r"ValueError: IPUXL_IPU_MODEL: allow_out_of_memory=maybe is not accepted; expected 1, true, yes, on or 0, false, no, off"),
    ("ipu_model_int", {"IPUXL_IPU_MODEL": "tiles_per_ipu=abc"}, r"ValueError: IPUXL_IPU_MODEL: tiles_per_ipu=abc is not accepted; expected a whole number from 1 to 65536"),
    ("ipu_model_clock", {"IPUXL_IPU_MODEL": "clock_hz=-1"}, r"ValueError: IPUXL_IPU_MODEL: clock_hz=-1 is not accepted; expected a number above 0"),
    ("engine_option_typo", {"POPLAR_ENGINE_OPTIONS": '{"autoReport.all": "true", "autoReport.directroy": "/tmp/r"}'}, r"ValueError: POPLAR_ENGINE_OPTIONS: unrecognised engine option 'autoReport.directroy' \(did you mean autoReport.directory\?\)"),
    ("isa_missing_level", {"IPUXL_ISA": "neon9"}, r"ValueError: IPUXL_ISA=neon9 is not an instruction-set level of this build"),
    ("debug_switch_typo", {"IPUXL_DEBUG": "conv_no_winogard"}, r"ValueError: IPUXL_DEBUG: unknown debug switch 'conv_no_winogard' \(did you mean conv_no_winograd\?\)"),
]


@pytest.mark.slow  # one subprocess per setting
@pytest.mark.parametrize("env,match", [c[1:] for c in ENV_CASES], ids=[c[0] for c in ENV_CASES])
def test_bad_environment_settings_are_named(env, match):
    p = subprocess.run([sys.executable, "-c", PROGRAM], env=dict(os.environ, **env),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0, p.stdout
    import re
    assert re.search(match, p.stderr), p.stderr[-2000:]


def test_a_misspelt_setting_name_is_warned_about():
    p = subprocess.run([sys.executable, "-c", PROGRAM], env=dict(os.environ, IPUXL_NUM_THREAD="1"),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "RuntimeWarning: IPUXL_NUM_THREAD is not an ipuxl setting and is ignored; did you mean IPUXL_NUM_THREADS?" in p.stderr, p.stderr


@pytest.mark.slow  # one subprocess per setting
def test_good_environment_settings_give_the_same_result():
    env = dict(os.environ, IPUXL_GEMM="core", IPUXL_FUSED_UPDATE="never", IPUXL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "8.0"


OPTION_CASES = [
    ("io_tiles_odd", 31, RuntimeError, r"31 is an invalid number of IO tiles. Number of IO tiles must be an even number and >= 32"),
    ("io_tiles_too_few", 16, RuntimeError, r"16 is an invalid number of IO tiles"),
    ("io_tiles_negative", -2, TypeError, r"numIOTiles must be a non-negative int, got -2"),
    ("io_tiles_string", "32", TypeError, r"numIOTiles must be a non-negative int, got '32'"),
]


@pytest.mark.parametrize("value,exc,match", [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_bad_session_options_are_refused(value, exc, match):
    opts = popxl.Ir()._pb_ir.getSessionOptions()
    with pytest.raises(exc, match=match):
        opts.numIOTiles = value


@pytest.mark.parametrize("name", ["enableOutlining", "foo"])
def test_unknown_session_options_say_what_is_offered(name):
    opts = popxl.Ir()._pb_ir.getSessionOptions()
    with pytest.raises(AttributeError, match=f"offers only 'numIOTiles', .*not '{name}'"):
        setattr(opts, name, True)
