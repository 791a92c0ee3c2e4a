"""``import popart`` through ipuxl's compat aliases (ipuxl.popart_api),
``Session.device`` as a ``popart.DeviceInfo``, and the PopART session
options Graphcore's applications set — against PopART's documented
behaviour (python/popart/popart_core/popart.cpp, sessionoptions.hpp)."""
import importlib
import subprocess
import sys

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile.model import IpuModel


def _popart():
    import ipuxl.compat

    ipuxl.compat.install()
    return importlib.import_module("popart")


def _ir_with_an_op(replication=1):
    ir = popxl.Ir(replication)
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 2), np.float32), name="x")
        ops.host_store(popxl.d2h_stream(x.shape, x.dtype, name="y"), x + 1)
    return ir


def test_version_is_ipuxl_s_and_says_so():
    popart = _popart()
    assert popart.versionString() == f"{popxl.__version__}+ipuxl"
    assert popart.versionNumber() == tuple(int(p) for p in popxl.__version__.split("."))
    assert all(isinstance(p, int) for p in popart.versionNumber())


def test_anything_else_is_not_implemented_and_named():
    popart = _popart()
    with pytest.raises(NotImplementedError, match=r"popart\.Builder is not supported"):
        popart.Builder
    with pytest.raises(NotImplementedError, match=r"popart\.InferenceSession"):
        from popart import InferenceSession  # noqa: F401
    assert not hasattr(popart, "__wrapped__")   # dunder probes stay AttributeErrors


def test_popart_internals_are_not_importable():
    # In a fresh interpreter: the alias must not leave a half-imported module.
    code = ("import ipuxl.compat; ipuxl.compat.install(); import popart\n"
            "try:\n    import popart._internal.ir\nexcept ModuleNotFoundError as e:\n"
            "    print('MNF', e.name)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["MNF", "popart._internal"]


def test_session_device_is_a_popart_device_info():
    popart = _popart()
    ir = _ir_with_an_op(replication=2)
    session = popxl.Session(ir, IpuModel(tiles_per_ipu=16))
    d = session.device
    assert isinstance(d, popart.DeviceInfo)
    assert d.type == popart.DeviceType.IpuModel
    assert d.numIpus == 2 and d.tilesPerIPU == d.tilesPerIpu == 16 and d.ipuVersion == "ipu2"
    assert d.isAttached is False
    with session:
        assert session.device.isAttached is True
    assert d.isAttached is False
    assert session.device == d and "numIpus=2" in repr(d)
    with pytest.raises(NotImplementedError, match="DeviceInfo.detach"):
        d.detach()


def test_cpu_device_info_is_one_ipu_of_one_tile():
    popart = _popart()
    d = popxl.Session(_ir_with_an_op(), "cpu").device
    assert d.type == popart.DeviceType.Cpu and d.numIpus == 1 and d.tilesPerIPU == 1


def test_session_options_type_is_popart_s():
    popart = _popart()
    assert isinstance(popxl.Ir()._pb_ir.getSessionOptions(), popart.SessionOptions)


def test_partials_type_matmuls():
    opts = popxl.Ir()._pb_ir.getSessionOptions()
    assert opts.partialsTypeMatMuls == ""
    for v in ("half", "float", ""):
        opts.partialsTypeMatMuls = v
        assert opts.partialsTypeMatMuls == v
    with pytest.raises(ValueError, match="partialsTypeMatMuls must be 'float' or 'half'"):
        opts.partialsTypeMatMuls = "double"
    with pytest.raises(TypeError, match="partialsTypeMatMuls must be a str"):
        opts.partialsTypeMatMuls = 16


def test_engine_options_item_assignment_is_kept():
    ir = popxl.Ir()
    opts = ir._pb_ir.getSessionOptions()
    assert opts.engineOptions == {}
    # PopART's DictWrapper writes item assignments back; so does ipuxl.
    opts.engineOptions["target.syncReplicasIndependently"] = "true"
    assert ir._pb_ir.getSessionOptions().engineOptions == {"target.syncReplicasIndependently": "true"}
    opts.engineOptions = {"target.extendedMemory": "true"}
    assert dict(opts.engineOptions) == {"target.extendedMemory": "true"}
    with pytest.raises(NotImplementedError, match="'debug.instrument' is not supported"):
        opts.engineOptions["debug.instrument"] = "true"
    with pytest.raises(TypeError, match="maps str to str"):
        opts.engineOptions["target.extendedMemory"] = True
    with pytest.raises(NotImplementedError, match="assign items one by one"):
        opts.engineOptions.update({"target.extendedMemory": "false"})


def test_stochastic_rounding_is_said_not_modelled(capsys):
    ir = _ir_with_an_op()
    opts = ir._pb_ir.getSessionOptions()
    assert opts.enableStochasticRounding is False
    with pytest.raises(TypeError, match="must be a bool"):
        opts.enableStochasticRounding = "yes"
    opts.enableStochasticRounding = True
    popxl.Session(ir, "ipu_model")
    assert "sets enableStochasticRounding; the simulator rounds to nearest even" in \
        capsys.readouterr().err


def test_options_cannot_change_after_compilation():
    ir = _ir_with_an_op()
    popxl.Session(ir, "cpu")
    opts = ir._pb_ir.getSessionOptions()
    for name, value in (("partialsTypeMatMuls", "half"), ("enableStochasticRounding", True),
                        ("engineOptions", {})):
        with pytest.raises(RuntimeError, match=f"{name} cannot change"):
            setattr(opts, name, value)
    with pytest.raises(RuntimeError, match="engineOptions cannot change"):
        opts.engineOptions["target.extendedMemory"] = "true"
