"""Catalogue: bad arguments to op builders. Each case raises PopXL's
exception type (TypeError for wrong types/dtypes, ValueError for wrong
shapes/values) at graph-build time, and the message names the op and the
culprit tensor or argument."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def _sub(T, fn, *specs):
    return T.ir.create_graph(fn, *specs)


CASES = [
    # ---- elementwise binary
    ("add_shapes", lambda T: ops.add(T.f, T.g), ValueError, r"add: shapes do not broadcast: 'f' \(2, 3\), 'g' \(3, 4\)"),
    ("add_dtypes", lambda T: ops.add(T.f, T.h), TypeError, r"add: .*same dtype.*'f' \(float32\), 'h' \(float16\)"),
    ("add_int_float", lambda T: ops.add(T.i, T.f), TypeError, r"add: .*'i' \(int32\), 'f' \(float32\)"),
    ("add_bool", lambda T: ops.add(T.b, T.b), TypeError, r"add: tensor 'b' has dtype bool"),
    ("add_str", lambda T: ops.add(T.f, "x"), TypeError, r"add: cannot convert 'x'"),
    ("add_none", lambda T: ops.add(T.f, None), TypeError, r"add: cannot convert None"),
    ("add_complex", lambda T: ops.add(T.f, 1j), TypeError, r"add: cannot convert 1j"),
    ("mul_datetime", lambda T: ops.mul(T.f, np.datetime64("2020")), TypeError, r"mul: cannot convert .*datetime64"),
    ("operator_add_none", lambda T: T.f + None, TypeError, r"tensor 'f' with None"),
    ("operator_mul_complex", lambda T: T.f * (1 + 2j), TypeError, r"tensor 'f' with \(1\+2j\)"),
    ("operator_pow_str", lambda T: T.f ** "a", TypeError, r"tensor 'f' with 'a'"),
    ("operator_sub_str_list", lambda T: T.f - ["a", "b", "c"], TypeError, r"tensor 'f' with \['a'"),
    ("pow_exponent_wraps", lambda T: ops.pow(T.i, 2 ** 62), ValueError, r"pow: operand .*4611686018427387904.*outside the range of int32 \(they would wrap\)"),
    ("add_operand_wraps", lambda T: ops.add(T.i, 2 ** 40), ValueError, r"add: operand 1099511627776.*int32 \(they would wrap\)"),
    ("operator_add_operand_wraps", lambda T: T.i + 2 ** 40, ValueError, r"operand 1099511627776 of tensor 'i'.*they would wrap"),
    ("operator_add_nan_to_int", lambda T: T.i + float("nan"), ValueError, r"operand nan of tensor 'i'.*an integer dtype cannot hold them"),
    ("sub_inplace_broadcast_lhs", lambda T: ops.sub_(T.v, T.f), ValueError, r"sub_: shapes do not broadcast: 'v' \(4,\), 'f' \(2, 3\)"),
    ("add_inplace_result_bigger", lambda T: ops.add_(T.v, popxl.variable(np.ones((2, 4), np.float32), name="big")), ValueError, r"add_: the result shape \(2, 4\) differs from the shape \(4,\) of the in-place operand 'v'"),
    ("mul_inplace_constant", lambda T: ops.mul_(popxl.constant(np.ones(3, np.float32), name="k"), 2.0), ValueError, r"mul_: cannot modify 'k' in place"),
    ("fmod_dtypes", lambda T: ops.fmod(T.f, T.h), TypeError, r"fmod: .*'f' \(float32\), 'h' \(float16\)"),
    ("maximum_shapes", lambda T: ops.maximum(T.f, T.g), ValueError, r"maximum: shapes do not broadcast: 'f' \(2, 3\), 'g' \(3, 4\)"),
    ("pow_fraction_int", lambda T: ops.pow(T.i, 0.5), TypeError, r"pow: tensor 'i' has dtype int32; a fractional exponent"),
    ("pow_bool_exponent", lambda T: ops.pow(T.f, True), TypeError, r"pow: exponent must be a number"),
    ("pow_str_exponent", lambda T: ops.pow(T.f, "2"), TypeError, r"pow: exponent must be numeric"),
    ("equal_dtypes", lambda T: ops.equal(T.f, T.i), TypeError, r"equal: .*'f' \(float32\), 'i' \(int32\)"),
    ("greater_shapes", lambda T: ops.greater(T.f, T.g), ValueError, r"greater: shapes do not broadcast: 'f' \(2, 3\), 'g' \(3, 4\)"),
    ("scaled_add_shapes", lambda T: ops.scaled_add(T.f, T.g), ValueError, r"scaled_add: X 'f' \(2, 3\) and Y 'g' \(3, 4\) must have the same shape"),
    ("scaled_add_a_shape", lambda T: ops.scaled_add(T.f, T.f, T.f), ValueError, r"scaled_add: a 'f' must be a scalar"),
    # ---- elementwise unary
    ("exp_int", lambda T: ops.exp(T.i), TypeError, r"exp: tensor 'i' has dtype int32; expected a floating point dtype"),
    ("log_bool", lambda T: ops.log(T.b), TypeError, r"log: tensor 'b' has dtype bool"),
    ("sqrt_int", lambda T: ops.sqrt(T.i), TypeError, r"sqrt: tensor 'i' has dtype int32"),
    ("tanh_numpy", lambda T: ops.tanh(np.ones(3)), TypeError, r"tanh: argument 't' must be a Tensor, got ndarray"),
    ("gelu_int", lambda T: ops.gelu(T.i), TypeError, r"gelu: tensor 'i' has dtype int32"),
    ("sin_bool", lambda T: ops.sin(T.b), TypeError, r"sin: tensor 'b' has dtype bool"),
    ("negate_bool", lambda T: -T.b, TypeError, r"negate: tensor 'b' has dtype bool"),
    ("clip_str", lambda T: ops.clip(T.f, "a", 1.0), TypeError, r"clip: min must be a float, got 'a'"),
    ("relu_inplace_constant", lambda T: ops.relu_(popxl.constant(np.ones(2, np.float32), name="kc")), ValueError, r"relu_: cannot modify 'kc' in place"),
    # ---- matmul
    ("matmul_inner", lambda T: ops.matmul(T.f, T.f), ValueError, r"matmul: contraction dimensions differ: 'f' \(2, 3\) @ 'f' \(2, 3\)"),
    ("matmul_scalar", lambda T: ops.matmul(T.s, T.f), ValueError, r"matmul: operands must have rank >= 1, got 's' \(\)"),
    ("matmul_int_float", lambda T: ops.matmul(T.i, T.g), TypeError, r"matmul: .*'i' \(int32\), 'g' \(float32\)"),
    ("matmul_dtypes", lambda T: ops.matmul(T.h, T.g), TypeError, r"matmul: .*'h' \(float16\), 'g' \(float32\)"),
    ("matmul_batch", lambda T: ops.matmul(popxl.variable(np.ones((2, 3, 4), np.float32), name="a3"), popxl.variable(np.ones((3, 4, 5), np.float32), name="b3")), ValueError, r"matmul: batch dimensions do not broadcast: 'a3' \(2, 3, 4\) @ 'b3' \(3, 4, 5\)"),
    ("matmul_vectors", lambda T: ops.matmul(T.v, popxl.variable(np.ones(3, np.float32), name="w3")), ValueError, r"matmul: contraction dimensions differ: 'v' \(4,\) @ 'w3' \(3,\)"),
    ("matmul_operator", lambda T: T.f @ T.f, ValueError, r"matmul: contraction dimensions differ: 'f'"),
    # ---- reductions
    ("sum_axis_oob", lambda T: ops.sum(T.f, 2), ValueError, r"sum: axis 2 is out of range for a tensor of rank 2"),
    ("sum_axis_neg_oob", lambda T: ops.sum(T.f, -3), ValueError, r"sum: axis -3 is out of range"),
    ("sum_axis_float", lambda T: ops.sum(T.f, 1.0), TypeError, r"sum: axis must be None, an int or a sequence of ints, got 1.0"),
    ("sum_axis_dup", lambda T: ops.sum(T.f, [0, 0]), ValueError, r"sum: repeated axis in \(0, 0\)"),
    ("sum_axis_dup_neg", lambda T: ops.sum(T.f, [1, -1]), ValueError, r"sum: repeated axis in \(1, -1\)"),
    ("mean_keepdims_str", lambda T: ops.mean(T.f, 0, "yes"), TypeError, r"mean: keepdims must be a bool, got 'yes'"),
    ("max_bool", lambda T: ops.max(T.b), TypeError, r"max: tensor 'b' has dtype bool"),
    ("max_scalar_axis", lambda T: ops.max(T.s, 0), ValueError, r"max: tensor 's' has rank 0 and no axis 0"),
    ("l2_axis_oob", lambda T: ops.l2(T.v, 1), ValueError, r"l2: axis 1 is out of range for a tensor of rank 1"),
    ("logsumexp_int", lambda T: ops.logsumexp(T.i), TypeError, r"logsumexp: tensor 'i' has dtype int32"),
    ("histogram_unsorted", lambda T: ops.histogram(T.f, [1.0, 0.0], False), ValueError, r"histogram: .*\[1.0, 0.0\].*monotonically increasing"),
    ("argmax_axis_oob", lambda T: ops.argmax(T.f, 2), ValueError, r"argmax: dim 2 is out of range for a tensor of rank 2"),
    ("argmax_bool", lambda T: ops.argmax(T.b, 0), TypeError, r"argmax: tensor 'b' has dtype bool"),
    ("cumsum_dim_oob", lambda T: ops.cumsum(T.f, 2), ValueError, r"cumsum: dim 2 is out of range"),
    ("cumsum_bool", lambda T: ops.cumsum(T.b, 0), TypeError, r"cumsum: tensor 'b' has dtype bool"),
    ("topk_k_big", lambda T: ops.topk(T.f, 4, 1, True, True), ValueError, r"topk: .*4.*'f'"),
    ("topk_k_negative", lambda T: ops.topk(T.f, -1, 1, True, True), ValueError, r"topk: .*-1"),
    ("topk_axis_oob", lambda T: ops.topk(T.f, 1, 3, True, True), ValueError, r"topk: .*3.*rank 2"),
    # ---- shapes
    ("reshape_bad_count", lambda T: ops.reshape(T.f, (4, 2)), ValueError, r"reshape: cannot reshape tensor 'f' of shape \(2, 3\) \(6 elements\) to \(4, 2\)"),
    ("reshape_two_minus1", lambda T: ops.reshape(T.f, (-1, -1)), ValueError, r"reshape: shape can contain at most one '-1'"),
    ("reshape_neg2", lambda T: ops.reshape(T.f, (-2, 3)), ValueError, r"reshape: invalid shape value in \(-2, 3\) for tensor 'f'"),
    ("reshape_float_dim", lambda T: ops.reshape(T.f, (2.0, 3)), TypeError, r"reshape: shape must be a tuple of ints, got \(2.0, 3\)"),
    ("reshape_zero", lambda T: ops.reshape(T.f, (0, 6)), ValueError, r"reshape: cannot reshape tensor 'f'"),
    ("reshape_minus1_zero", lambda T: ops.reshape(T.f, (0, -1)), ValueError, r"reshape: cannot infer the '-1' dimension of \(0, -1\) for tensor 'f'"),
    ("reshape_method", lambda T: T.f.reshape((7,)), ValueError, r"reshape: cannot reshape tensor 'f'"),
    ("transpose_repeated", lambda T: ops.transpose(T.f, (0, 0)), ValueError, r"transpose: \(0, 0\) is not a permutation of the axes of tensor 'f'"),
    ("transpose_short", lambda T: ops.transpose(T.f, (0,)), ValueError, r"transpose: permutation \(0,\) has 1 entries but tensor 'f' has rank 2"),
    ("transpose_oob", lambda T: ops.transpose(T.f, (0, 2)), ValueError, r"transpose: .*rank 2. Found 2 in \(0, 2\)"),
    ("transpose_method", lambda T: T.f.transpose((1, 1)), ValueError, r"transpose: \(1, 1\) is not a permutation .*'f'"),
    ("squeeze_not_one", lambda T: ops.squeeze(T.f, [0]), ValueError, r"squeeze: can't squeeze axis 0 of tensor 'f' \(2, 3\): its length is 2"),
    ("squeeze_oob", lambda T: ops.squeeze(T.f, [5]), ValueError, r"squeeze: axis 5 is out of range for a tensor of rank 2"),
    ("squeeze_scalar_axis", lambda T: ops.squeeze(T.s, [0]), ValueError, r"squeeze: tensor 's' is a scalar"),
    # ---- slicing
    ("slice_step_zero", lambda T: ops.slice(T.f, 0, 2, 0, 0), ValueError, r"slice: step must not be zero \(axis 0\)"),
    ("slice_axis_oob", lambda T: ops.slice(T.f, 0, 1, 1, 4), ValueError, r"slice: axis 4 is out of range"),
    ("slice_len_mismatch", lambda T: ops.slice(T.f, [0, 0], [1], None, [0, 1]), ValueError, r"slice: .*`stop` has length 1 != 2"),
    ("slice_dup_axis", lambda T: ops.slice(T.f, [0, 0], [1, 1], None, [0, 0]), ValueError, r"slice: repeated axis in \[0, 0\]"),
    ("slice_float_start", lambda T: ops.slice(T.f, 0.5, 1, 1, 0), TypeError, r"slice: start must be an int, None or a list of them, got 0.5"),
    ("slice_scalar", lambda T: ops.slice(T.s, 0, 1, 1, 0), ValueError, r"slice: 1 slices given for tensor 's' of rank 0"),
    ("slice_inplace_constant_write", lambda T: ops.relu_(ops.slice_(popxl.constant(np.ones(3, np.float32), name="kk"), 0, 2)), ValueError, r"cannot modify .* in place"),
    ("subsample_zero", lambda T: ops.subsample(T.f, [0, 1]), ValueError, r"subsample: strides must be >= 1, got \[0, 1\]"),
    ("subsample_long", lambda T: ops.subsample(T.f, [1, 1, 1]), ValueError, r"subsample: .*\(3\).*rank of the input tensor 'f' \(2\)"),
    ("split_not_divisible", lambda T: ops.split(T.f, 4, 1), ValueError, r"split: 4 does not equally divide axis 1 of tensor 'f' with length 3"),
    ("split_bad_sum", lambda T: ops.split(T.f, [1, 1], 1), ValueError, r"split: split lengths \[1, 1\] sum to 2, not to the length 3 of axis 1 of tensor 'f'"),
    ("split_zero", lambda T: ops.split(T.f, 0, 1), ValueError, r"split: the number of splits must be >= 1, got 0"),
    ("split_scalar", lambda T: ops.split(T.s, 1, 0), ValueError, r"split: tensor 's' is a scalar"),
    ("concat_empty", lambda T: ops.concat([], 0), ValueError, r"concat: at least one tensor is required"),
    ("concat_rank", lambda T: ops.concat([T.f, T.v], 0), ValueError, r"concat: all tensors must have the same rank; 'f' has shape \(2, 3\) and 'v' has shape \(4,\)"),
    ("concat_shape", lambda T: ops.concat([T.f, T.g], 0), ValueError, r"concat: shapes must match except on axis 0; 'f' .* 'g'"),
    ("concat_dtype", lambda T: ops.concat([T.f, T.h], 0), TypeError, r"concat: .*same type: 'f' \(float32\), 'h' \(float16\)"),
    ("concat_axis_oob", lambda T: ops.concat([T.f, T.f], 2), ValueError, r"concat: axis 2 is out of range"),
    ("concat_scalar", lambda T: ops.concat([T.s, T.s], 0), ValueError, r"concat: scalar tensors cannot be concatenated \('s'\)"),
    # ---- gather / scatter / dynamic
    ("gather_float_idx", lambda T: ops.gather(T.g, T.fidx, 0), TypeError, r"gather: tensor 'fidx' has dtype float32; indices must have one of"),
    ("gather_axis_oob", lambda T: ops.gather(T.g, T.idx, 2), ValueError, r"gather: axis 2 is out of range"),
    ("gather_scalar", lambda T: ops.gather(T.s, T.idx, 0), ValueError, r"gather: cannot gather from the scalar tensor 's'"),
    ("scatter_shape", lambda T: ops.scatter(T.g, T.idx, T.f, 0), ValueError, r"scatter: indices 'idx' \(2,\) and values 'f' \(2, 3\) must have the same shape"),
    ("scatter_dtype", lambda T: ops.scatter(T.f, popxl.constant(np.zeros((2, 3), np.int32)), T.h, 0), TypeError, r"scatter: .*'f' \(float32\), 'h' \(float16\)"),
    ("dynamic_slice_size_big", lambda T: ops.dynamic_slice(T.f, T.u0, [0], [3], True), ValueError, r"dynamic_slice: size 3 is out of range for axis 0 of tensor 'f' \(2, 3\)"),
    ("dynamic_slice_axes_len", lambda T: ops.dynamic_slice(T.f, T.u0, [0, 1], [1], True), ValueError, r"dynamic_slice: axes \[0, 1\] and sizes \[1\] must have the same length"),
    ("dynamic_slice_float_index", lambda T: ops.dynamic_slice(T.f, T.fidx, [0], [1], True), TypeError, r"dynamic_slice: tensor 'fidx' has dtype float32; index must have one of"),
    ("dynamic_update_shape", lambda T: ops.dynamic_update(T.f, T.u0, T.v, [0], [1], True), ValueError, r"dynamic_update: t_update 'v' has shape \(4,\); the slice of 'f' \(2, 3\)"),
    ("onehot_neg_depth", lambda T: ops.onehot(T.idx, popxl.constant(np.int32(-3)), popxl.constant(np.array([0.0, 1.0], np.float32)), 1), ValueError, r"onehot: num_classes must be a positive integer, got -3"),
    # ---- softmax, where, norms, conv, pool
    ("softmax_axis_oob", lambda T: ops.softmax(T.f, 2), ValueError, r"softmax: axis 2 is out of range"),
    ("softmax_int", lambda T: ops.softmax(T.i, 0), TypeError, r"softmax: tensor 'i' has dtype int32"),
    ("softmax_scalar", lambda T: ops.softmax(T.s, 0), ValueError, r"softmax: tensor 's' has rank 0"),
    ("where_shapes", lambda T: ops.where(T.b, T.f, T.g), ValueError, r"where: shapes do not broadcast: 'b' \(2, 3\), 'f' \(2, 3\), 'g' \(3, 4\)"),
    ("where_dtypes", lambda T: ops.where(T.b, T.f, T.h), TypeError, r"where: .*'f' \(float32\), 'h' \(float16\)"),
    ("layer_norm_weight_shape", lambda T: ops.layer_norm(T.f, T.v, T.v), ValueError, r"weight 'v' has shape \(4,\); expected \(3,\), one value per channel of 'f'"),
    ("layer_norm_1d", lambda T: ops.layer_norm(T.v, T.v, T.v), ValueError, r"tensor 'v' \(4,\) must have rank >= 2"),
    ("group_norm_groups", lambda T: ops.group_norm(T.x4, popxl.variable(np.ones(2, np.float32), name="w2"), popxl.variable(np.ones(2, np.float32), name="b2"), 3), ValueError, r"group_norm: num_groups 3 must divide the 2 channels of 'x4'"),
    ("conv_channels", lambda T: ops.conv(T.x4, popxl.variable(np.ones((3, 3, 1, 1), np.float32), name="cw")), ValueError, r"(?i)conv: the weight 'cw' \(3, 3, 1, 1\) must have 2 / groups"),
    ("conv_rank", lambda T: ops.conv(T.f, T.x4), ValueError, r"conv: the input 'f' \(2, 3\) must have rank 3, 4 or 5"),
    ("max_pool_kernel_big", lambda T: ops.max_pool(T.x4, (5, 5)), ValueError, r"(?i)maxpool: the kernel \(5, 5\) does not fit the padded input 'x4'"),
    ("average_pool_zero_kernel", lambda T: ops.average_pool(T.x4, (0, 1)), ValueError, r"average_pool: kernel_size, stride and dilation must be >= 1.*\(0, 1\)"),
    ("interpolate_rank", lambda T: ops.interpolate(T.f, scale_factor=(2.0,)), ValueError, r"interpolate: scale_factor \(2.0,\) must have one value per axis of 'f'"),
    # ---- losses, random
    ("nll_loss_label_float", lambda T: ops.nll_loss(T.f, T.fidx), TypeError, r"nll_loss: tensor 'fidx' has dtype float32; labels must have one of"),
    ("nll_loss_label_shape", lambda T: ops.nll_loss(T.f, popxl.constant(np.zeros(3, np.int32), name="lab")), ValueError, r"nll_loss: the label tensor 'lab' \(3,\) must have shape \(2,\).*'f'"),
    ("random_uniform_bad_seed", lambda T: ops.random_uniform(T.f, (2, 2)), ValueError, r"random_uniform: seed_tensor 'f' must be uint32 of shape \(2,\)"),
    ("dropout_p_big", lambda T: ops.dropout(T.f, popxl.constant(np.zeros(2, np.uint32)), 1.5), ValueError, r"dropout: p must be in \[0, 1\), got 1.5"),
    ("dropout_seed_shape", lambda T: ops.dropout(T.f, popxl.constant(np.zeros(3, np.uint32), name="sd"), 0.5), ValueError, r"dropout: seed_tensor 'sd' must be uint32 of shape \(2,\)"),
    ("increment_mod_zero", lambda T: ops.increment_mod(T.f, 1, 0), ValueError, r"increment_mod: modulus must not be 0 .*'f'"),
    # ---- host io and init
    ("host_store_wrong_shape", lambda T: ops.host_store(popxl.d2h_stream((3,), popxl.float32, name="o"), T.f), ValueError, r"host_store: tensor 'f' float32\(2, 3\) does not match stream 'o' float32\(3,\)"),
    ("host_store_wrong_dtype", lambda T: ops.host_store(popxl.d2h_stream((2, 3), popxl.float16, name="o"), T.f), ValueError, r"host_store: tensor 'f' float32\(2, 3\) does not match stream 'o' float16\(2, 3\)"),
    ("host_load_d2h", lambda T: ops.host_load(popxl.d2h_stream((2, 3), popxl.float32, name="o")), TypeError, r"host_load expects a HostToDeviceStream, got DeviceToHostStream"),
    ("host_store_h2d", lambda T: ops.host_store(popxl.h2d_stream((2, 3), popxl.float32, name="o"), T.f), TypeError, r"host_store expects a DeviceToHostStream, got HostToDeviceStream"),
    ("init_bad_kind", lambda T: ops.init((2,), popxl.float32, init_type="ones"), ValueError, r"init: init_type must be 'zero' or 'undef', got 'ones'"),
    ("init_neg_shape", lambda T: ops.init((-2,), popxl.float32), ValueError, r"init: shape \(-2,\) has a negative dimension -2"),
    # ---- variable updates
    ("accumulate_shape", lambda T: ops.var_updates.accumulate_(T.f, T.g), ValueError, r"accumulate_: X 'g' has shape \(3, 4\) but t 'f' has shape \(2, 3\)"),
    ("accumulate_constant", lambda T: ops.var_updates.accumulate_(popxl.constant(np.ones((2, 3), np.float32), name="kv"), T.f), ValueError, r"accumulate_: cannot modify 'kv' in place: it is \(a view of\) a constant"),
    ("copy_var_update_dtype", lambda T: ops.var_updates.copy_var_update_(T.f, T.h), TypeError, r"copy_var_update_: X 'h' has dtype float16 but t 'f' has dtype float32"),
]


@pytest.mark.parametrize("fn,exc,match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_op_builder_refuses_bad_input(T, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(T)
