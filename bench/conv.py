"""Convolution and pooling: ipuxl's kernels against PyTorch eager on this CPU.

Cases (float32, NCHW): convolutions of ResNet/MNIST-like layers forward,
one convolution forward + backward (input and weight gradients), and max /
average pooling. Each peer computes the same result from the same data in
this process:

  ipuxl   Session.run of a program holding the op (inputs are variables on
          the device, the result leaves through a d2h stream, so each call
          also pays the run's fixed cost and the copy out)
  torch   torch.nn.functional on CPU tensors (eager; the backward case runs
          forward and backward through autograd)

Calls alternate in blocks (--calls per block; --reps repetitions of one
block of each peer, back to back, which goes first alternating; each block
after --gap seconds idle so spinning pools settle); the table shows the
median per-call time of each peer, the ratio torch / ipuxl (above 1: ipuxl
is faster) as the median of the per-repetition ratios (paired: the
machine's slow spells hit both blocks of a pair alike, see bench/_stats.py)
and, for comparison, as the ratio of the two medians, and the largest
difference between the two results.

  scripts/dev_build.sh build/dev
  IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/conv.py [--threads 1]

Instruction-set levels: IPUXL_ISA=avx2 (or sse) forces ipuxl's kernels to
a lower level; ONEDNN_MAX_CPU_ISA=AVX2 (or SSE41) holds PyTorch's oneDNN
convolutions to the same level, so the ratio compares like with like. Both
are printed in the header.

  IPUXL_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 IPUXL_CORE_DIR=build/dev PYTHONPATH=python \
      python3 bench/conv.py

On a machine other jobs are using, both peers slow down (PyTorch's OpenMP
pool more so, as its threads wait at barriers for descheduled peers): run
it on an idle machine, or compare at --threads 1, where contention matters
least; the load average is printed.
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _stats import paired_ratio  # noqa: E402


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


CASES = [
    # label, kind, x shape, w shape / kernel, stride, pad
    ("conv 3x3 64->64 56x56 b8", "conv", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    # ResNet's later stages: more channels on smaller planes
    ("conv 3x3 128->128 28x28 b8", "conv", (8, 128, 28, 28), (128, 128, 3, 3), 1, 1),
    ("conv 3x3 256->256 14x14 b8", "conv", (8, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    ("conv 3x3 3->64 112x112 b4 s2", "conv", (4, 3, 112, 112), (64, 3, 3, 3), 2, 1),
    ("conv 1x1 256->64 28x28 b16", "conv", (16, 256, 28, 28), (64, 256, 1, 1), 1, 0),
    ("conv 5x5 1->32 28x28 b128 (MNIST)", "conv", (128, 1, 28, 28), (32, 1, 5, 5), 1, 2),
    ("conv fwd+bwd 3x3 32->64 28x28 b32", "conv_grad", (32, 32, 28, 28), (64, 32, 3, 3), 1, 1),
    ("maxpool 3x3 s2 64ch 112x112 b8", "maxpool", (8, 64, 112, 112), (3, 3), 2, 1),
    ("avgpool 2x2 s2 128ch 56x56 b16", "avgpool", (16, 128, 56, 56), (2, 2), 2, 0),
]


def build_ipuxl(kind, x, w, stride, pad):
    import ipuxl as popxl
    import ipuxl.ops as ops
    from ipuxl import transforms

    ir = popxl.Ir()
    with ir.main_graph:
        xv = popxl.variable(x, name="x")
        if kind in ("conv", "conv_grad"):
            wv = popxl.variable(w, name="w")
            p = (pad,) * 4
            if kind == "conv":
                outs = [ops.conv(xv, wv, (stride, stride), p)]
                seed = None
            else:
                g = ir.create_graph(lambda a, b: ops.conv(a, b, (stride, stride), p), xv.spec, wv.spec)
                info = ops.call_with_info(g, xv, wv)
                gi = transforms.autodiff(g)
                y = info.outputs[0]
                seed = np.random.default_rng(0).standard_normal(y.shape).astype(np.float32)
                grads = ops.call(gi.graph, popxl.variable(seed, name="seed"),
                                 inputs_dict=gi.inputs_dict(info))
                outs = [y] + list(grads)
        elif kind == "maxpool":
            outs = [ops.max_pool(xv, w, (stride, stride), (pad,) * 4)]
            seed = None
        else:
            outs = [ops.average_pool(xv, w, (stride, stride), (pad,) * 4)]
            seed = None
        streams = []
        for t in outs:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    sess = popxl.Session(ir, "ipu_model")
    sess.__enter__()

    def run():
        r = sess.run()
        return [r[s] for s in streams]

    return run, seed, sess


def build_torch(kind, x, w, stride, pad, seed):
    import torch
    import torch.nn.functional as F

    xt = torch.tensor(x)
    if kind == "conv":
        wt = torch.tensor(w)
        return lambda: [F.conv2d(xt, wt, stride=stride, padding=pad).numpy()]
    if kind == "conv_grad":
        xg = torch.tensor(x, requires_grad=True)
        wg = torch.tensor(w, requires_grad=True)
        st = torch.tensor(seed)

        def step():
            xg.grad = None
            wg.grad = None
            y = F.conv2d(xg, wg, stride=stride, padding=pad)
            y.backward(st)
            return [y.detach().numpy(), xg.grad.numpy(), wg.grad.numpy()]
        return step
    if kind == "maxpool":
        return lambda: [F.max_pool2d(xt, w, stride, pad).numpy()]
    return lambda: [F.avg_pool2d(xt, w, stride, pad).numpy()]


def time_block(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--gap", type=float, default=0.05)
    ap.add_argument("-k", default="", help="only cases whose label contains this")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for both peers (0: each its default); 1 is the least "
                         "sensitive to other load on the machine")
    args = ap.parse_args()

    import torch

    from ipuxl._core_loader import core

    if args.threads:
        torch.set_num_threads(args.threads)
        core.set_num_threads(args.threads)

    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"CPU: {cpu_model()}; ipuxl core threads {core.num_threads()}, level {core.isa()}, "
          f"GEMM {core.gemm_kernel()}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, ONEDNN_MAX_CPU_ISA="
          f"{os.environ.get('ONEDNN_MAX_CPU_ISA', '(unset: its best)')}")
    print("times: medians of the repetitions; torch/ipuxl: median of the per-repetition "
          "ratios (paired), of medians: ratio of the two medians")
    print(f"{'case':38s} {'ipuxl ms':>9s} {'torch ms':>9s} {'torch/ipuxl':>11s} "
          f"{'of medians':>9s} {'max diff':>9s}")
    rng = np.random.default_rng(0)
    ratios = []
    for label, kind, xs, ws, stride, pad in CASES:
        if args.k and args.k not in label:
            continue
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32) * 0.1 if kind.startswith("conv") else ws
        ip, seed, sess = build_ipuxl(kind, x, w, stride, pad)
        tp = build_torch(kind, x, w, stride, pad, seed)
        a, b = ip(), tp()
        diff = max(float(np.max(np.abs(p - q))) for p, q in zip(a, b))
        for _ in range(2):
            ip()
            tp()
        ti, tt = [], []
        for r in range(args.reps):
            # each rep times both peers back to back, the first alternating
            # between reps (see paired_ratio)
            for who in ((ip, ti), (tp, tt))[:: 1 if r % 2 == 0 else -1]:
                time.sleep(args.gap)
                who[1].append(time_block(who[0], args.calls))
        mi, mt = statistics.median(ti), statistics.median(tt)
        ratio = paired_ratio(tt, ti)
        ratios.append(ratio)
        print(f"{label:38s} {mi * 1e3:9.2f} {mt * 1e3:9.2f} {ratio:11.2f} {mt / mi:9.2f} "
              f"{diff:9.2e}", flush=True)
        sess.__exit__(None, None, None)
    if ratios:
        print(f"geometric mean torch/ipuxl: {float(np.exp(np.mean(np.log(ratios)))):.2f}")


if __name__ == "__main__":
    main()
