"""Forward pass of the MNIST MLP: ipuxl versus NumPy and ONNX Runtime.

The model is 784-512-512-512-10 with biases and GELU (tanh approximation)
after each hidden layer, batch 80, float32. ipuxl runs it through
``Session.run``: the weights are variables, the batch arrives through a host
stream and the logits leave through another. NumPy computes the same math;
ONNX Runtime runs the same model built with the ``onnx`` helper API.

Every peer is timed in the same process: a warm-up, then ``--reps``
interleaved repetitions (ipuxl, numpy, onnxruntime, ipuxl, ...), each timing
``--calls`` back-to-back calls after ``--gap`` idle seconds (so the previous
peer's spinning thread pool does not steal the cores). The table gives the
median per-call time and the ratio peer time / ipuxl time (above 1: ipuxl is
faster), and, apart, the median time of the first call after each idle gap
("after idle"): on the 2-vCPU VMs this project runs on, every peer's first
few calls after an idle gap run up to 2x slower while the machine wakes up,
so blocks of 100 calls keep that transient from deciding the headline
ratio. The three outputs must agree to float32 tolerance, otherwise the
script exits with 1.

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/forward_mlp.py
"""
import argparse
import statistics
import sys
import time

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

LAYERS = (784, 512, 512, 512, 10)
GELU_C = np.float32(np.sqrt(2.0 / np.pi))
GELU_K = np.float32(0.044715)


def make_params(seed: int):
    """He-style initialised weights and small biases, float32."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(LAYERS[:-1], LAYERS[1:]):
        w = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal(fan_out) * 0.1).astype(np.float32)
        params.append((w, b))
    return params


# ---------------------------------------------------------------- NumPy
def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(GELU_C * (x + GELU_K * x * x * x)))


def numpy_forward(params, x: np.ndarray) -> np.ndarray:
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = gelu_tanh(h)
    return h


# ---------------------------------------------------------------- ipuxl
def build_ipuxl(params, batch: int, device: str):
    ir = popxl.Ir()
    with ir.main_graph:
        x_stream = popxl.h2d_stream((batch, LAYERS[0]), popxl.float32, name="images")
        h = ops.host_load(x_stream, "x")
        for i, (w, b) in enumerate(params):
            wv = popxl.variable(w, name=f"W{i}")
            bv = popxl.variable(b, name=f"b{i}")
            h = h @ wv + bv
            if i < len(params) - 1:
                h = ops.gelu(h)
        y_stream = popxl.d2h_stream(h.shape, h.dtype, name="logits")
        ops.host_store(y_stream, h)
    session = popxl.Session(ir, device)
    return session, x_stream, y_stream


# ---------------------------------------------------------------- ONNX Runtime
def build_onnxruntime(params, batch: int, threads: int):
    """An InferenceSession for the same model, or (None, reason)."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        import onnxruntime as ort
    except ImportError as e:
        return None, f"not installed ({e.name}); install with: pip install onnx onnxruntime"

    nodes, inits = [], []
    prev = "x"
    for i, (w, b) in enumerate(params):
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"mm{i}"]))
        nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"z{i}"]))
        prev = f"z{i}"
        if i < len(params) - 1:
            # Gelu (opset 20) with the tanh approximation, the same formula as ops.gelu.
            nodes.append(helper.make_node("Gelu", [prev], [f"g{i}"], approximate="tanh"))
            prev = f"g{i}"
    graph = helper.make_graph(
        nodes, "mnist_mlp_forward",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, LAYERS[0]])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [batch, LAYERS[-1]])],
        initializer=inits)
    # IR version 9 is the oldest that opset 20 allows; newer onnx packages
    # default to IR versions that released runtimes may not load yet.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    onnx.checker.check_model(model)
    opts = ort.SessionOptions()
    if threads > 0:
        opts.intra_op_num_threads = threads
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - an old runtime without Gelu-20
        return None, f"could not load the model: {e}"
    return (sess, prev), None


