"""Issue 42: in-place writes through control flow, checkpoint names and
files, half-applied steps, and errors that follow PopXL. Each test failed on
the code before the fix (a dropped write, a swallowed name, an
AttributeError, a raw pybind TypeError, a refused user-guide program)."""
import json
import warnings
import zipfile

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.checkpoint import read_checkpoint


# ---- in-place writes through a conditional, a call or a repeat

def _by_ref_branch(ir):
    def then_fn(x: popxl.TensorByRef):
        ops.add_(x, 1.0)

    def else_fn(x):
        ops.add_(x, 2.0)

    spec = popxl.TensorSpec((3,), popxl.float32)
    return ir.create_graph(then_fn, spec), ir.create_graph(else_fn, spec)


@pytest.mark.parametrize("where", ["main", "repeat"])
def test_conditional_refuses_a_by_ref_branch_input_as_popxl(where):
    """PopXL's If op records no modified inputs: a TensorByRef branch
    input is refused (its NotImplementedError), never run with the write
    dropped; the graph is left without the op."""
    ir = popxl.Ir()
    with ir.main_graph:
        then_g, else_g = _by_ref_branch(ir)
        v = popxl.variable(np.zeros(3, np.float32), name="v")
        c = popxl.constant(True)
        if where == "main":
            n_ops = len(ir.main_graph._ops)
            with pytest.raises(NotImplementedError,
                               match="TensorByRef is not implemented for the conditional op. You "
                                     "cannot call this input to the then_branch graph by ref"):
                ops.conditional(c, then_g, else_g, [v], [v])
            assert len(ir.main_graph._ops) == n_ops
        else:
            def body(x: popxl.TensorByRef):
                ops.conditional(popxl.constant(True), then_g, else_g, [x], [x])

            with pytest.raises(NotImplementedError, match="TensorByRef is not implemented"):
                ir.create_graph(body, v.spec)


def test_else_branch_by_ref_is_refused_too():
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((3,), popxl.float32)
        plain = ir.create_graph(lambda x: ops.add_(x, 1.0), spec)

        def by_ref(x: popxl.TensorByRef):
            ops.add_(x, 1.0)

        ref = ir.create_graph(by_ref, spec)
        v = popxl.variable(np.zeros(3, np.float32))
        with pytest.raises(NotImplementedError, match="to the else_branch graph by ref"):
            ops.conditional(popxl.constant(True), plain, ref, [v], [v])


@pytest.mark.parametrize("host_passes", [None, "none"])
def test_by_ref_writes_reach_the_caller_through_call_and_repeat(host_passes):
    """The same class for call and repeat (which do support TensorByRef):
    the op's ``modified`` set holds the input, and the write arrives, in the
    main graph and nested; a by-value input's write never leaks out."""
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((3,), popxl.float32)

        def inc(x: popxl.TensorByRef):
            ops.add_(x, 1.0)

        inc_g = ir.create_graph(inc, spec)
        val_g = ir.create_graph(lambda x: ops.add_(x, 100.0), spec)  # by value

        def twice(x: popxl.TensorByRef):
            ops.call(inc_g, x)
            ops.call(inc_g, x)
            ops.call(val_g, x)

        twice_g = ir.create_graph(twice, spec)
        a = popxl.variable(np.zeros(3, np.float32), name="a")
        b = popxl.variable(np.zeros(3, np.float32), name="b")
        c = popxl.variable(np.zeros(3, np.float32), name="c")
        info = ops.call_with_info(inc_g, a)
        assert info.op.modified == {0}
        ops.call(twice_g, b)  # +2
        r = ops.repeat_with_info(twice_g, 3, c)  # +6
        assert r.op.modified == {0}
        ops.call(val_g, a)  # by value: a is unchanged
    with popxl.Session(ir, "ipu_model", host_passes=host_passes) as sess:
        sess.run()
        got = sess.get_tensors_data([a, b, c])
    np.testing.assert_array_equal(got[a], np.full(3, 1.0))
    np.testing.assert_array_equal(got[b], np.full(3, 2.0))
    np.testing.assert_array_equal(got[c], np.full(3, 6.0))


# ---- repeat counts

