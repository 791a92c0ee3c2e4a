"""Abstract builds (python/ipuxl/_abstract.py): an Ir created with the
``abstract`` setting has variables with shapes and dtypes but no host data.
Its profile must be the concrete program's, a Session of it must refuse
to run, and a large variable of it must cost no host memory."""
import os
import textwrap
import tracemalloc
from functools import partial

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl import cli, settings
from ipuxl import profile as prof
from ipuxl._abstract import AbstractData, AbstractValueError

MODEL = prof.IpuModel(tiles_per_ipu=32)


class _Mlp(addons.Module):
    def build(self, x):
        w = self.add_variable_input("w", partial(np.random.normal, 0, 0.02, (64, 32)),
                                    popxl.float16)
        b = self.add_variable_input("b", partial(np.zeros, (32,)), popxl.float16)
        return ops.gelu(x @ w + b)


def _program():
    """A training-shaped program on 2 replicas: a host-data variable, a
    remote variable, a replica-sharded one, and an addons Module whose
    factories create 3 instances of its weights in a loop of calls."""
    np.random.seed(0)
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        xs = popxl.h2d_stream((8, 64), popxl.float16, name="x")
        x = ops.host_load(xs)
        scale = popxl.variable(np.full((64,), 0.5, np.float16), name="scale")
        buf = popxl.remote_buffer((64,), popxl.float16, 1)
        rv = popxl.remote_variable(np.ones((64,), np.float16), buf, 0, name="remote_bias")
        shard_var, shard = popxl.replica_sharded_variable(np.ones((128,), np.float32),
                                                          name="sharded")
        x = x * scale + ops.remote_load(buf, 0)
        facts, graph = _Mlp().create_graph(x)
        for i in range(3):
            (x_out,) = graph.bind(facts.init(f"layer{i}")).call(x)
        full = ops.collectives.replicated_all_gather(shard)
        y = ops.sum(x_out) + ops.sum(ops.cast(full, popxl.float16))
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir, {"scale": scale, "remote": rv, "sharded": shard_var, "x": xs}


def _abstract_program():
    with settings.override(abstract=True):
        return _program()


def _same(a: prof.Profile, b: prof.Profile):
    for c in a.categories:
        np.testing.assert_array_equal(a.per_tile[c], b.per_tile[c], err_msg=c)
    assert a.cycles == b.cycles
    assert a.ops["name"] == b.ops["name"]
    assert a.streaming_bytes == b.streaming_bytes
    assert a.fits == b.fits


def test_an_abstract_ir_profiles_as_the_concrete_one():
    ir, _ = _program()
    air, v = _abstract_program()
    assert air.abstract and not ir.abstract
    assert isinstance(v["scale"]._host_data, AbstractData)
    assert v["scale"]._host_data.shape == (64,) and v["scale"].dtype == popxl.float16
    a, b = prof.profile_ir(ir, MODEL), prof.profile_ir(air, MODEL)
    _same(a, b)
    assert b.streaming_bytes > 0  # the remote and sharded variables are in it


def test_an_abstract_session_models_the_program_and_refuses_to_run():
    ir, _ = _program()
    air, v = _abstract_program()
    concrete = popxl.Session(ir, MODEL)
    s = popxl.Session(air, MODEL)
    assert s.engine is None
    _same(concrete.profile(), s.profile())
    with s:  # attaching copies nothing: there is nothing to copy
        with pytest.raises(AbstractValueError, match=r"Session\.run: the program of Ir \d+ "
                                                     r"cannot run: it was built abstract"):
            s.run({v["x"]: np.zeros((2, 8, 64), np.float16)})
        with pytest.raises(AbstractValueError, match="Session.weights_from_host"):
            s.weights_from_host()
        with pytest.raises(AbstractValueError, match="Session.get_tensors_data"):
            s.get_tensor_data(v["scale"])
        with pytest.raises(AbstractValueError, match="Session.write_variables_data"):
            s.write_variable_data(v["scale"], np.zeros(64, np.float16))
    assert not s.is_attached


