"""The settings module (issue 41 item 3; issue 42 items 7 and 10): every
setting read and checked in ``ipuxl.settings``, each numeric one bounded,
each error naming the variable (and key) and what is accepted; misspelt
names warned about; no other file of the package reads the environment."""
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import settings
from ipuxl import profile as prof
from ipuxl._core_loader import core

ROOT = Path(__file__).resolve().parents[2]
# The folder of the ipuxl this process imported (the checkout's python/
# with a developer core, or site-packages with an installed one): children
# import the same.
PACKAGE_PARENT = Path(popxl.__file__).resolve().parents[1]


def _env(**kw):
    env = dict(os.environ)
    if env.get("IPUXL_CORE_DIR"):
        env["IPUXL_CORE_DIR"] = os.path.abspath(env["IPUXL_CORE_DIR"])
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_PARENT), env.get("PYTHONPATH", "")])
    env.update(kw)
    return env


def _limit_memory():  # a child that tries to start 100,000 threads fails fast
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


RUN_A_SESSION = """
import numpy as np, ipuxl as popxl, ipuxl.ops as ops
from ipuxl._core_loader import core
ir = popxl.Ir()
with ir.main_graph:
    a = popxl.variable(np.ones((64, 64), np.float32), name="a")
    s = popxl.d2h_stream((64, 64), popxl.float32, name="y")
    ops.host_store(s, ops.matmul(a, a))
with popxl.Session(ir, "cpu") as sess:
    print(float(sess.run()[s][0, 0]), core.num_threads())
"""


def _python(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=_env(**env), capture_output=True,
                          text=True, timeout=120, preexec_fn=_limit_memory)


# ---- issue 42, item 7: IPUXL_NUM_THREADS is bounded and checked whole

@pytest.mark.parametrize("value", ["100000", "99999999999999999999", "4294967298", "1025"])
def test_a_thread_count_out_of_range_is_an_error_not_a_wrap_or_exhaustion(value):
    r = _python(RUN_A_SESSION, IPUXL_NUM_THREADS=value)
    assert r.returncode != 0, r.stdout
    assert f"ValueError: IPUXL_NUM_THREADS={value} is not accepted; expected a whole number " \
           f"from 1 to {settings.MAX_THREADS}" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("value", ["abc", "0", "-1", "2.5", "٣"])
def test_a_thread_count_that_is_no_positive_integer_is_an_error(value):
    r = _python(RUN_A_SESSION, IPUXL_NUM_THREADS=value)
    assert r.returncode != 0, r.stdout
    assert f"ValueError: IPUXL_NUM_THREADS={value} is not a positive integer" in r.stderr, \
        r.stderr[-2000:]


def test_the_thread_count_reaches_the_core_as_an_option():
    r = _python(RUN_A_SESSION, IPUXL_NUM_THREADS="3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["64.0", "3"]


def test_the_core_refuses_a_thread_count_out_of_range():
    n0 = core.num_threads()
    for n in (0, core.max_threads + 1, 100000):
        with pytest.raises(ValueError, match=f"{n} threads is out of range"):
            core.set_num_threads(n)
    assert core.num_threads() == n0
    with pytest.raises(ValueError, match="num_threads 5000 is out of range"):
        core.configure(core.CoreOptions(num_threads=5000, isa=core.isa()))
    assert core.options().num_threads == (settings.current().num_threads or 0)


# ---- issue 42, item 10: IPUXL_IPU_MODEL and POPLAR_ENGINE_OPTIONS name the culprit

@pytest.mark.parametrize("text,match", [
    ("allow_out_of_memory=maybe", "IPUXL_IPU_MODEL: allow_out_of_memory=maybe is not accepted; "
                                  "expected 1, true, yes, on or 0, false, no, off"),
    ("tiles_per_ipu=abc", "IPUXL_IPU_MODEL: tiles_per_ipu=abc is not accepted; expected a whole "
                          "number from 1 to 65536"),
    ("clock_hz=-1", "IPUXL_IPU_MODEL: clock_hz=-1 is not accepted; expected a number above 0"),
    ("clock_hz=nan", "IPUXL_IPU_MODEL: clock_hz=nan is not accepted"),
    ("tiles_per_ipu=0", "IPUXL_IPU_MODEL: tiles_per_ipu=0 is not accepted"),
    ("tiles_per_ipu=99999999999999999999", "tiles_per_ipu=99999999999999999999 is not accepted"),
    ("num_ipus=2000", "IPUXL_IPU_MODEL: num_ipus=2000 is not accepted; expected a whole number "
                      "from 1 to 1024"),
    ("memory_per_tile=-5", "memory_per_tile=-5 is not accepted"),
    ("available_memory_proportion=1.5", "available_memory_proportion=1.5 is not accepted"),
    ("host_bandwidth=inf", "host_bandwidth=inf is not accepted"),
    ("version=ipu3", "IPUXL_IPU_MODEL: version=ipu3 is not one of ipu1, ipu2, ipu21"),
    ("tiles_per_ipus=4", "IPUXL_IPU_MODEL: unknown option 'tiles_per_ipus' \\(did you mean "
                         "tiles_per_ipu\\?\\)"),
    ("tiles_per_ipu", "IPUXL_IPU_MODEL: expected key=value"),
])
def test_bad_ipu_model_settings_name_the_variable_and_key(monkeypatch, text, match):
    monkeypatch.setenv("IPUXL_IPU_MODEL", text)
    with pytest.raises(ValueError, match=match):
        prof.IpuModel.from_env()


@pytest.mark.parametrize("value,expected", [("1", True), ("TRUE", True), ("on", True),
                                            ("yes", True), ("0", False), ("false", False),
                                            ("Off", False), ("no", False)])
def test_ipu_model_booleans_take_the_documented_spellings(monkeypatch, value, expected):
    monkeypatch.setenv("IPUXL_IPU_MODEL", f"allow_oom={value},tiles_per_ipu=4,clock_hz=1.5e9")
    m = prof.IpuModel.from_env()
    assert m.allow_out_of_memory is expected and m.tiles_per_ipu == 4 and m.clock_hz == 1.5e9


def test_ipu_model_rejects_a_negative_clock_given_directly():
    with pytest.raises(ValueError, match="clock_hz must be a positive finite number, got -1"):
        prof.IpuModel(clock_hz=-1)


def _small_ir():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones((4, 4), np.float32), name="a")
        s = popxl.d2h_stream((4, 4), popxl.float32, name="y")
        ops.host_store(s, a + a)
    return ir


