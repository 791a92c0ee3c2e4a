"""Catalogue: sessions, feeds, outputs, variables, checkpoints and options
used wrongly. Each case raises PopXL's exception type with a message naming
the stream, variable, file or option; nothing is half-applied."""
import json
import os

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.checkpoint import CheckpointMismatch


def program(shape=(2,), dtype=popxl.float32, transfers=1):
    ir = popxl.Ir()
    ir.num_host_transfers = transfers
    with ir.main_graph:
        w = popxl.variable(np.arange(int(np.prod(shape))).reshape(shape).astype(dtype.as_numpy()),
                           dtype, name="w")
        s = popxl.h2d_stream(shape, dtype, name="x")
        o = popxl.d2h_stream(shape, dtype, name="y")
        ops.host_store(o, ops.add(ops.host_load(s), w))
    return ir, w, s, o


def attached(**kw):
    ir, w, s, o = program(**kw)
    sess = popxl.Session(ir, "ipu_model")
    sess.__enter__()
    return sess, w, s, o


ONE = np.ones(2, np.float32)

RUN_CASES = [
    ("missing_input", lambda sess, w, s, o: sess.run({}), ValueError, r"Missing input stream\(s\): x"),
    ("output_stream_as_input", lambda sess, w, s, o: sess.run({s: ONE, o: ONE}), ValueError, r"Unexpected input stream\(s\) provided to the session: y. Expected exactly: x"),
    ("input_keyed_by_name", lambda sess, w, s, o: sess.run({"x": ONE}), TypeError, r"input streams must be keyed by the stream objects .*'x'"),
    ("inputs_not_a_mapping", lambda sess, w, s, o: sess.run([ONE]), TypeError, r"Session.run: inputs must be a mapping \{stream: numpy array\}, got list"),
    ("outputs_not_a_mapping", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, [np.zeros(2, np.float32)]), TypeError, r"Session.run: outputs must be a mapping"),
    ("input_wrong_shape", lambda sess, w, s, o: sess.run({s: np.ones(3, np.float32)}), ValueError, r"Input for stream x has shape \(3,\), expected \(2,\)"),
    ("input_scalar_for_vector", lambda sess, w, s, o: sess.run({s: np.float32(1)}), ValueError, r"Input for stream x has shape \(\), expected \(2,\)"),
    ("input_int_for_float", lambda sess, w, s, o: sess.run({s: np.array([1, 2])}), ValueError, r"Input for stream x has dtype int64, expected float32"),
    ("input_bool_for_float", lambda sess, w, s, o: sess.run({s: np.array([True, False])}), ValueError, r"Input for stream x has dtype bool, expected float32"),
    ("input_strings", lambda sess, w, s, o: sess.run({s: np.array(["a", "b"])}), ValueError, r"Input for stream x has dtype <U1"),
    ("input_objects", lambda sess, w, s, o: sess.run({s: np.array([None, 1.0])}), ValueError, r"Input for stream x has dtype object"),
    ("input_none", lambda sess, w, s, o: sess.run({s: None}), ValueError, r"Input for stream x has dtype object"),
    ("input_complex", lambda sess, w, s, o: sess.run({s: np.array([1 + 1j, 2])}), ValueError, r"Input for stream x has dtype complex128"),
    ("output_wrong_shape", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, {o: np.zeros(3, np.float32)}), ValueError, r"Output array for stream y must be a writable C-contiguous array of shape \(2,\) .*got shape \(3,\)"),
    ("output_wrong_dtype", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, {o: np.zeros(2, np.float64)}), ValueError, r"Output array for stream y has dtype float64, expected float32"),
    ("output_read_only", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, {o: _readonly(np.zeros(2, np.float32))}), ValueError, r"Output array for stream y must be a writable"),
    ("output_not_contiguous", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, {o: np.zeros(4, np.float32)[::2]}), ValueError, r"Output array for stream y must be a writable C-contiguous"),
    ("output_list", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, {o: [0.0, 0.0]}), TypeError, r"Output for stream y must be a numpy array"),
    ("output_missing", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, {}), ValueError, r"Missing output stream\(s\): y"),
    ("input_stream_as_output", lambda sess, w, s, o: sess.run_with_outputs({s: ONE}, {o: np.zeros(2, np.float32), s: np.zeros(2, np.float32)}), ValueError, r"Unexpected output stream\(s\) provided to the session: x"),
    ("get_data_of_numpy", lambda sess, w, s, o: sess.get_tensor_data(np.ones(2)), TypeError, r"Tensor array\(\[1., 1.\]\) is not of type Constant or Variable"),
    ("get_data_of_stream", lambda sess, w, s, o: sess.get_tensor_data(o), TypeError, r"Tensor .*y.* is not of type Constant or Variable"),
    ("get_data_of_other_ir", lambda sess, w, s, o: sess.get_tensor_data(program()[1]), ValueError, r"Tensor w does not belong to this session's Ir"),
    ("write_variable_shape", lambda sess, w, s, o: sess.write_variable_data(w, np.ones(3, np.float32)), ValueError, r"The shape of the data \(3,\) does not match the shape of variable w on the host \(2,\)"),
    ("write_variable_dtype", lambda sess, w, s, o: sess.write_variable_data(w, np.ones(2, np.float64)), TypeError, r"The dtype of the data \(float64\) does not match the dtype of variable w"),
    ("write_variable_strings", lambda sess, w, s, o: sess.write_variable_data(w, np.array(["a", "b"])), TypeError, r"The dtype of the data \(<U1\) does not match the dtype of variable w"),
    ("write_non_variable", lambda sess, w, s, o: sess.write_variable_data(o, ONE), TypeError, r"Tensor .*y is not of type Variable"),
    ("write_scalar_to_vector", lambda sess, w, s, o: sess.write_variable_data(w, np.float32(3)), ValueError, r"The shape of the data \(\) does not match the shape of variable w"),
]