# ---------------------------------------------------------------- timing
def per_call_seconds(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=80)
    p.add_argument("--reps", type=int, default=15, help="interleaved timed repetitions")
    p.add_argument("--calls", type=int, default=100, help="calls per repetition")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls per peer first")
    p.add_argument("--device", default="ipu_model", choices=["ipu_model", "cpu"])
    p.add_argument("--ort-threads", type=int, default=0,
                   help="onnxruntime intra-op threads (0: its default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gap", type=float, default=0.3,
                   help="idle seconds before each timed block, so the thread pools of the "
                        "previous peer (OpenBLAS spins ~0.1 s after a call) stop competing")
    args = p.parse_args(argv)

    params = make_params(args.seed)
    x = np.random.default_rng(args.seed + 1).standard_normal(
        (args.batch, LAYERS[0])).astype(np.float32)

    session, x_stream, y_stream = build_ipuxl(params, args.batch, args.device)
    ort_built, ort_note = build_onnxruntime(params, args.batch, args.ort_threads)

    peers = {}  # name -> zero-argument callable returning the logits
    results = {}
    with session:
        feeds = {x_stream: x}
        peers["ipuxl"] = lambda: session.run(feeds)[y_stream]
        peers["numpy"] = lambda: numpy_forward(params, x)
        if ort_built is not None:
            ort_sess, out_name = ort_built
            ort_feeds = {"x": x}
            peers["onnxruntime"] = lambda: ort_sess.run([out_name], ort_feeds)[0]

        for name, fn in peers.items():
            results[name] = np.asarray(fn())
            for _ in range(args.warmup):
                fn()

        times = {name: [] for name in peers}
        cold = {name: [] for name in peers}
        for _ in range(args.reps):
            for name, fn in peers.items():
                # Every peer but ipuxl keeps threads spinning after a call;
                # running the next peer inside that window would charge it
                # for the previous one's pool. Each peer gets the same gap.
                time.sleep(args.gap)
                cold[name].append(per_call_seconds(fn, 1))
                times[name].append(per_call_seconds(fn, args.calls))

    # Correctness first: all peers compute the same float32 logits.
    ok = True
    ref = results["numpy"]
    for name, out in results.items():
        if out.shape != (args.batch, LAYERS[-1]) or out.dtype != np.float32:
            print(f"{name}: wrong output {out.dtype}{out.shape}", file=sys.stderr)
            ok = False
            continue
        err = float(np.max(np.abs(out - ref)))
        if not np.allclose(out, ref, rtol=1e-4, atol=1e-4):
            print(f"{name}: output differs from numpy (max abs diff {err:.3g})", file=sys.stderr)
            ok = False
        results[name] = err

    med = {name: statistics.median(ts) for name, ts in times.items()}
    base = med["ipuxl"]
    flops = 2 * args.batch * sum(a * b for a, b in zip(LAYERS[:-1], LAYERS[1:]))
    print(f"MNIST MLP forward {'-'.join(map(str, LAYERS))}, batch {args.batch}, float32, "
          f"ipuxl device {args.device!r}")
    print(f"{args.reps} interleaved repetitions x {args.calls} calls, medians; "
          f"{flops / 1e6:.1f} MFLOP per call")
    print()
    med_cold = {name: statistics.median(ts) for name, ts in cold.items()}
    print(f"{'peer':<12} {'per call (ms)':>14} {'GFLOP/s':>9} {'peer/ipuxl':>11} "
          f"{'after idle (ms)':>16} {'max |diff| vs numpy':>20}")
    for name in peers:
        ratio = med[name] / base
        print(f"{name:<12} {med[name] * 1e3:>14.3f} {flops / med[name] / 1e9:>9.2f} "
              f"{ratio:>11.2f} {med_cold[name] * 1e3:>16.3f} {results[name]:>20.2e}")
    if ort_built is None:
        print(f"{'onnxruntime':<12} skipped: {ort_note}")
    print()
    print("outputs agree" if ok else "OUTPUTS DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