def test_values_of_an_abstract_variable_raise_naming_it():
    _, v = _abstract_program()
    with pytest.raises(AbstractValueError, match=r"variable 'scale' \(shape \(64,\), float16\) "
                                                 r"has no host data"):
        np.asarray(v["scale"]._host_data)
    with pytest.raises(AbstractValueError, match="remote_bias"):
        v["remote"]._host_data[0]


def test_abstract_variables_keep_the_dtype_rules_of_concrete_ones():
    with settings.override(abstract=True):
        ir = popxl.Ir()
    with ir.main_graph:
        assert popxl.variable(np.zeros(3, np.float64)).dtype == popxl.float32  # downcast
        assert popxl.variable(np.zeros(3, np.int64), downcast=False).dtype == popxl.int64
        assert popxl.variable([1, 2], popxl.float16).shape == (2,)
        assert popxl.variable(3.0).dtype == popxl.float32
        with pytest.raises(TypeError, match="not a Tensor"):
            popxl.variable(popxl.constant(1.0))


def test_a_large_abstract_variable_takes_no_host_memory():
    # 256 MiB of float32 that is one element in memory: a concrete Ir copies
    # it; an abstract one keeps its shape.
    huge = np.broadcast_to(np.float32(1.0), (8192, 8192))
    with settings.override(abstract=True):
        ir = popxl.Ir()
    tracemalloc.start()
    with ir.main_graph:
        v = popxl.variable(huge, name="huge")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert v.shape == (8192, 8192) and peak < 1 << 20, peak


def test_abstract_factories_make_no_data_for_their_variables():
    # One sample of 32 MiB (float64) tells the factory its shape; 16
    # variables of 4 replica groups would be 2 GiB of data in a concrete Ir.
    shape = (2048, 2048)
    with settings.override(abstract=True):
        ir = popxl.Ir(replication=4)
    calls = []

    def sample():
        calls.append(1)
        return np.zeros(shape)

    tracemalloc.start()
    with ir.main_graph:
        rg = ir.replica_grouping(stride=1, group_size=1)  # 4 groups
        f = addons.VariableFactory(sample, popxl.float32, "w", replica_grouping=rg)
        vs = [f.create_tensor(f"w{i}") for i in range(16)]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(calls) == 1  # for the shape and dtype only
    assert all(v.shape == shape and v._host_data.shape == (4,) + shape for v in vs)
    assert peak < 1.5 * 8 * 2048 * 2048, peak


def test_the_setting_comes_from_the_environment_and_is_fixed_per_ir(monkeypatch):
    assert settings.read({"IPUXL_ABSTRACT": "1"}).abstract
    assert not settings.read({}).abstract
    with pytest.raises(ValueError, match="IPUXL_ABSTRACT=maybe"):
        settings.read({"IPUXL_ABSTRACT": "maybe"})
    monkeypatch.setenv("IPUXL_ABSTRACT", "yes")
    assert popxl.Ir().abstract
    with settings.override(abstract=False):
        assert not popxl.Ir().abstract
    monkeypatch.delenv("IPUXL_ABSTRACT")
    with settings.override(abstract=True):
        ir = popxl.Ir()
    with ir.main_graph:  # created abstract, stays abstract outside the block
        assert isinstance(popxl.variable(np.ones(2)).__dict__["_host_data"], AbstractData)


SCRIPT = textwrap.dedent("""
    import numpy as np
    import popxl, popxl.ops as ops
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.h2d_stream((4, 256), popxl.float32, name="x")
        w = popxl.variable(np.random.rand(256, 128).astype(np.float32), name="w")
        y = ops.host_load(x) @ w
        out = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(out, y)
    with popxl.Session(ir, "ipu_model") as s:
        r = s.run({x: np.ones((4, 256), np.float32)})
    print("ran", r[out].shape)
""")


