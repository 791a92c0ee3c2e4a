"""Liveness and views as Poplar has them (docs/ipu_model.md, "Liveness and
views"): a tensor is counted once at a step (a Function's parameter or
output that AliasZeroCopy aliases with its caller's tensor is that tensor),
views take no storage, PopART's out-of-place views are on-tile copies of a
clone, and the peak's contents are listed (``Profile.peak_live``). Every
expected figure is computed here from shapes and dtypes."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms
from ipuxl.profile import profile_ir

F16 = popxl.float16
IN = 50176  # 224 x 224
SHAPES = [(IN, 32), (32,), (32, 64), (64,), (64, 64), (64,)]


def _nbytes(shape, itemsize=2):
    return int(np.prod(shape)) * itemsize


def _fwd(x, p0, b0, p1, b1, p2, b2):
    h = ops.relu(x @ p0 + b0)
    h = ops.relu(h @ p1 + b1)
    return h @ p2 + b2


def mlp_training(batch):
    """An fp16 MLP [B, 50176] -> 32 -> 64 -> 64 trained with softmax cross
    entropy and SGD, as a PopXL user writes it: the forward graph called
    with its weights, its autodiff graph called with the loss gradient,
    then in-place weight updates."""
    ir = popxl.Ir()
    rng = np.random.default_rng(0)
    with ir.main_graph:
        x = ops.host_load(popxl.h2d_stream((batch, IN), F16, name="x"))
        labels = ops.host_load(popxl.h2d_stream((batch,), popxl.int32, name="labels"))
        ws = [popxl.variable(rng.normal(0, 0.01, s).astype(np.float16), name=f"p_{i}")
              for i, s in enumerate(SHAPES)]
        fwd = ir.create_graph(_fwd, x, *ws)
        bwd = transforms.autodiff(fwd, grads_required=fwd.inputs[1:])
        info = ops.call_with_info(fwd, x, *ws)
        probs = ops.softmax(info.outputs[0], axis=1)
        loss, dlogits = ops.nll_loss_with_softmax_grad(probs, labels)
        grads = ops.call(bwd.graph, dlogits, inputs_dict=bwd.inputs_dict(info))
        for w, g in zip(ws, grads):
            ops.scaled_add_(w, g, b=-0.01)
        ops.host_store(popxl.d2h_stream(loss.shape, loss.dtype, name="loss"), loss)
    return ir


@pytest.fixture(scope="module")
def mlp():
    return {b: profile_ir(mlp_training(b), "ipu2") for b in (1, 2)}


def test_weights_are_always_live_once(mlp):
    for p in mlp.values():
        assert p.totals["variables"] == sum(_nbytes(s) for s in SHAPES)


def _grads_bytes():
    return sum(_nbytes(s) for s in SHAPES)


def test_the_peak_holds_each_tensor_once(mlp):
    w0 = _nbytes(SHAPES[0])
    for b, p in mlp.items():
        peak = p.peak_live
        # The list is what the peak step counts.
        assert sum(e["bytes"] for e in peak) == max(p.steps["live_bytes"])
        names = [(e["graph"], e["tensor"]) for e in peak if e["tensor"] is not None]
        assert len(names) == len(set(names))
        # The first layer's weight gradient is the one tensor of that size
        # at the peak: not again as the caller's copy of the backward
        # graph's output, and no not-always-live copy of the weight p_0.
        big = [e for e in peak if e["tensor"] is not None and e["bytes"] >= w0 // 2]
        assert [tuple(e["shape"]) for e in big] == [SHAPES[0]], big
        assert big[0]["bytes"] == w0


def test_the_peak_is_the_first_weight_update(mlp):
    # SGD's update of p_0 reads its gradient (and every other gradient is
    # still live, the loss too); the gradient comes from the backward
    # matmul's plan, p_0 from the forward one, so it is exchanged to p_0's
    # tiles into a temporary of its size. Nothing there depends on B.
    w0 = _nbytes(SHAPES[0])
    for p in mlp.values():
        i = int(np.argmax(p.steps["live_bytes"]))
        assert p.steps["label"][i] == "scaled_add_"
        tensors = sum(e["bytes"] for e in p.peak_live if e["tensor"] is not None)
        assert tensors == _grads_bytes() + 2  # the gradients and the fp16 loss
        temps = sum(e["bytes"] for e in p.peak_live if e["tensor"] is None)
        assert w0 <= temps <= 1.01 * w0
    assert max(mlp[1].steps["live_bytes"]) == max(mlp[2].steps["live_bytes"])


def test_the_backward_step_grows_with_the_batch(mlp):
    # The backward Function's step holds the input x (dW0 = x^T dh reads
    # it): one more sample adds at least its row; the dW0 matmul's operand
    # pieces (x^T rearranged onto the plan's tiles, for each column group)
    # add a few rows more, not more than x's size several times over.
    row = _nbytes((1, IN))

    def bwd_step(p):
        return int(p.steps["live_bytes"][list(p.steps["label"]).index("call_1")])

    grow = bwd_step(mlp[2]) - bwd_step(mlp[1])
    assert row <= grow <= 6 * row, grow


# ---------------------------------------------------------------- views
ROWS, K, N, PARTS = 512, 128, 768, 6


def concat_case(inplace, x_kind):
    """x + concat(matmul of each slice): PopART's out-of-place ConcatOpx is
    cloneNcopy of the concatenated view, concat_ is the view itself."""
    ir = popxl.Ir()
    rng = np.random.default_rng(0)
    with ir.main_graph:
        a = popxl.variable(rng.normal(size=(PARTS * ROWS, K)).astype(np.float16), name="a")
        w = popxl.variable(rng.normal(size=(K, N)).astype(np.float16), name="w")
        parts = [ops.slice(a, start=i * ROWS, stop=(i + 1) * ROWS, axis=0) @ w
                 for i in range(PARTS)]
        c = (ops.concat_ if inplace else ops.concat)(parts, axis=0)
        if x_kind == "variable":
            x = popxl.variable(np.zeros((PARTS * ROWS, N), np.float16), name="x")
        else:
            x = ops.host_load(popxl.h2d_stream((PARTS * ROWS, N), F16, name="xs"))
        y = x + c
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir


def _op(p, name):
    i = p.ops["name"].index(name)
    return {k: v[i] for k, v in p.ops.items() if len(v) == len(p.ops["name"])}


def _step_live(p, label):
    i = list(p.steps["label"]).index(label)
    return int(p.steps["live_bytes"][i])


@pytest.mark.parametrize("x_kind", ["variable", "host_load"])
@pytest.mark.parametrize("inplace", [False, True])
def test_concat_of_matmul_slices(inplace, x_kind):
    p = profile_ir(concat_case(inplace, x_kind), "ipu2")
    whole = _nbytes((PARTS * ROWS, N))
    # x takes the layout the add wants (the concatenation's): no exchange.
    assert _op(p, "add")["exchange_cycles"] == 0
    # At the add: the concatenation (a copy, or the parts it views), the
    # output, and x when it is not a variable; nothing exchanged.
    assert _step_live(p, "add") == (3 if x_kind == "host_load" else 2) * whole
    if inplace:
        assert "concat_" not in list(p.steps["label"])   # no program
        assert not any(e["tensor"] and "concat" in e["tensor"] for e in p.peak_live)
    else:
        # The copy stays on the tiles of its parts: no exchange; the
        # parts die at it.
        assert _op(p, "concat")["exchange_cycles"] == 0
        assert _step_live(p, "concat") == 2 * whole


# --------------------------------------------------------------- layouts
def stream_matmul(source):
    ir = popxl.Ir()
    rng = np.random.default_rng(0)
    with ir.main_graph:
        w = popxl.variable(rng.normal(size=(1000, 100)).astype(np.float32), name="w")
        if source == "host_load":
            a = ops.host_load(popxl.h2d_stream((10000, 1000), popxl.float32, name="a"))
        else:
            a = popxl.variable(np.zeros((10000, 1000), np.float32), name="a")
        y = a @ w
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir


def test_a_stream_lands_where_its_matmul_wants_it():
    # A variable is created with the matmul plan's layout (CanCreate); a
    # host_load's tensor is created the same way, so the matmul exchanges
    # no more than with the variable.
    loaded = _op(profile_ir(stream_matmul("host_load"), "ipu2"), "matmul")
    created = _op(profile_ir(stream_matmul("variable"), "ipu2"), "matmul")
    assert loaded["exchange_cycles"] == created["exchange_cycles"]
    assert loaded["plan"] == created["plan"]


def rearranged_matmul(keep):
    """``a`` (an elementwise output, laid out like its input, not as the
    matmul's plan wants) feeds a matmul; with ``keep`` it is also stored
    after the matmul."""
    ir = popxl.Ir()
    with ir.main_graph:
        x = ops.host_load(popxl.h2d_stream((4096, 256), F16, name="x"))
        w = popxl.variable(np.zeros((256, 1024), np.float16), name="w")
        a = x * np.float16(2)
        y = a @ w
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
        if keep:
            ops.host_store(popxl.d2h_stream(a.shape, a.dtype, name="a"), a)
    return ir


def test_an_operand_a_matmul_rearranges_dies_at_the_copy():
    # poplin first copies the operand into its plan's layout (a Copy
    # program), then runs its compute sets on the copy; Poplar's liveness
    # is per program step, so an operand the matmul reads last is dead
    # during the compute sets: the matmul step holds a's bytes fewer.
    last = profile_ir(rearranged_matmul(False), "ipu2")
    kept = profile_ir(rearranged_matmul(True), "ipu2")
    assert _op(last, "matmul")["plan"] == _op(kept, "matmul")["plan"]
    assert _step_live(kept, "matmul") - _step_live(last, "matmul") == _nbytes((4096, 256))


# ---------------------------------------------------------------- repeat
def repeat_case(trip):
    """A large activation fed to a repeat whose body is small: the loop
    carries (copies) it into the body's parameter, the body adds to it,
    and the result is copied out after the loop (the shape of T5's
    backward blocks, which the model refused as out of memory)."""
    ir = popxl.Ir()
    with ir.main_graph:
        a = ops.host_load(popxl.h2d_stream((1024, 1024), popxl.float32, name="a"))
        b = ops.gelu(a)                                  # an activation, not a source
        body = ir.create_graph(lambda x: x + 1.0, b)
        (y,) = ops.repeat(body, trip, b)
        s = ops.sum(y)
        ops.host_store(popxl.d2h_stream(s.shape, s.dtype, name="s"), s)
    return ir


def test_a_repeat_step_holds_its_body_not_the_callers_copies():
    whole = _nbytes((1024, 1024), 4)
    for trip in (1, 8):
        p = profile_ir(repeat_case(trip), "ipu2")
        labels = list(p.steps["label"])
        i = labels.index("repeat")
        # During the loop: the body's parameter x and its output x + 1,
        # and the scalar 1.0 broadcast to the add's tiles (4 B on each of
        # at most 1472). The caller's b died at its copy into x, and the
        # repeat's output is written by the copy after the loop.
        assert 2 * whole <= int(p.steps["live_bytes"][i]) <= 2 * whole + 4 * 1472
        # Never more than two such tensors at once: b and its copy x at
        # the copy in, x and y at the copy out.
        assert max(p.steps["live_bytes"]) <= 2 * whole + whole // 64
        assert p.fits


def small_outputs_in_a_repeat():
    """What refused T5's fine-tuning: inside a repeated backward block, a
    bias gradient (sum over rows of [1024, 64]) and a relative-position
    bias gradient (a scatter-reduce of [512, 512] values into 32 buckets).
    Both outputs fit on one tile; their inputs span the IPU."""
    ir = popxl.Ir()
    rng = np.random.default_rng(0)
    with ir.main_graph:
        g = ops.host_load(popxl.h2d_stream((1024, 64), popxl.float32, name="g"))
        v = ops.host_load(popxl.h2d_stream((512, 512), popxl.float32, name="v"))
        idx = popxl.constant(rng.integers(0, 32, (512, 512)).astype(np.int32), name="buckets")

        def body(acc, g, v, idx):
            db = ops.sum(ops.gelu(g), axis=0)
            dt = ops.scatter_reduce(ops.gelu(v), idx, "sum", axis=0, axis_size=32)
            return acc + ops.sum(db) + ops.sum(dt)

        acc = popxl.constant(0.0, popxl.float32, name="acc")
        bg = ir.create_graph(body, acc, g, v, idx)
        (s,) = ops.repeat(bg, 4, acc, inputs_dict={bg.inputs[1]: g, bg.inputs[2]: v,
                                                  bg.inputs[3]: idx})
        ops.host_store(popxl.d2h_stream(s.shape, s.dtype, name="s"), s)
    return ir


def test_reductions_to_small_outputs_spread_their_partials():
    p = profile_ir(small_outputs_in_a_repeat(), "ipu2")
    assert p.fits
    # The largest tensors of the body are v and gelu(v) (1 MiB each) and
    # the reductions' partials are at most one partial per input element
    # (4 B each, fp32), spread over the tiles: no tile holds more than a
    # few times its share of them.
    tensors = 2 * _nbytes((512, 512), 4) + 2 * _nbytes((1024, 64), 4)
    partials = 4 * (512 * 512 + 1024 * 64)
    share = (tensors + 2 * partials) / 1472
    assert max(p.steps["max_tile_live"]) <= 8 * share
    assert max(p.steps["live_bytes"]) <= 4 * (tensors + partials)