def test_a_misspelt_engine_option_is_an_error_naming_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"autoReport.all": "true", '
                       f'"autoReport.directroy": "{tmp_path / "reports"}"}}')
    with pytest.raises(ValueError, match=r"POPLAR_ENGINE_OPTIONS: unrecognised engine option "
                                         r"'autoReport.directroy' \(did you mean "
                                         r"autoReport.directory\?\)"):
        popxl.Session(_small_ir(), "cpu")
    assert not list(tmp_path.iterdir()), "no report may be written anywhere"


@pytest.mark.parametrize("text,match", [
    ('{"autoReport.all": "maybe"}', "POPLAR_ENGINE_OPTIONS: autoReport.all=maybe is not accepted"),
    ('["autoReport.all"]', "POPLAR_ENGINE_OPTIONS must be a JSON object"),
    ("{", "POPLAR_ENGINE_OPTIONS is not valid JSON"),
])
def test_bad_engine_options_are_errors(monkeypatch, text, match):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", text)
    with pytest.raises(ValueError, match=match):
        prof.autoreport_directory()


def test_known_engine_options_are_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"debug.instrument": "true", '
                       '"target.syncReplicasIndependently": true}')
    assert prof.autoreport_directory() is None
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"autoReport.outputGraphProfile": "true"}')
    assert prof.autoreport_directory() == "."


def test_a_misspelt_setting_name_warns_once_naming_the_closest():
    code = ("import warnings, ipuxl\nfrom ipuxl import settings\n"
            "settings.current(); print('ok')")
    r = _python(code, IPUXL_NUM_THREAD="2", IPUXL_CHECK_HOST_PASSSES="1", IPUXL_ZZZ="1")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("IPUXL_NUM_THREAD is not an ipuxl setting") == 1, r.stderr
    assert "IPUXL_NUM_THREAD is not an ipuxl setting and is ignored; did you mean " \
           "IPUXL_NUM_THREADS?" in r.stderr, r.stderr
    assert "did you mean IPUXL_CHECK_HOST_PASSES?" in r.stderr, r.stderr
    assert "IPUXL_ZZZ is not an ipuxl setting and is ignored; the README" in r.stderr


def test_the_misspelling_check_knows_every_setting_and_tool_variable():
    env = {s.name: "1" for s in settings.SPECS}
    env.update({name: "1" for name in settings.TOOL_VARIABLES})
    env["IPUXL_CONV_NO_WINOGRAD"] = "1"
    assert settings.unknown_variables(env) == {}
    assert settings.unknown_variables({"IPUXL_GEM": "core"}) == {"IPUXL_GEM": "IPUXL_GEMM"}


# ---- every other setting: accepted values and a named error