def _readonly(a):
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("fn,exc,match", [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES])
def test_bad_run_arguments_are_refused_and_the_session_still_works(fn, exc, match):
    sess, w, s, o = attached()
    try:
        with pytest.raises(exc, match=match):
            fn(sess, w, s, o)
        # Nothing was half-applied: a correct run afterwards gives the right answer.
        np.testing.assert_array_equal(sess.run({s: ONE})[o], [1.0, 2.0])
    finally:
        sess.__exit__(None, None, None)


def test_feeds_need_num_host_transfers_rows():
    sess, w, s, o = attached(transfers=2)
    try:
        with pytest.raises(ValueError, match=r"Input for stream x has shape \(2,\), expected \(2, 2\) "
                                              r"\(num_host_transfers=2"):
            sess.run({s: ONE})
    finally:
        sess.__exit__(None, None, None)


def test_feed_conversions_that_are_exact_are_accepted():
    sess, w, s, o = attached()
    try:
        np.testing.assert_array_equal(sess.run({s: [1.0, 2.0]})[o], [1.0, 3.0])
        np.testing.assert_array_equal(sess.run({s: np.arange(4, dtype=np.float32)[::2]})[o],
                                      [0.0, 3.0])
        np.testing.assert_array_equal(sess.run({s: np.array([1.0, 2.0], ">f4")})[o], [1.0, 3.0])
    finally:
        sess.__exit__(None, None, None)


SESSION_CASES = [
    ("unknown_device", lambda ir: popxl.Session(ir, "gpu"), ValueError, r"device_desc must be one of \('cpu', 'ipu_model', 'ipu_hw'\), got 'gpu'"),
    ("device_not_a_string", lambda ir: popxl.Session(ir, 3), ValueError, r"device_desc must be one of .*got 3"),
    ("not_an_ir", lambda ir: popxl.Session("ir", "ipu_model"), TypeError, r"Session expects an Ir, got str"),
    ("empty_ir", lambda ir: popxl.Session(popxl.Ir(), "ipu_model"), RuntimeError, r"The Ir \d+ has no graphs with ops"),
    ("unknown_host_pass", lambda ir: popxl.Session(ir, "ipu_model", host_passes="fuse_everything"), ValueError, r"host passes: unknown pass\(es\) fuse_everything; known: "),
    ("host_passes_mixed_signs", lambda ir: popxl.Session(ir, "ipu_model", host_passes="fold_transposes,-reshape_views"), ValueError, r"host passes: give either names to enable or -names to disable, not both"),
    ("run_before_attach", lambda ir: popxl.Session(ir, "ipu_model").run({}), ValueError, r"Must be attached to device before calling run"),
    ("run_after_detach", lambda ir: _detached(ir).run({}), ValueError, r"Must be attached to device before calling run"),
    ("replication_on_cpu_device", lambda ir: (setattr(ir, "replication_factor", 2), popxl.Session(ir, "cpu"))[1], ValueError, r"The 'cpu' device does not support replication \(replication_factor=2\); use 'ipu_model'"),
    ("replication_popdist_without_launcher", lambda ir: popxl.Ir(replication="popdist"), RuntimeError, r"popdist: the instance layout is not set: Ir\(replication='popdist'\) .* need POPDIST_NUM_TOTAL_REPLICAS and POPDIST_NUM_INSTANCES.*ipuxl poprun --num-instances N --num-replicas R"),
]


