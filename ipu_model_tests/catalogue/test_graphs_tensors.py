"""Catalogue: tensors, streams, graphs, calls, repeat, conditional, autodiff
and remote buffers used wrongly. PopXL's exception types (popart_exception
where PopART raises from C++), messages naming the tensor, graph, buffer or
argument."""
import re
import warnings

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.errors import popart_exception
from ipuxl.transforms import GradGraphInfo, autodiff


def relu_graph(T, spec=None):
    return T.ir.create_graph(lambda x: ops.relu(x), spec or T.f.spec)


CASES = [
    # ---- creating tensors
    ("variable_none", lambda T: popxl.variable(None, name="vn"), TypeError, r"variable 'vn': cannot convert NoneType"),
    ("variable_string", lambda T: popxl.variable("abc", name="vs"), ValueError, r"variable 'vs': numpy dtype <U3 has no popxl equivalent"),
    ("variable_ragged", lambda T: popxl.variable([[1, 2], [3]], name="vr"), ValueError, r"variable 'vr': cannot convert the data to an array"),
    ("variable_in_subgraph", lambda T: T.ir.create_graph(lambda: popxl.variable(1.0, name="inner")), ValueError, r"popxl.variable can only be created in the main graph"),
    ("variable_datetime", lambda T: popxl.variable(np.array(["2020-01-01"], dtype="datetime64[D]"), name="vd"), ValueError, r"variable 'vd': numpy dtype datetime64\[D\]"),
    ("variable_name_int", lambda T: popxl.variable([1.0], name=3), TypeError, r"tensor name must be a str, got 3"),
    ("constant_none", lambda T: popxl.constant(None, name="cn"), TypeError, r"constant 'cn': cannot convert NoneType"),
    ("constant_of_tensor", lambda T: popxl.constant(T.f), TypeError, r"constant: data must be host data .*not a Tensor"),
    ("constant_float8_uint8", lambda T: popxl.constant(np.zeros(2, np.uint8), popxl.float8_143), TypeError, r"Type uint8 is not supported for float8 tensors"),
    ("init_empty_but_unaddressable", lambda T: ops.init((0, 2 ** 62), popxl.float32), ValueError, r"init: shape \(0, 4611686018427387904\) is empty but its nonzero dimensions span"),
    ("d2h_empty_but_unaddressable", lambda T: popxl.d2h_stream((0, 2 ** 62), popxl.float32, name="z"), ValueError, r"d2h_stream 'z': shape \(0, 4611686018427387904\) is empty"),
    ("tensor_spec_negative", lambda T: popxl.TensorSpec((-1,), popxl.float32), ValueError, r"TensorSpec: shape \(-1,\) has a negative dimension -1"),
    ("graph_input_in_main_graph", lambda T: popxl.graph_input((1,), popxl.float32, "gi"), ValueError, r"graph_input 'gi': the main graph has no inputs"),
    # ---- streams
    ("h2d_negative_shape", lambda T: popxl.h2d_stream((-1,), popxl.float32, name="bad"), ValueError, r"h2d_stream 'bad': shape \(-1,\) has a negative dimension"),
    ("h2d_unknown_dtype", lambda T: popxl.h2d_stream((1,), "floaty", name="bad"), ValueError, r"'floaty' is not a valid popxl dtype name"),
    ("d2h_complex", lambda T: popxl.d2h_stream((1,), popxl.complex64, name="c"), NotImplementedError, r"complex64 is not supported by the ipuxl core"),
    ("ir_replication_zero", lambda T: setattr(T.ir, "replication_factor", 0), ValueError, r"replication_factor must be a positive int, got 0"),
    ("ir_replication_float", lambda T: setattr(T.ir, "replication_factor", 1.5), ValueError, r"replication_factor must be a positive int, got 1.5"),
    ("ir_host_transfers_negative", lambda T: setattr(T.ir, "num_host_transfers", -1), ValueError, r"num_host_transfers must be a positive int, got -1"),
    ("ir_host_transfers_str", lambda T: setattr(T.ir, "num_host_transfers", "2"), ValueError, r"num_host_transfers must be a positive int, got '2'"),
    ("ipu_negative", lambda T: popxl.ipu(-1).__enter__(), ValueError, r"ipu must be a non-negative int, got -1"),
    # ---- using tensors
    ("tensor_truth_value_scalar", lambda T: bool(T.s), ValueError, r"len\(\) of a scalar tensor 's'"),
    ("tensor_len_scalar", lambda T: len(T.s), ValueError, r"len\(\) of a scalar tensor 's'"),
    ("tensor_not_iterable", lambda T: list(T.f), TypeError, r"'Variable' object is not iterable"),
    ("tensor_index_out_of_bounds", lambda T: T.f[5], IndexError, r"index 5 is out of bounds for axis 0 of tensor 'f' with size 2"),
    ("tensor_index_negative_out_of_bounds", lambda T: T.f[-3], IndexError, r"index -3 is out of bounds for axis 0 of tensor 'f'"),
    ("tensor_index_float", lambda T: T.f[0.5], TypeError, r"Not a valid type: float. Value: 0.5"),
    ("tensor_index_too_many", lambda T: T.f[0, 0, 0], IndexError, r"too many indices for tensor 'f' of rank 2: 3 were indexed"),
    ("tensor_index_step_zero", lambda T: T.f[::0], ValueError, r"slice step cannot be zero \(axis 0 of tensor 'f'\)"),
    ("tensor_index_none", lambda T: T.f[None], TypeError, r"Not a valid type: NoneType"),
    ("tensor_index_str", lambda T: T.f["a"], TypeError, r"Not a valid type: str"),
    ("tensor_index_float_tensor", lambda T: T.f[T.fidx], TypeError, r"Not a valid type: Constant. Value: Tensor\[fidx"),
    ("tensor_item_assignment", lambda T: exec("T.f[0] = 1.0", {"T": T}), TypeError, r"does not support item assignment"),
    ("tensor_of_other_graph", lambda T: T.ir.create_graph(lambda x: ops.add(x, T.f), T.f.spec), ValueError, r"add: tensor 'f' \(rhs\) is in graph 'main' but the current graph is"),
    ("tensor_ipu_undefined", lambda T: T.f.ipu, popxl.errors.UndefinedValue, r"IPU is undefined \('f' has no producer"),
    ("op_outside_any_graph", lambda T: ops.relu(popxl.Ir().main_graph and T.f) if False else _outside(T), RuntimeError, r"no graph has been selected"),
    # ---- graphs and calls
    ("create_graph_not_callable", lambda T: T.ir.create_graph(3), TypeError, r"Callable `fn` must be a function or a popxl.Module, got int"),
    ("create_graph_returns_int", lambda T: T.ir.create_graph(lambda: 3), ValueError, r"create_graph: .* must return None, a Tensor or an iterable of Tensors, got int"),
    ("create_graph_too_many_args", lambda T: T.ir.create_graph(lambda x: x, T.f.spec, T.f.spec), ValueError, r"create_graph: arguments do not match the signature .*too many positional"),
    ("create_graph_too_few_args", lambda T: T.ir.create_graph(lambda x, y: x, T.f.spec), ValueError, r"missing a required argument: 'y'"),
    ("create_graph_returns_outer_tensor", lambda T: T.ir.create_graph(lambda x: T.f, T.f.spec), ValueError, r"graph_output: tensor 'f' is not in the current graph"),
    ("create_graph_fn_raises", lambda T: T.ir.create_graph(lambda x: 1 / 0, T.f.spec), ZeroDivisionError, r"division by zero"),
    ("create_graph_nested_other_ir", lambda T: popxl.Ir().create_graph(lambda x: ops.relu(x), T.f), RuntimeError, r"Graphs of different Irs cannot be nested"),
    ("call_too_many_inputs", lambda T: ops.call(relu_graph(T), T.f, T.f), ValueError, r"call: too many inputs for graph '.*': got 2 positional inputs but the graph has 1"),
    ("call_missing_input", lambda T: ops.call(relu_graph(T)), ValueError, r"call: missing inputs for graph '.*subgraph\(0\)': .*/x"),
    ("call_wrong_shape", lambda T: ops.call(relu_graph(T), T.g), popart_exception, r"call: parent tensor 'g' float32\(3, 4\) does not match input .*/x' float32\(2, 3\)"),
    ("call_wrong_dtype", lambda T: ops.call(relu_graph(T), T.h), popart_exception, r"call: parent tensor 'h' float16\(2, 3\) does not match input"),
    ("call_main_graph", lambda T: ops.call(T.ir.main_graph), ValueError, r"call: graph '' cannot call itself"),
    ("call_main_graph_from_subgraph", lambda T: T.ir.create_graph(lambda x: ops.call(T.ir.main_graph, x), T.f.spec), ValueError, r"call: the main graph cannot be called"),
    ("call_not_a_graph", lambda T: ops.call(lambda x: x, T.f), TypeError, r"call: expected a Graph, got function"),
    ("call_inputs_dict_foreign_key", lambda T: ops.call(relu_graph(T), inputs_dict={T.f: T.f}), ValueError, r"call: inputs_dict key 'f' is not an input of graph"),
    ("call_input_given_twice", lambda T: (lambda g: ops.call(g, T.f, inputs_dict={g.inputs[0]: T.f}))(relu_graph(T)), ValueError, r"call: input '.*/x' of graph '.*' was given twice"),
    ("repeat_negative", lambda T: ops.repeat(relu_graph(T), -1, T.f), ValueError, r"repeat: repeat_count must be >= 0, got -1"),
    ("repeat_float_count", lambda T: ops.repeat(relu_graph(T), 2.0, T.f), TypeError, r"repeat: repeat_count must be an int, got 2.0"),
    ("repeat_shape_changes", lambda T: ops.repeat(T.ir.create_graph(lambda x: ops.sum(x, 0), T.f.spec), 2, T.f), popart_exception, r"repeat: output 0 .*sum_out' float32\(3,\) .* cannot be carried into input 0 .*/x' float32\(2, 3\)"),
    ("repeat_dtype_changes", lambda T: ops.repeat(T.ir.create_graph(lambda x: ops.cast(x, popxl.float16), T.f.spec), 2, T.f), popart_exception, r"repeat: output 0 .* float16\(2, 3\) .* cannot be carried into input 0"),
    ("repeat_more_outputs_than_inputs", lambda T: ops.repeat(T.ir.create_graph(lambda x: (ops.relu(x), ops.relu(x)), T.f.spec), 2, T.f), ValueError, r"repeat: graph '.*' has 2 outputs but only 1 inputs"),
    ("repeat_main_graph", lambda T: ops.repeat(T.ir.main_graph, 2), ValueError, r"repeat: graph '' cannot call itself"),
    ("conditional_branch_outputs_differ", lambda T: ops.conditional(popxl.constant(True), relu_graph(T), T.ir.create_graph(lambda x: ops.sum(x), T.f.spec), [T.f], [T.f]), popart_exception, r"conditional: output 0 differs between branches: .*relu_out' float32\(2, 3\) vs .*sum_out' float32\(\)"),
    ("conditional_condition_not_scalar", lambda T: ops.conditional(T.b, relu_graph(T), relu_graph(T), [T.f], [T.f]), ValueError, r"conditional: the condition 'b' must have one element, has shape \(2, 3\)"),
    ("conditional_float_condition", lambda T: ops.conditional(T.s, relu_graph(T), relu_graph(T), [T.f], [T.f]), popart_exception, r"conditional: the condition 's' must be a bool tensor, got float32"),
    ("conditional_wrong_input", lambda T: ops.conditional(popxl.constant(True), relu_graph(T), relu_graph(T), [T.g], [T.f]), popart_exception, r"conditional: parent tensor 'g' float32\(3, 4\) does not match input"),
    ("conditional_output_counts", lambda T: ops.conditional(popxl.constant(True), T.ir.create_graph(lambda x: (ops.relu(x), ops.relu(x)), T.f.spec), relu_graph(T), [T.f], [T.f]), popart_exception, r"conditional: then branch '.*' has 2 outputs, else branch '.*' has 1"),
    # ---- autodiff
    ("autodiff_required_not_in_graph", lambda T: autodiff(relu_graph(T), grads_required=[T.f]), ValueError, r"autodiff: grads_required tensor 'f' is not in graph"),
    ("autodiff_int_input_required", lambda T: (lambda g: autodiff(g, grads_required=[g.inputs[0]]))(T.ir.create_graph(lambda x: ops.cast(x, popxl.float32), T.i.spec)), popart_exception, r"Unable to provide required gradient output for fwd id '.*/x': its dtype int32 carries no gradient"),
    ("autodiff_int_output_provided", lambda T: (lambda g: autodiff(g, grads_provided=[g.outputs[0]]))(T.ir.create_graph(lambda x: ops.argmax(x, 0), T.f.spec)), popart_exception, r"autodiff: cannot provide a gradient for '.*/argmax_out' of dtype int32"),
    ("autodiff_no_path", lambda T: (lambda g: autodiff(g, grads_required=[g.inputs[1]]))(T.ir.create_graph(lambda x, y: ops.relu(x), T.f.spec, T.f.spec)), popart_exception, r"fwd id '.*/y': no differentiable path connects it"),
    ("autodiff_path_only_through_argmax", lambda T: autodiff(T.ir.create_graph(lambda x: ops.cast(ops.argmax(x, 0), popxl.float32), T.f.spec)), popart_exception, r"fwd id '.*/x': no differentiable path"),
    ("autodiff_not_a_graph", lambda T: autodiff(lambda x: x), TypeError, r"autodiff expects a Graph, got function"),
    ("autodiff_main_graph", lambda T: autodiff(T.ir.main_graph), popart_exception, r"autodiff: graph 'main' has no outputs"),
    ("autodiff_inplace_op", lambda T: autodiff(T.ir.create_graph(lambda x: ops.relu_(ops.mul(x, x)), T.f.spec)), popart_exception, r"contains a modifying op: ReluInplace \(relu_\)"),
    ("autodiff_required_ints", lambda T: autodiff(relu_graph(T), grads_required=[0]), TypeError, r"autodiff: grads_required must contain Tensors, got int"),
    ("autodiff_called_info_types", lambda T: autodiff(relu_graph(T), called_graphs_grad_info={T.f: 1}), TypeError, r"called_graphs_grad_info must map Graph to GradGraphInfo, got Variable -> int"),
    ("grad_info_other_call_site", lambda T: autodiff(relu_graph(T)).inputs_dict(ops.call_with_info(relu_graph(T), T.f)), TypeError, r"The called graph of the call site \(.*subgraph\(1\)\) does not match the graph that was differentiated \(.*subgraph\(0\)\)"),
    ("grad_info_constructed_directly", lambda T: GradGraphInfo(), TypeError, r"GradGraphInfo should not be constructed directly"),
    ("grad_graph_called_without_activations", lambda T: ops.call(autodiff(T.ir.create_graph(lambda x: ops.mul(x, x), T.f.spec)).graph, T.f), ValueError, r"call: missing inputs for graph '.*_bwd': .*_bwd/x"),
    # ---- remote buffers
    ("remote_buffer_zero_entries", lambda T: popxl.remote_buffer((2,), popxl.float32, 0), ValueError, r"Entries must be a non-zero, positive integer. Got 0"),
    ("remote_buffer_float_entries", lambda T: popxl.remote_buffer((2,), popxl.float32, 1.5), TypeError, r"Entries must be a non-zero, positive integer. Got 1.5"),
    ("remote_buffer_negative_shape", lambda T: popxl.remote_buffer((-2,), popxl.float32, 1), ValueError, r"RemoteBuffer \d+: shape \(-2,\) has a negative dimension"),
    ("remote_store_shape", lambda T: ops.remote_store(popxl.remote_buffer((2,), popxl.float32, 2), 0, T.f), ValueError, r"RemoteStore: Tensor f does not match buffer.\nExisting remote buffer has shape=\(2,\)"),
    ("remote_store_dtype", lambda T: ops.remote_store(popxl.remote_buffer((2, 3), popxl.float16, 2), 0, T.f), ValueError, r"RemoteStore: Tensor f does not match buffer.*\n.*dtype=float16"),
    ("remote_store_negative_offset", lambda T: ops.remote_store(popxl.remote_buffer((2, 3), popxl.float32, 2), -1, T.f), ValueError, r"remote_store: offset must be >= 0, got -1"),
    ("remote_load_float_offset", lambda T: ops.remote_load(popxl.remote_buffer((2, 3), popxl.float32, 2), T.s), TypeError, r"remote_load: the offset 's' must be an integer scalar"),
    ("remote_load_not_a_buffer", lambda T: ops.remote_load("buf", 0), TypeError, r"remote_load: remote_buffer must be a popxl.RemoteBuffer, got str"),
    ("remote_variable_shape", lambda T: popxl.remote_variable(np.ones(3, np.float32), popxl.remote_buffer((2,), popxl.float32, 1), 0, name="rv"), ValueError, r"Tensor rv does not match buffer.\nExisting remote buffer has shape=\(2,\)"),
    ("remote_variable_dtype", lambda T: popxl.remote_variable(np.ones(2, np.int32), popxl.remote_buffer((2,), popxl.float32, 1), 0, name="rv"), ValueError, r"Tensor rv does not match buffer.*\n.*\n.*dtype=int32"),
]


