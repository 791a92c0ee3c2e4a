"""float32 FMA peak of every instruction-set level this CPU has.

For each level (x86-64: sse, avx2, avx512; the ones the CPU supports), the
core runs independent vector multiply-adds (``_core.fma_peak``: 12 chains,
enough to cover the latency of two FMA pipes) on one thread and on every
core at once, best of three, and prints GFLOP/s. The "sse" level has no FMA
instruction: its figure is a multiply and an add per lane.

These are the ceilings the GEMM figures of bench/gemm.py and
bench/mnist_step.py are set against; the benchmarks print them too
(``machine_lines``).

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/fma_peak.py
"""
from __future__ import annotations

import argparse
import os
import platform
import sys


def cpu_model() -> str:
    """'AMD EPYC (family 25 model 17)' from /proc/cpuinfo, else platform's word."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = (s.strip() for s in line.split(":", 1))
                    info.setdefault(k, v)
                if not line.strip() and info:
                    break
    except OSError:
        pass
    name = info.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in info:
        name += f" (family {info['cpu family']} model {info.get('model', '?')})"
    return name


def cpu_flags() -> str:
    """The SIMD flags that matter here, as /proc/cpuinfo lists them."""
    want = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512vl", "avx512bw",
            "avx512dq", "avx512_bf16", "avx512_vnni", "avx512_fp16", "asimd", "sve")
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    return " ".join(w for w in want if w in have)
    except OSError:
        pass
    return "?"


def peaks(core, seconds=0.1, threads=None):
    """{level: (one thread, all cores)} in GFLOP/s. The all-core figure is
    the better of two probes: on this project's VMs (bench/gemm.py's
    docstring: the guest kernel packs lightly loaded threads onto one vCPU)
    a probe right after an idle spell sometimes ran all its threads on one
    vCPU and read the one-thread figure (avx2 117 / 117 on Zen 4, ninth
    session)."""
    threads = threads or os.cpu_count() or 1
    return {lv: (core.fma_peak(lv, 1, seconds),
                 max(core.fma_peak(lv, threads, seconds) for _ in range(2)))
            for lv in core.isa_levels()}


def cpu_peaks(core, seconds=0.1):
    """{level: GFLOP per CPU-second} of the same loop on one thread, timed by
    that thread's CPU clock (``_core.fma_peak_cpu``): one core's rate while it
    runs, which the other processes on a shared machine do not lower (the
    loop touches no memory). A step's FLOPs over its process CPU seconds,
    set against this, is its share of the all-core peak with the time its
    threads were descheduled left out (time they wait in the step, spinning
    or not, counts against it); the caches the other processes share with
    it still lower it. None for a core built without ``fma_peak_cpu``."""
    if not hasattr(core, "fma_peak_cpu"):
        return None
    return {lv: core.fma_peak_cpu(lv, seconds) for lv in core.isa_levels()}


def machine_lines(core, seconds=0.1):
    """Lines describing the machine, the level in use and every level's FMA peak."""
    p = peaks(core, seconds)
    n = os.cpu_count() or 1
    out = [f"CPU: {cpu_model()}, {n} logical cores; flags: {cpu_flags()}",
           f"ISA levels: {', '.join(core.isa_levels())}; in use: {core.isa()}"
           + (f" (IPUXL_ISA={os.environ['IPUXL_ISA']})" if os.environ.get("IPUXL_ISA") else ""),
           "float32 FMA peak (GFLOP/s, 1 thread / all cores): "
           + "; ".join(f"{lv} {a:.0f} / {b:.0f}" for lv, (a, b) in p.items())]
    cp = cpu_peaks(core, seconds)
    if cp:
        out.append("float32 FMA peak per CPU-second (1 thread, its CPU clock): "
                   + "; ".join(f"{lv} {g:.0f}" for lv, g in cp.items()))
    return out, p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=0.2, help="length of each timed loop")
    ap.add_argument("--threads", type=int, default=0, help="all-core threads (0: every core)")
    args = ap.parse_args(argv)
    from ipuxl import _core as core  # noqa: PLC0415
    n = args.threads or os.cpu_count() or 1
    print(f"CPU: {cpu_model()}; flags: {cpu_flags()}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    cp = cpu_peaks(core, args.seconds) or {}
    print(f"{'level':8s} {'1 thread':>10s} {f'{n} threads':>11s} {'per CPU-s':>10s}"
          "  (float32 GFLOP/s; per CPU-s: 1 thread, its CPU clock)")
    for lv, (one, alln) in peaks(core, args.seconds, n).items():
        mark = "  <- in use" if lv == core.isa() else ""
        print(f"{lv:8s} {one:10.1f} {alln:11.1f} {cp.get(lv, float('nan')):10.1f}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