def test_repeat_count_beyond_int64_is_refused_when_built():
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda x: ops.add(x, 1.0), popxl.TensorSpec((1,), popxl.float32))
        v = popxl.variable(np.zeros(1, np.float32))
        with pytest.raises(TypeError, match=r"repeat: repeat_count 9223372036854775811 does not "
                                            r"fit the loop's int64 trip count"):
            ops.repeat(g, 2 ** 63 + 3, v)
        ops.repeat(g, 2 ** 63 - 1, v)  # the largest count builds (and compiles)
    popxl.Session(ir, "ipu_model")


# ---- checkpoint names

HOSTILE_NAMES = ["allow_pickle", "file", "args", "kwds", "__ipuxl_checkpoint__", "arr_0",
                 "arr_1", "", "a/b", "../../escape", "/abs", "x.npy", "dots.in.name",
                 "spaces and\ttabs", "new\nline", "ünïcødé-名前", "\\back\\slash", "nul\x00byte",
                 "z" * 300, "0", "🙂"]


@pytest.mark.parametrize("share", [False, True])
def test_every_name_round_trips_through_a_checkpoint(tmp_path, share):
    ir = popxl.Ir()
    with ir.main_graph:
        vs = {n: popxl.variable(np.full(2, k, np.float32), name=f"v{k}")
              for k, n in enumerate(HOSTILE_NAMES)}
        for v in vs.values():
            ops.add_(v, 1.0)
    path = tmp_path / "c.npz"
    with popxl.Session(ir, "ipu_model", share_host_weights=share) as sess:
        sess.run()
        sess.save_checkpoint(path, vs)
        data = read_checkpoint(path)
        assert sorted(data) == sorted(HOSTILE_NAMES)
        for k, n in enumerate(HOSTILE_NAMES):
            np.testing.assert_array_equal(data[n], np.full(2, k + 1.0))
        sess.run()
        sess.load_checkpoint(path, vs)
        got = sess.get_tensors_data(list(vs.values()))
    for k, n in enumerate(HOSTILE_NAMES):
        np.testing.assert_array_equal(got[vs[n]], np.full(2, k + 1.0))


def test_version_1_checkpoints_still_load(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.zeros(2, np.float32), name="w")
        ops.add_(w, 1.0)
    meta = {"format": "ipuxl-checkpoint", "version": 1,
            "tensors": {"w": {"dtype": "float32", "shape": [2]}}}
    path = tmp_path / "v1.npz"
    np.savez(path, w=np.array([5.0, 6.0], np.float32),
             __ipuxl_checkpoint__=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    with popxl.Session(ir, "ipu_model") as sess:
        sess.load_checkpoint(path)
        np.testing.assert_array_equal(sess.get_tensor_data(w), [5.0, 6.0])


def _meta_archive(path, meta, **entries):
    np.savez(path, __ipuxl_checkpoint__=np.frombuffer(json.dumps(meta).encode(), np.uint8),
             **entries)


MALFORMED = [
    ("plain_npy", lambda p: np.save(open(p, "wb"), np.zeros(2)), r"a single \.npy array"),
    ("metadata_a_list", lambda p: _meta_archive(p, [1, 2]), r"malformed metadata \(a JSON list"),
    ("tensors_a_list_in_v1", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 1, "tensors": []}), r"'tensors' is not an object"),
    ("tensors_an_object_in_v2", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 2, "tensors": {}}), r"'tensors' is not a list"),
    ("entry_without_name", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 2, "tensors": [{"entry": "arr_0"}]}, arr_0=np.zeros(2, np.float32)), r"tensor 0 has no name and entry"),
    ("entry_missing", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 2, "tensors": [{"name": "w", "entry": "arr_9", "dtype": "float32", "shape": [2]}]}), r"tensor 'w': no entry 'arr_9'"),
    ("unknown_dtype", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 2, "tensors": [{"name": "w", "entry": "arr_0", "dtype": "float99", "shape": [2]}]}, arr_0=np.zeros(2, np.float32)), r"tensor 'w': unknown dtype 'float99'"),
    ("shape_not_a_list", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 2, "tensors": [{"name": "w", "entry": "arr_0", "dtype": "float32", "shape": "2"}]}, arr_0=np.zeros(2, np.float32)), r"needs a dtype name and a shape"),
    ("name_twice", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 2, "tensors": [{"name": "w", "entry": "arr_0", "dtype": "float32", "shape": [2]}] * 2}, arr_0=np.zeros(2, np.float32)), r"the name 'w' appears twice"),
    ("metadata_not_json", lambda p: np.savez(p, __ipuxl_checkpoint__=np.frombuffer(b"{nope", np.uint8)), r"not a readable ipuxl checkpoint \(JSONDecodeError"),
    ("future_version", lambda p: _meta_archive(p, {"format": "ipuxl-checkpoint", "version": 99, "tensors": []}), r"unsupported format 'ipuxl-checkpoint' version 99"),
]


