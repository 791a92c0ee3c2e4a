"""float32 GEMM throughput: the ipuxl core's sgemm against its peers.

Shapes are the products of the MNIST MLP (784-512-512-512-10) at batch
8, 80 and 128: the forward C = X @ W, and the backward products
dX = G @ W^T (trans_b) and dW = X^T @ G (trans_a) of each layer.

Peers, all in this process on the same float32 data:

  core       ipuxl's packed SIMD GEMM (cpp/core/gemm.cpp), through the
             test hook _core._test_sgemm, repeated inside C++ (no
             interpreter overhead per call)
  core+pack  the same kernel with op(B) packed once beforehand
             (gemm::PackedB: weights that stay constant between updates)
  openblas   scipy-openblas32's cblas_sgemm as the core used it before:
             pinned to one thread, large products split over the core's pool
  numpy      np.matmul(opA, opB, out=C) (numpy's own BLAS and threads)
  torch      torch.matmul(opA, opB, out=C)
  ort        ONNX Runtime: one Gemm node (transA/transB), B a constant
             initializer (ORT pre-packs it, as in a real model); its
             per-run() overhead, measured on an Identity model of the same
             input, is subtracted (column "ort-ovh" shows it)

Every peer but the core keeps worker threads spinning after a call, so each
timed block starts after an idle gap (--gap seconds). Blocks of all peers are
interleaved --reps times; the median per-call time is reported as GFLOP/s,
with ratios peer time / core time (above 1: the core is faster).

  scripts/dev_build.sh build/dev
  IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/gemm.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np


def shapes():
    """(label, ta, tb, M, N, K) for every MLP product at each batch."""
    layers = [(784, 512), (512, 512), (512, 10)]
    out = []
    for batch in (8, 80, 128):
        for fi, fo in layers:
            out.append((f"fwd  X@W   b{batch} {fi}x{fo}", False, False, batch, fo, fi))
            out.append((f"bwd  G@W^T b{batch} {fi}x{fo}", False, True, batch, fi, fo))
            out.append((f"bwd  X^T@G b{batch} {fi}x{fo}", True, False, fi, fo, batch))
    return out


def make_ort(ta, tb, a, b):
    try:
        import onnx  # noqa: PLC0415
        import onnxruntime as ort  # noqa: PLC0415
        from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415
    except ImportError:
        return None, None
    m = a.shape[1] if ta else a.shape[0]
    n = b.shape[0] if tb else b.shape[1]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3

    def session(nodes, inits, out_shape):
        g = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, list(a.shape))],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(out_shape))], inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        s = ort.InferenceSession(model.SerializeToString(), opts,
                                 providers=["CPUExecutionProvider"])
        return lambda: s.run(None, {"A": a})

    gemm = session([helper.make_node("Gemm", ["A", "B"], ["Y"], transA=int(ta), transB=int(tb))],
                   [numpy_helper.from_array(b, "B")], (m, n))
    ident = session([helper.make_node("Identity", ["A"], ["Y"])], [], a.shape)
    return gemm, ident


def per_call(fn, calls):
    t = time.perf_counter()
    fn(calls)
    return (time.perf_counter() - t) / calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--gap", type=float, default=0.3, help="idle seconds before each timed block")
    p.add_argument("--block-ms", type=float, default=20.0, help="length of one timed block")
    p.add_argument("--filter", default="", help="only shapes whose label contains this")
    args = p.parse_args(argv)

    from ipuxl import _core  # noqa: PLC0415
    try:
        import torch  # noqa: PLC0415
        torch_ok = True
    except ImportError:
        torch_ok = False

    rng = np.random.default_rng(0)
    print(f"threads: core {_core.num_threads()}"
          + (f", torch {torch.get_num_threads()}" if torch_ok else ""))
    peers = ["core", "core+pack", "openblas", "numpy", "torch", "ort"]
    head = f"{'shape':30s} {'MFLOP':>6s} " + " ".join(f"{p:>9s}" for p in peers)
    head += "   " + " ".join(f"{'/' + p:>8s}" for p in peers[2:]) + f" {'ort-ovh':>8s}"
    print("GFLOP/s (median); ratios = peer time / core time; ort-ovh in us")
    print(head)
    worst = 0.0
    for label, ta, tb, M, N, K in shapes():
        if args.filter not in label:
            continue
        a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
        b = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
        c = np.zeros((M, N), np.float32)
        opa, opb = (a.T if ta else a), (b.T if tb else b)
        ref = opa.astype(np.float64) @ opb.astype(np.float64)
        flop = 2.0 * M * N * K
        calls = max(3, int(args.block_ms * 1e-3 / (flop / 60e9 + 3e-6)))

        fns = {
            "core": lambda n: _core._test_sgemm(ta, tb, 1.0, a, b, 0.0, c, 1, n),
            "core+pack": lambda n: _core._test_sgemm(ta, tb, 1.0, a, b, 0.0, c, 3, n),
        }
        if _core.has_blas():
            fns["openblas"] = lambda n: _core._test_sgemm(ta, tb, 1.0, a, b, 0.0, c, 2, n)

        def np_fn(n):
            for _ in range(n):
                np.matmul(opa, opb, out=c)
        fns["numpy"] = np_fn
        if torch_ok:
            ta_t, tb_t, c_t = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            ta_t = ta_t.T if ta else ta_t
            tb_t = tb_t.T if tb else tb_t

            def torch_fn(n):
                for _ in range(n):
                    torch.matmul(ta_t, tb_t, out=c_t)
            fns["torch"] = torch_fn
        ort_gemm, ort_ident = make_ort(ta, tb, a, b)
        if ort_gemm is not None:
            def ort_fn(n):
                for _ in range(n):
                    ort_gemm()

            def ovh_fn(n):
                for _ in range(n):
                    ort_ident()
            fns["ort"] = ort_fn
            fns["ort-ovh"] = ovh_fn

        # correctness of every peer, once
        for name in ("core", "core+pack", "openblas"):
            if name in fns:
                c[...] = np.nan
                fns[name](1)
                err = np.abs(c - ref).max() / max(1.0, np.abs(ref).max())
                worst = max(worst, err)
        times = {k: [] for k in fns}
        for fn in fns.values():
            fn(2)  # warm-up
        for _ in range(args.reps):
            for k, fn in fns.items():
                time.sleep(args.gap)
                times[k].append(per_call(fn, calls))
        med = {k: statistics.median(v) for k, v in times.items()}
        if "ort" in med:
            med["ort"] = max(med["ort"] - med["ort-ovh"], 1e-9)
        gf = {k: flop / v / 1e9 for k, v in med.items()}
        row = f"{label:30s} {flop / 1e6:6.2f} " + " ".join(
            f"{gf[p]:9.1f}" if p in gf else f"{'-':>9s}" for p in peers)
        row += "   " + " ".join(
            f"{med[p] / med['core']:8.2f}" if p in med else f"{'-':>8s}" for p in peers[2:])
        row += f" {med['ort-ovh'] * 1e6:8.1f}" if "ort-ovh" in med else f" {'-':>8s}"
        print(row, flush=True)
    print(f"largest relative error of the core's results: {worst:.2e}")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