def _detached(ir):
    sess = popxl.Session(ir, "ipu_model")
    with sess:
        pass
    return sess


@pytest.mark.parametrize("fn,exc,match", [c[1:] for c in SESSION_CASES], ids=[c[0] for c in SESSION_CASES])
def test_bad_sessions_are_refused(fn, exc, match):
    ir = program()[0]
    with pytest.raises(exc, match=match):
        fn(ir)


def _garbage(p):
    p.write_bytes(b"garbage")


def _truncated(p, sess):
    sess.save_checkpoint(str(p) + ".full.npz")
    p.write_bytes(open(str(p) + ".full.npz", "rb").read()[:-20])


CHECKPOINT_CASES = [
    ("missing_file", lambda sess, p: sess.load_checkpoint(str(p)), FileNotFoundError, r"missing"),
    ("a_directory", lambda sess, p: sess.load_checkpoint(str(p.parent)), IsADirectoryError, r"Is a directory"),
    ("garbage_file", lambda sess, p: (_garbage(p), sess.load_checkpoint(str(p))), ValueError, r"checkpoint '.*missing.npz': not a readable ipuxl checkpoint"),
    ("truncated_file", lambda sess, p: (_truncated(p, sess), sess.load_checkpoint(str(p))), ValueError, r"checkpoint '.*missing.npz': not a readable ipuxl checkpoint \(BadZipFile"),
    ("plain_npz", lambda sess, p: (np.savez(str(p), w=np.ones(2, np.float32)), sess.load_checkpoint(str(p))), ValueError, r"checkpoint '.*missing.npz': not an ipuxl checkpoint"),
    ("save_into_missing_directory", lambda sess, p: sess.save_checkpoint(str(p.parent / "no" / "dir" / "c.npz")), FileNotFoundError, r"no/dir/c.npz"),
    ("other_shape", lambda sess, p: (popxl.Session(program((3,))[0], "ipu_model").save_checkpoint(str(p)), sess.load_checkpoint(str(p))), CheckpointMismatch, r"'w': checkpoint has shape \(3,\), variable has \(2,\)"),
    ("other_dtype", lambda sess, p: (popxl.Session(program(dtype=popxl.int32)[0], "ipu_model").save_checkpoint(str(p)), sess.load_checkpoint(str(p))), CheckpointMismatch, r"'w': checkpoint has dtype int32, variable has float32"),
    # issue 42: a plain .npy, metadata of the wrong shape, names that are not str
    ("plain_npy", lambda sess, p: (np.save(open(p, "wb"), np.ones(2, np.float32)), sess.load_checkpoint(str(p))), ValueError, r"checkpoint '.*missing.npz': not an ipuxl checkpoint \(a single .npy array"),
    ("metadata_a_list", lambda sess, p: (_with_meta(p, [1]), sess.load_checkpoint(str(p))), ValueError, r"checkpoint '.*missing.npz': malformed metadata \(a JSON list, not an object\)"),
    ("metadata_tensors_a_list_of_numbers", lambda sess, p: (_with_meta(p, {"format": "ipuxl-checkpoint", "version": 2, "tensors": [3]}), sess.load_checkpoint(str(p))), ValueError, r"checkpoint '.*missing.npz': malformed metadata \(tensor 0 has no name and entry\)"),
    ("save_name_not_a_string", lambda sess, p: sess.save_checkpoint(str(p), {3: sess.ir.main_graph.variables[0]}), TypeError, r"checkpoint: names must be str, got 3 for 'w'"),
]


def _with_meta(p, meta):
    np.savez(str(p), __ipuxl_checkpoint__=np.frombuffer(json.dumps(meta).encode(), np.uint8))


@pytest.mark.parametrize("fn,exc,match", [c[1:] for c in CHECKPOINT_CASES], ids=[c[0] for c in CHECKPOINT_CASES])
def test_bad_checkpoints_are_refused_and_leave_the_variables(tmp_path, fn, exc, match):
    ir, w, s, o = program()
    sess = popxl.Session(ir, "ipu_model")
    p = tmp_path / "missing.npz"
    with pytest.raises(exc, match=match):
        fn(sess, p)
    np.testing.assert_array_equal(sess.get_tensor_data(w), [0.0, 1.0])