@pytest.mark.parametrize("make,match", [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_unreadable_checkpoints_raise_value_error_naming_the_file(tmp_path, make, match):
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.zeros(2, np.float32), name="w")
        ops.add_(w, 1.0)
    path = tmp_path / "bad.npz"
    make(path)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(ValueError, match=r"checkpoint '.*bad.npz': .*" + match):
            sess.load_checkpoint(path)
        np.testing.assert_array_equal(sess.get_tensor_data(w), [0.0, 0.0])


# ---- a failed run is never checkpointed as current

def _failing(share):
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.zeros(3, np.float32), name="w")
        frozen = popxl.variable(np.full(3, 5.0, np.float32), name="frozen")  # never written
        s = popxl.h2d_stream((3,), popxl.float32, name="x")
        ops.add_(w, ops.host_load(s))
        ops.add_(w, ops.host_load(s))  # no data for the second load: fails half-way
    return ir, w, frozen, s


def test_half_applied_shared_weights_are_not_saved(tmp_path):
    ir, w, frozen, s = _failing(True)
    sess = popxl.Session(ir, "ipu_model", share_host_weights=True)
    with pytest.raises(RuntimeError, match="did not provide input data"):
        with sess:
            sess.run({s: np.ones(3, np.float32)})
    with pytest.raises(RuntimeError, match=r"Session.save_checkpoint: the values of 'w' are those "
                                           r"of a run that did not complete"):
        sess.save_checkpoint(tmp_path / "c.npz")
    sess.save_checkpoint(tmp_path / "frozen.npz", [frozen])  # untouched: fine
    with sess:  # attaching again restores nothing: still refused, and runs too
        with pytest.raises(RuntimeError, match="undefined"):
            sess.run({s: np.ones(3, np.float32)})
        with pytest.raises(RuntimeError, match="did not complete"):
            sess.save_checkpoint(tmp_path / "c.npz")
        sess.load_checkpoint(tmp_path / "frozen.npz", strict=False)
        with pytest.raises(RuntimeError, match="did not complete"):
            sess.save_checkpoint(tmp_path / "c.npz")
        sess.write_variable_data(w, np.full(3, 9.0, np.float32))  # known values: usable again
        sess.save_checkpoint(tmp_path / "c.npz")
    np.testing.assert_array_equal(read_checkpoint(tmp_path / "c.npz")["w"], np.full(3, 9.0))


def test_without_sharing_the_last_good_values_are_saved(tmp_path):
    ir, w, frozen, s = _failing(False)
    sess = popxl.Session(ir, "ipu_model")
    with pytest.raises(RuntimeError):
        with sess:
            sess.run({s: np.ones(3, np.float32)})
    sess.save_checkpoint(tmp_path / "c.npz")  # the host copy: values before the run
    np.testing.assert_array_equal(read_checkpoint(tmp_path / "c.npz")["w"], np.zeros(3))


# ---- float64 host data is downcast as in PopXL

def test_float64_garbage_is_downcast_with_one_warning_naming_the_variable():
    """The user guide's replication.py builds popxl.variable(np.ndarray(shape)):
    uninitialised float64 that may hold huge values. PopXL downcasts it and
    raises nothing; ipuxl does the same, with one warning."""
    data = np.array([1.0, 1e300, -1e300, 2.0, np.nan])
    ir = popxl.Ir()
    with ir.main_graph:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            v = popxl.variable(data, name="garbage")
        assert v.dtype == popxl.float32
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "variable 'garbage': 2 value(s)" in msgs[0], msgs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = data.astype(np.float32)
    np.testing.assert_array_equal(v._host_data, want)
    # In range: silent. downcast=False keeps float64.
    with ir.main_graph:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            popxl.variable(np.array([1.0, 2.0]), name="fine")
            assert popxl.variable(data, name="wide", downcast=False).dtype == popxl.float64