GOOD = [
    ("IPUXL_GEMM", "core", "gemm", "core"),
    ("IPUXL_NO_BLAS", "1", "no_blas", True),
    ("IPUXL_NO_BLAS", "0", "no_blas", False),
    ("IPUXL_PROFILE_CLOCK", "thread", "profile_clock", "thread"),
    ("IPUXL_POPDIST_SPINS", "0", "popdist_spins", 0),
    ("IPUXL_FUSED_UPDATE", "never", "fused_update", "never"),
    ("IPUXL_HOST_PASSES", "-fuse_epilogues", "host_passes", "-fuse_epilogues"),
    ("IPUXL_NO_FUSION", "1", "host_passes", "none"),
    ("IPUXL_CHECK_HOST_PASSES", "yes", "check_host_passes", True),
    ("IPUXL_REQUIRE_IPU_HW", "1", "require_ipu_hw", True),
    ("POPXL_OFFLINE_DEVICE", "cpu", "offline_device", "cpu"),
    ("IPUXL_POPDIST_TIMEOUT", "2.5", "popdist_timeout", 2.5),
    ("IPUXL_POPDIST_EXCHANGE", "mpi4py", "popdist_exchange", "mpi4py"),
    ("IPUXL_DEBUG", "conv_no_winograd, conv_no_tap", "debug",
     frozenset({"conv_no_winograd", "conv_no_tap"})),
    ("IPUXL_CONV_NO_COLS", "", "debug", frozenset({"conv_no_cols"})),
    ("IPUXL_ISA", "AVX2", "isa", "AVX2"),
    ("IPUXL_ISA", "auto", "isa", "best"),
    ("IPUXL_NUM_THREADS", "1024", "num_threads", 1024),
]


@pytest.mark.parametrize("name,value,field,expected", GOOD)
def test_each_setting_reads_its_accepted_values(name, value, field, expected):
    assert getattr(settings.read({name: value}), field) == expected


def test_the_defaults():
    s = settings.read({})
    assert (s.num_threads, s.isa, s.gemm, s.no_blas, s.profile_clock, s.fused_update,
            s.host_passes, s.check_host_passes, s.ipu_model, s.engine_options, s.popdist_timeout,
            s.popdist_exchange, s.popdist_spins, s.debug) == \
        (None, "best", "auto", False, "wall", "auto", "all", False, (), (), 300.0, "auto", 50,
         frozenset())
    assert settings.read({"IPUXL_CONV_NO_DIRECT": "1", "IPUXL_DEBUG": "conv_no_oc"}).conv_debug \
        == {"no_direct", "no_oc"}


BAD = [
    ("IPUXL_GEMM", "fast", "IPUXL_GEMM=fast is not one of auto, core, blas"),
    ("IPUXL_NO_BLAS", "maybe", "IPUXL_NO_BLAS=maybe is not accepted; expected 1, true"),
    ("IPUXL_PROFILE_CLOCK", "cpu", "IPUXL_PROFILE_CLOCK=cpu is not one of wall, thread"),
    ("IPUXL_POPDIST_SPINS", "1e9", "IPUXL_POPDIST_SPINS=1e9 is not accepted; expected a whole "
                                   "number from 0 to 1000000"),
    ("IPUXL_POPDIST_SPINS", "-3", "IPUXL_POPDIST_SPINS=-3 is not accepted"),
    ("IPUXL_FUSED_UPDATE", "sometimes", "IPUXL_FUSED_UPDATE=sometimes is not one of auto, always, "
                                        "never"),
    ("IPUXL_CHECK_HOST_PASSES", "2", "IPUXL_CHECK_HOST_PASSES=2 is not accepted"),
    ("IPUXL_NO_FUSION", "y", "IPUXL_NO_FUSION=y is not accepted"),
    ("IPUXL_REQUIRE_IPU_HW", "please", "IPUXL_REQUIRE_IPU_HW=please is not accepted"),
    ("POPXL_OFFLINE_DEVICE", "gpu", "POPXL_OFFLINE_DEVICE=gpu is not one of cpu, ipu_model, "
                                    "ipu_hw"),
    ("IPUXL_POPDIST_TIMEOUT", "0", "IPUXL_POPDIST_TIMEOUT=0 is not accepted; expected a number "
                                   "above 0 and at most 86400"),
    ("IPUXL_POPDIST_TIMEOUT", "soon", "IPUXL_POPDIST_TIMEOUT=soon is not accepted"),
    ("IPUXL_POPDIST_TIMEOUT", "1e99", "IPUXL_POPDIST_TIMEOUT=1e99 is not accepted"),
    ("IPUXL_POPDIST_EXCHANGE", "fast", "IPUXL_POPDIST_EXCHANGE=fast is not one of auto, native, "
                                       "mpi4py"),
    ("IPUXL_DEBUG", "conv_no_winogard", "IPUXL_DEBUG: unknown debug switch 'conv_no_winogard' "
                                        r"\(did you mean conv_no_winograd\?\)"),
]


@pytest.mark.parametrize("name,value,match", BAD)
def test_each_bad_value_is_a_value_error_naming_the_setting(name, value, match):
    with pytest.raises(ValueError, match=match):
        settings.read({name: value})