def _outside(T):
    t = T.f
    T.ir.main_graph.__exit__(None, None, None)
    try:
        ops.relu(t)
    finally:
        T.ir.main_graph.__enter__()


@pytest.mark.parametrize("fn,exc,match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_graph_api_misuse_is_refused(T, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(T)


# Host data a variable's or constant's dtype cannot hold: PopXL converts it
# with NumPy's casts (inf, wrapped integers) and raises nothing; ipuxl does
# the same and warns once, naming the tensor (issue 42, item 11).
WARN_CASES = [
    ("variable_int64_wraps", lambda T: popxl.variable(np.array([2 ** 40]), name="vbig"), r"variable 'vbig': .*1099511627776.*int32 \(they would wrap\)"),
    ("variable_float64_overflows", lambda T: popxl.variable(np.array([1e300]), name="vbigf"), r"variable 'vbigf': .*float32 \(they would become inf\)"),
    ("variable_to_float16_overflows", lambda T: popxl.variable(np.array([1e5], np.float32), popxl.float16, name="vh"), r"variable 'vh': .*100000.0.*float16"),
    ("variable_negative_to_uint", lambda T: popxl.variable(np.array([-1]), popxl.uint32, name="vu"), r"variable 'vu': .*-1.*uint32 \(they would wrap\)"),
    ("variable_nan_to_int", lambda T: popxl.variable(np.array([np.nan]), popxl.int32, name="vni"), r"variable 'vni': .*nan.*int32"),
    ("constant_int64_wraps", lambda T: popxl.constant(np.array([2 ** 33]), name="cw"), r"constant 'cw': .*int32"),
]


@pytest.mark.parametrize("fn,match", [c[1:] for c in WARN_CASES], ids=[c[0] for c in WARN_CASES])
def test_data_a_dtype_cannot_hold_is_converted_with_one_warning(T, fn, match):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(T)
    ours = [w for w in caught if issubclass(w.category, RuntimeWarning) and
            "converted as PopXL does" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert re.search(match, str(ours[0].message)), str(ours[0].message)


def _session_error(build):
    ir = popxl.Ir()
    with ir.main_graph:
        build()
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()


def _store(t):
    s = popxl.d2h_stream(t.shape, t.dtype, name="y")
    ops.host_store(s, t)


SESSION_CASES = [
    ("remote_store_offset_past_the_end", lambda: (lambda rb: (ops.remote_store(rb, 2, popxl.constant(np.ones(2, np.float32))), _store(ops.remote_load(rb, 0))))(popxl.remote_buffer((2,), popxl.float32, 2)), ValueError, r"RemoteStore 'remote_store': offset 2 \(constant 'offset'\) is out of range for remote buffer \d+ \(RB_\d+\) of 2 entries"),
    ("remote_load_offset_past_the_end", lambda: _store(ops.remote_load(popxl.remote_buffer((2,), popxl.float32, 2), 5)), ValueError, r"RemoteLoad 'remote_load': offset 5 .* of 2 entries"),
    ("remote_load_tensor_offset_past_the_end", lambda: _store(ops.remote_load(popxl.remote_buffer((2,), popxl.float32, 2), popxl.constant(np.int32(7), name="off"))), ValueError, r"RemoteLoad 'remote_load': offset 7 \(constant 'off'\) is out of range"),
    ("remote_store_tensor_offset_negative", lambda: (lambda rb: (ops.remote_store(rb, popxl.constant(np.int32(-1), name="neg"), popxl.constant(np.ones(2, np.float32))), _store(ops.remote_load(rb, 0))))(popxl.remote_buffer((2,), popxl.float32, 2)), ValueError, r"RemoteStore 'remote_store': offset -1 \(constant 'neg'\)"),
    ("remote_variable_offset_past_the_end", lambda: (lambda rb: (popxl.remote_variable(np.ones(2, np.float32), rb, 3, name="rv3"), _store(ops.remote_load(rb, 0))))(popxl.remote_buffer((2,), popxl.float32, 1)), ValueError, r"remote variable 'rv3': offset 3 is out of range for remote buffer \d+ \(RB_\d+\) of 1 entries"),
]


@pytest.mark.parametrize("build,exc,match", [c[1:] for c in SESSION_CASES], ids=[c[0] for c in SESSION_CASES])
def test_bad_programs_are_refused_when_the_session_is_built(build, exc, match):
    with pytest.raises(exc, match=match):
        _session_error(build)