def test_cli_profile_abstract_stops_at_the_first_run(tmp_path, capsys):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    args = ["profile", "--tiles-per-ipu", "32", "--no-html"]
    assert cli.main(args + ["--out", str(tmp_path / "c"), str(script)]) == 0
    concrete = capsys.readouterr()
    assert "ran (4, 128)" in concrete.out
    assert cli.main(args + ["--abstract", "--out", str(tmp_path / "a"), str(script)]) == 0
    got = capsys.readouterr()
    assert "ran" not in got.out
    assert "stopped where it needed values: Session.run" in got.err
    assert "fit: 1 IPU(s) per replica x 1 replica(s) = 1 IPU(s); FITS" in got.out
    assert "Streaming Memory per replica" in got.out
    a = prof.load(os.path.join(tmp_path, "a", "profile.json"))
    c = prof.load(os.path.join(tmp_path, "c", "profile.json"))
    for cat in c.categories:
        np.testing.assert_array_equal(a.per_tile[cat], c.per_tile[cat], err_msg=cat)
    assert not settings.current().abstract  # the setting ended with the command


def _sources():
    from scipy.stats import truncnorm

    from ipuxl.addons.layers.linear import truncated_normal

    return [partial(np.zeros, (3, 4)), partial(np.ones, 5, np.float16),
            partial(np.full, (2,), 1.5), partial(np.full, (2, 1), 7, dtype=np.int32),
            partial(np.empty, shape=(4,)), partial(np.random.normal, 0, 0.02, (7, 8)),
            partial(np.random.uniform, -1, 1, size=(6,)),
            partial(np.random.default_rng(0).normal, 0, 1, (2, 2)),
            partial(truncnorm.rvs, -2, 2, loc=0, scale=0.02, size=(9, 10)),
            partial(truncated_normal, (11, 12)), partial(truncated_normal, size=(3,), std=1.0)]


@pytest.mark.parametrize("i", range(11))
def test_sample_spec_reads_what_the_call_would_return(i):
    from ipuxl._abstract import sample_spec

    f = _sources()[i]
    got, sample = sample_spec(f), f()  # the call itself is the oracle
    assert got == (sample.shape, sample.dtype)


def test_sample_spec_declines_what_it_cannot_read():
    from ipuxl._abstract import sample_spec

    assert sample_spec(lambda: np.zeros(3)) is None
    assert sample_spec(partial(np.random.normal, 0, 1)) is None  # a scalar: size not given
    assert sample_spec(partial(np.arange, 5)) is None


def test_an_abstract_addons_layer_never_draws_its_weights():
    # addons' Linear draws truncated_normal((8192, 8192)): 512 MiB of float64
    # in a concrete Ir, read from the partial's arguments in an abstract one.
    with settings.override(abstract=True):
        ir = popxl.Ir()
    tracemalloc.start()
    with ir.main_graph:
        x = ops.host_load(popxl.h2d_stream((4, 8192), popxl.float16, name="x"))
        facts, graph = addons.layers.Linear(8192).create_graph(x)
        w = facts.init("fc")
        graph.bind(w).call(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert w.weight.shape == (8192, 8192) and w.weight.dtype == popxl.float16
    assert peak < 32 << 20, peak


def test_an_abstract_program_over_memory_is_reported_on_any_device(capsys):
    # 4 MiB of weights on 2 tiles of 624 KiB: a concrete "ipu_hw" Session
    # refuses to compile it; an abstract one never runs, so a model that
    # allows it reports the overflow.
    model = prof.IpuModel(tiles_per_ipu=2, allow_out_of_memory=True)

    def build():
        ir = popxl.Ir()
        with ir.main_graph:
            x = ops.host_load(popxl.h2d_stream((2, 1024), popxl.float32, name="x"))
            w = popxl.variable(np.zeros((1024, 1024), np.float32), name="w")
            ops.host_store(popxl.d2h_stream((2, 1024), popxl.float32, name="y"), x @ w)
        return ir

    with settings.override(ipu_model=vars(model), offline_device=None):
        with pytest.raises(prof.OutOfMemoryError):
            popxl.Session(build(), "ipu_hw")
        with settings.override(abstract=True):
            air = build()
        s = popxl.Session(air, "ipu_hw")
    assert not s.profile().fits
    assert "profiling anyway" in capsys.readouterr().err
