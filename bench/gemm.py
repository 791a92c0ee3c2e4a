"""float32 GEMM throughput: the ipuxl core's sgemm against its peers.

Shapes are the products of the MNIST MLP (784-512-512-512-10) at batch
8, 80 and 128: the forward C = X @ W, and the backward products
dX = G @ W^T (trans_b) and dW = X^T @ G (trans_a) of each layer; then
square products of 512 and 1024 (the "large" shapes, for the share of the
FMA peak).

Peers, all in this process on the same float32 data, whose arrays start on
64-byte boundaries as a Session's tensors do (--numpy-alignment: as numpy
allocates them; a large array then starts 16 bytes past a page, and the
products that mostly write C, K of 8 or 10, lose a third of their speed):

  ipuxl      what ipuxl runs for the shape: the core or OpenBLAS, by the
             fixed rule of the level and shape (_core.sgemm_plan,
             cpp/core/blas.cpp; the "plan" column says which), through
             the test hook _core._test_sgemm, repeated inside C++ (no
             interpreter overhead per call)
  core       ipuxl's packed SIMD GEMM (cpp/core/gemm.cpp) at the
             instruction-set level in use
  core+pack  the same kernel with op(B) packed once beforehand
             (gemm::PackedB: weights that stay constant between updates)
  openblas   scipy-openblas32's cblas_sgemm as the core used it before:
             pinned to one thread, large products split over the core's pool
  numpy      np.matmul(opA, opB, out=C) (numpy's own BLAS and threads)
  torch      torch.matmul(opA, opB, out=C)
  ort        ONNX Runtime: one Gemm node (transA/transB), B a constant
             initializer (ORT pre-packs it, as in a real model); its
             per-run() overhead, measured on an Identity model of the same
             input, is subtracted

Every peer but the core keeps worker threads spinning after a call, so each
timed block starts after an idle gap (--gap seconds), and then after
--warm-ms of untimed calls of the same peer: on this project's VMs
(Firecracker guests whose kernel packs lightly loaded threads onto one vCPU,
`sched_vcpu_pack=15` in /proc/cmdline) a peer's threads come back from the
gap sharing one vCPU and run there at one thread's speed for tens of
milliseconds; the warm-up times the steady state, as in a training loop,
where the calls follow each other without idling. Blocks of all peers are
interleaved --reps times (the starting peer rotating); the median per-call
time is reported as GFLOP/s, with ratios peer time / ipuxl time (above 1:
ipuxl is faster), each the median of the per-repetition ratios (paired: a
slow spell of the machine falls on all blocks of one repetition alike; see
bench/_stats.py); "best" is the fastest of numpy, torch and ort by median
time (at a forced lower level: numpy, the only peer held to that level),
and "%peak" ipuxl's share of the level's all-core FMA peak
(bench/fma_peak.py), which the header prints with the CPU and the level in
use.

  scripts/dev_build.sh build/dev
  IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/gemm.py
  # a lower level, against NumPy's OpenBLAS on its AVX2 (Haswell) kernels:
  IPUXL_ISA=avx2 OPENBLAS_CORETYPE=Haswell IPUXL_CORE_DIR=... python3 bench/gemm.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np


def _block_products(rows, layers, tag="t"):
    """The forward, input-gradient and weight-gradient products of dense
    layers (fan_in, fan_out) at `rows` rows (labelled tag + rows)."""
    out = []
    for fi, fo in layers:
        out.append((f"fwd  X@W   {tag}{rows} {fi}x{fo}", False, False, rows, fo, fi))
        out.append((f"bwd  G@W^T {tag}{rows} {fi}x{fo}", False, True, rows, fi, fo))
        out.append((f"bwd  X^T@G {tag}{rows} {fi}x{fo}", True, False, fi, fo, rows))
    return out


def shapes(which="mlp"):
    """(label, ta, tb, M, N, K) for every MLP product at each batch
    (which="mlp"), or every 2-D product of bench/transformer_step.py's
    4 x 64 x 256 block (which="transformer": 256 tokens, hidden 256, MLP
    1024, and one head's 64 x 64 x 64 attention products), or of its
    BERT-base size (which="bert": 1024 tokens, hidden 768, MLP 3072, one
    head's 128 x 128 x 64 attention products)."""
    if which == "bert":
        return _block_products(1024, ((768, 768), (768, 3072), (3072, 768))) + [
            ("head q@k^T 128x128x64", False, True, 128, 128, 64),
            ("head a@v   128x64x128", False, False, 128, 64, 128)]
    if which == "transformer":
        return _block_products(256, ((256, 256), (256, 1024), (1024, 256))) + [
            ("head q@k^T 64x64x64", False, True, 64, 64, 64),
            ("head a@v   64x64x64", False, False, 64, 64, 64),
            ("head a^T@g 64x64x64", True, False, 64, 64, 64)]
    out = []
    for batch in (8, 80, 128):
        out += _block_products(batch, ((784, 512), (512, 512), (512, 10)), tag="b")
    for n in (512, 1024):
        out.append((f"square {n}", False, False, n, n, n))
        out.append((f"square {n} A^T", True, False, n, n, n))
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


def operand(values, numpy_alignment=False):
    """A float32 copy of `values` whose data starts on a 64-byte boundary,
    as every tensor of a Session's arena does (cpp/exec/state.cpp) and as
    torch's allocator places its tensors; numpy_alignment: numpy's own
    allocation instead (16 bytes past a page for large arrays, so that most
    of a row's 64-byte vectors straddle two cache lines)."""
    values = np.asarray(values, np.float32)
    if numpy_alignment:
        return values.copy()
    buf = np.empty(values.size + 16, np.float32)
    start = (-buf.ctypes.data // 4) % 16
    out = buf[start:start + values.size].reshape(values.shape)
    out[...] = values
    return out


def per_call(fn, calls):
    t = time.perf_counter()
    fn(calls)
    return (time.perf_counter() - t) / calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--gap", type=float, default=0.3, help="idle seconds before each timed block")
    # 100 ms: on the project's 2-vCPU VMs every peer's first milliseconds
    # after an idle gap run slow (bench/README.md), and the %peak column
    # compares with the FMA probe's steady state. With 20 ms blocks, square
    # 1024 read 166-180 GFLOP/s; with 200 ms, 220 (same build, same minutes).
    p.add_argument("--block-ms", type=float, default=100.0, help="length of one timed block")
    # 100 ms: with no warm-up, after the 0.3 s gaps the core's threads stayed
    # on one vCPU through whole 100 ms blocks (G @ W^T b128 784x512, 2
    # threads: 95-105 GFLOP/s in most blocks, one thread's speed); after
    # 50 ms of warm-up 190-197 in most blocks, after 100 ms in all but one
    # of 24 (bench/results/2026-11-27.md, "ninth session").
    p.add_argument("--warm-ms", type=float, default=100.0,
                   help="untimed calls of a peer right before its timed block")
    p.add_argument("--filter", default="", help="only shapes whose label contains this")
    p.add_argument("--shapes", choices=("mlp", "transformer", "bert"), default="mlp",
                   help="the MNIST MLP's products, the transformer block's (4x64x256) or "
                        "its BERT-base size's")
    p.add_argument("--threads", type=int, default=0,
                   help="threads of every peer (0: each library's default, all cores)")
    p.add_argument("--numpy-alignment", action="store_true",
                   help="operands as numpy allocates them rather than 64-byte aligned "
                        "(the alignment of a Session's tensors)")
    args = p.parse_args(argv)

    from ipuxl import _core  # noqa: PLC0415
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _stats import paired_ratio  # noqa: PLC0415
    from fma_peak import machine_lines  # noqa: PLC0415
    lines, peak = machine_lines(_core)
    for line in lines:
        print(line)
    all_core_peak = peak[_core.isa()][1]
    import threadpoolctl  # noqa: PLC0415
    if args.threads:
        threadpoolctl.threadpool_limits(args.threads)
        _core.set_num_threads(args.threads)
        if args.threads == 1:
            all_core_peak = peak[_core.isa()][0]
    for info in threadpoolctl.threadpool_info():
        if info.get("internal_api") == "openblas":
            print(f"numpy's OpenBLAS: {info.get('version')} kernels {info.get('architecture')}, "
                  f"{info.get('num_threads')} threads"
                  + (f" (OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']})"
                     if os.environ.get("OPENBLAS_CORETYPE") else ""))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        import torch  # noqa: PLC0415
        torch_ok = True
        if args.threads:
            torch.set_num_threads(args.threads)
    except ImportError:
        torch_ok = False

    rng = np.random.default_rng(0)
    print(f"threads: core {_core.num_threads()}"
          + (f", torch {torch.get_num_threads()}" if torch_ok else "")
          + ("; operands as numpy allocates them" if args.numpy_alignment
             else "; operands 64-byte aligned (as in a Session)"))
    print(f"blocks: {args.block_ms:.0f} ms timed, after {args.gap} s idle and "
          f"{args.warm_ms:.0f} ms of untimed calls")
    peers = ["ipuxl", "core", "core+pack", "openblas", "numpy", "torch", "ort"]
    outside = ["numpy", "torch", "ort"]
    # At a forced lower level only NumPy's OpenBLAS is held to that level
    # (OPENBLAS_CORETYPE, e.g. Haswell for avx2); torch and ORT run their
    # best kernels whatever the level, so they are shown but not counted.
    lower = _core.isa() != _core.isa_levels()[-1]
    counted = ["numpy"] if lower else outside
    head = f"{'shape':30s} {'MFLOP':>7s} {'plan':>4s} " + " ".join(f"{p:>9s}" for p in peers)
    head += "   " + " ".join(f"{'/' + p:>7s}" for p in outside) + f" {'/best':>7s} {'%peak':>6s}"
    print("GFLOP/s (median); ratios = peer time / ipuxl time (best: fastest of "
          f"{', '.join(counted)}); %peak: of {all_core_peak:.0f} GFLOP/s")
    print(head)
    worst = 0.0
    lowest = (float("inf"), "")
    for label, ta, tb, M, N, K in shapes(args.shapes):
        if args.filter not in label:
            continue
        a = operand(rng.standard_normal((K, M) if ta else (M, K)), args.numpy_alignment)
        b = operand(rng.standard_normal((N, K) if tb else (K, N)), args.numpy_alignment)
        c = operand(np.zeros((M, N)), args.numpy_alignment)
        opa, opb = (a.T if ta else a), (b.T if tb else b)
        ref = opa.astype(np.float64) @ opb.astype(np.float64)
        flop = 2.0 * M * N * K
        calls = max(3, int(args.block_ms * 1e-3 / (flop / 60e9 + 3e-6)))

        plan = _core.sgemm_plan(ta, tb, M, N, K) if _core.has_blas() else "core"
        fns = {
            "ipuxl": lambda n: _core._test_sgemm(ta, tb, 1.0, a, b, 0.0, c, 0, n),
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
        for name in ("ipuxl", "core", "core+pack", "openblas"):
            if name in fns:
                c[...] = np.nan
                fns[name](1)
                err = np.abs(c - ref).max() / max(1.0, np.abs(ref).max())
                worst = max(worst, err)
        times = {k: [] for k in fns}
        for fn in fns.values():
            fn(2)  # warm-up
        names = list(fns)
        for r in range(args.reps):
            # the starting peer rotates, so no peer always follows the same one
            for k in names[r % len(names):] + names[:r % len(names)]:
                time.sleep(args.gap)
                warm_until = time.perf_counter() + args.warm_ms * 1e-3
                while time.perf_counter() < warm_until:
                    fns[k](max(1, calls // 10))
                times[k].append(per_call(fns[k], calls))
        if "ort" in times:
            times["ort"] = [max(t - o, 1e-9) for t, o in zip(times["ort"], times["ort-ovh"])]
        med = {k: statistics.median(v) for k, v in times.items()}
        gf = {k: flop / v / 1e9 for k, v in med.items()}
        # ratios: medians of the per-repetition ratios (paired, bench/_stats.py);
        # the best peer is the one with the lowest median time
        ratio = {p: paired_ratio(times[p], times["ipuxl"]) for p in outside if p in times}
        best_peer = min((p for p in counted if p in med), key=lambda p: med[p])
        best = ratio[best_peer]
        row = f"{label:30s} {flop / 1e6:7.2f} {plan:>4s} " + " ".join(
            f"{gf[p]:9.1f}" if p in gf else f"{'-':>9s}" for p in peers)
        row += "   " + " ".join(
            f"{ratio[p]:7.2f}" if p in ratio else f"{'-':>7s}" for p in outside)
        row += f" {best:7.2f} {100 * gf['ipuxl'] / all_core_peak:5.0f}%"
        lowest = min(lowest, (best, label))
        print(row, flush=True)
    print(f"lowest ratio best peer / ipuxl: {lowest[0]:.2f} ({lowest[1].strip()})")
    # The host's speed can move during a run (on the project's 2-vCPU VMs
    # the start's probe read 236-351 GFLOP/s at avx512 in one session): a
    # second probe tells whether %peak's base held.
    end_peak = max(_core.fma_peak(_core.isa(), 1 if args.threads == 1 else
                                  (args.threads or os.cpu_count() or 1), 0.1) for _ in range(2))
    print(f"FMA probe at the end: {end_peak:.0f} GFLOP/s (start: {all_core_peak:.0f}; %peak is of "
          "the start's)")
    print(f"largest relative error of the core's results: {worst:.2e}")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