def test_a_bad_isa_is_refused_at_import_naming_the_setting():
    r = _python("import ipuxl", IPUXL_ISA="sse9")
    assert r.returncode != 0
    assert "ValueError: IPUXL_ISA=sse9 is not an instruction-set level of this build" in r.stderr


def test_session_settings_follow_the_environment_and_import_settings_do_not(monkeypatch):
    before = settings.current()
    monkeypatch.setenv("IPUXL_FUSED_UPDATE", "never")
    monkeypatch.setenv("IPUXL_GEMM", "blas" if before.gemm != "blas" else "core")
    now = settings.current()
    assert now.fused_update == "never" and now.gemm == before.gemm
    monkeypatch.setenv("IPUXL_FUSED_UPDATE", "sometimes")
    with pytest.raises(ValueError, match="IPUXL_FUSED_UPDATE=sometimes"):
        settings.current()


def test_override_changes_session_settings_without_the_environment():
    before = dict(os.environ)
    with settings.override(check_host_passes=True, ipu_model={"tiles_per_ipu": 8}) as s:
        assert s.check_host_passes and settings.current().ipu_model == (("tiles_per_ipu", 8),)
        assert prof.IpuModel.from_env().tiles_per_ipu == 8
    assert dict(os.environ) == before
    assert settings.current().ipu_model == settings.read(os.environ).ipu_model
    with pytest.raises(ValueError, match="'num_threads' is fixed when ipuxl is imported"):
        with settings.override(num_threads=2):
            pass
    with pytest.raises(ValueError, match=r"'check_host_pass' is not a setting \(did you mean "
                                         r"check_host_passes\?\)"):
        with settings.override(check_host_pass=True):
            pass
    with pytest.raises(ValueError, match="tiles_per_ipu=0 is not accepted"):
        with settings.override(ipu_model={"tiles_per_ipu": 0}):
            pass


def test_settings_are_frozen():
    s = settings.current()
    with pytest.raises(Exception, match="cannot assign"):
        s.num_threads = 4


def test_fused_update_mode_reaches_the_core_as_an_argument():
    assert not core.prefer_fused_input_grad_update(17, 64, 64, core.FusedUpdate.always)
    assert core.prefer_fused_input_grad_update(8, 64, 64, core.FusedUpdate.always)
    assert not core.prefer_fused_input_grad_update(8, 4096, 4096, core.FusedUpdate.never)


# ---- the host-pass checker lives in ipuxl.testing

def test_the_host_pass_checker_is_chosen_by_the_settings():
    from ipuxl.testing import HostPassChecker

    w0 = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(w0, name="w")
        b = popxl.variable(np.ones(8, np.float32), name="b")
        s = popxl.d2h_stream((8, 8), popxl.float32, name="y")
        ops.host_store(s, ops.transpose(w) @ w + b)  # fold_transposes, fuse_epilogues
    with settings.override(check_host_passes=True, host_passes="all"):
        sess = popxl.Session(ir, "cpu")
    assert sess._prog.host_passes["fold_transposes"] and sess._prog.host_passes["fuse_epilogues"]
    assert isinstance(sess._host_pass_checker, HostPassChecker)
    with sess:
        np.testing.assert_allclose(sess.run()[s], w0.T.astype(np.float64) @ w0 + 1, rtol=1e-6)
    with settings.override(check_host_passes=False):
        assert popxl.Session(ir, "cpu")._host_pass_checker is None


# ---- the profile command steers sessions without the environment

def test_profile_capture_collects_the_sessions_of_a_block():
    with prof.capture(prof.IpuModel(tiles_per_ipu=16)) as got:
        popxl.Session(_small_ir(), "cpu")
    popxl.Session(_small_ir(), "cpu")
    assert len(got) == 1 and got[0].profile.num_tiles == 16


# ---- nothing else reads the environment

ALLOWED = {"python/ipuxl/settings.py"}
READS = re.compile(r"\bos\.environ\b|\bos\.getenv\b|\bgetenv\s*\(|\benviron\b|"
                   r"\bsecure_getenv\b|\bputenv\b|\bsetenv\s*\(")


def test_no_file_but_settings_reads_the_environment():
    offenders = []
    for top in ("python/ipuxl", "cpp", "ext"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in (".py", ".cpp", ".hpp", ".h", ".c", ".cc", ".inc") or \
                    not path.is_file():
                continue
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                code = line.split("#", 1)[0] if path.suffix == ".py" else line.split("//", 1)[0]
                if READS.search(code):
                    offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "read the setting in ipuxl/settings.py instead:\n" + "\n".join(offenders)


def test_the_readme_documents_every_setting():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Settings"):]
    for spec in settings.SPECS:
        assert f"`{spec.name}`" in table, spec.name
    for switch in settings.DEBUG_SWITCHES:
        assert f"`{switch}`" in table, switch
