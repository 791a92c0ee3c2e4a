#!/usr/bin/env python3
"""Long fuzzing campaign: random ipuxl graphs with gradients against PyTorch
float64 (see ipu_model_tests/fuzz/graph_fuzz.py).

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python \\
        python3 tools/fuzz_graphs.py --n 100000 --seed 1 --mode all --workers 2

Each graph runs in a worker subprocess that is reused for many graphs; a
worker that dies (segfault, abort, out of memory) is counted as a crash of
the graph it was running, with its seed, and a fresh worker takes over.
Prints the counts per mode and writes a JSON summary (``--json``).
``--repro SEED:INDEX`` runs one graph in this process and prints its
description and result.
"""
import argparse
import collections
import json
import os
import queue
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZ_DIR = os.path.join(HERE, "..", "ipu_model_tests", "fuzz")

WORKER = r"""
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
import graph_fuzz
import os
abort_at = os.environ.get("IPUXL_FUZZ_ABORT_AT")  # tests the crash accounting
for line in sys.stdin:
    seed, index, mode = line.split()
    if abort_at == index:
        os.abort()
    # The graph and its PyTorch references are drawn once for all modes
    # (graph_fuzz.prepare caches them).
    try:
        r = graph_fuzz.run_graph(int(seed), int(index), mode)
    except Exception as e:
        r = {"seed": int(seed), "index": int(index), "mode": mode, "outcome": "harness_error",
             "error": f"{type(e).__name__}: {e}"[:800], "trace": traceback.format_exc()[-2000:]}
    r.pop("trace", None) if r.get("outcome") == "ok" else None
    sys.stdout.write(json.dumps(r) + "\n")
    sys.stdout.flush()
"""


class Worker:
    def __init__(self, timeout):
        self.timeout = timeout
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, os.path.abspath(FUZZ_DIR)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1)
        # Drain stderr so that a chatty worker never blocks.
        self.err_tail = collections.deque(maxlen=30)
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()

    def _drain(self, proc):
        for line in proc.stderr:
            self.err_tail.append(line)

    def run(self, seed, index, mode):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(f"{seed} {index} {mode}\n")
        self.proc.stdin.flush()
        out = []
        t = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(self.timeout)
        if t.is_alive() or not out or not out[0]:
            hung = t.is_alive()
            if hung:
                self.proc.kill()
            rc = self.proc.wait()
            tail = "".join(self.err_tail)[-1500:]
            self.proc = None
            return {"seed": seed, "index": index, "mode": mode, "outcome": "crash",
                    "error": ("timeout after %ss" % self.timeout) if hung else f"exit status {rc}",
                    "stderr": tail}
        return json.loads(out[0])

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def repro_command(r):
    return (f"IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 tools/fuzz_graphs.py "
            f"--repro {r['seed']}:{r['index']} --mode {r['mode']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="graphs per mode")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first graph index")
    ap.add_argument("--mode", default="default", choices=("default", "off", "checked", "all"))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per graph")
    ap.add_argument("--json", default=None, help="write the summary here")
    ap.add_argument("--deadline", type=float, default=None,
                    help="stop starting graphs after this many seconds (counts stay honest)")
    ap.add_argument("--repro", default=None, help="SEED:INDEX: run one graph here and print it")
    args = ap.parse_args(argv)

    if args.repro:
        sys.path.insert(0, os.path.abspath(FUZZ_DIR))
        import graph_fuzz
        seed, index = (int(v) for v in args.repro.split(":"))
        modes = ("default", "off", "checked") if args.mode == "all" else (args.mode,)
        if args.json:  # --repro with --json: write a script that reruns it
            with open(args.json, "w") as f:
                f.write(graph_fuzz.repro_source(seed, index, modes[0]))
        spec = graph_fuzz.prepare(seed, index)[0]
        print(graph_fuzz.describe(spec))
        for m in modes:
            r = graph_fuzz.run_graph(seed, index, m)
            print(json.dumps(r, indent=1))
        return 0

    modes = ("default", "off", "checked") if args.mode == "all" else (args.mode,)
    # One job per graph: its modes run one after the other on one worker,
    # which draws the graph and its references once.
    jobs = queue.Queue()
    for i in range(args.start, args.start + args.n):
        jobs.put((args.seed, i))
    results = {m: collections.Counter() for m in modes}
    errors = {m: collections.Counter() for m in modes}
    failures = []
    lock = threading.Lock()
    t0 = time.time()
    done = [0]
    stop = [False]

    def loop():
        w = Worker(args.timeout)
        while not stop[0]:
            try:
                seed, index = jobs.get_nowait()
            except queue.Empty:
                break
            if args.deadline is not None and time.time() - t0 > args.deadline:
                break
            for mode in modes:
                record(w.run(seed, index, mode))
        w.close()

    def record(r):
        seed, index, mode = r["seed"], r["index"], r["mode"]
        with lock:
            results[mode][r["outcome"]] += 1
            if r["outcome"] == "error":
                errors[mode][r.get("error_type", "?")] += 1
            if r["outcome"] != "ok":
                r["repro"] = repro_command(r)
                failures.append(r)
                print(f"[{r['outcome']}] seed {seed} index {index} mode {mode}: "
                      f"{r.get('error') or r.get('where')} (worst {r.get('worst')})\n"
                      f"    repro: {r['repro']}", flush=True)
            done[0] += 1
            if done[0] % 1000 == 0:
                el = time.time() - t0
                print(f"... {done[0]} graphs, {done[0] / el:.1f} graphs/s, "
                      f"{len(failures)} failures", flush=True)

    threads = [threading.Thread(target=loop) for _ in range(max(1, args.workers))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        stop[0] = True
        for t in threads:
            t.join()
    elapsed = time.time() - t0
    total = sum(sum(c.values()) for c in results.values())
    summary = {"command": " ".join([os.path.basename(sys.argv[0])] + (argv or sys.argv[1:])),
               "seed": args.seed, "start": args.start, "workers": args.workers,
               "elapsed_s": round(elapsed, 1), "graphs": total,
               "graphs_per_s": round(total / elapsed, 2) if elapsed else 0.0,
               "modes": {m: {"graphs": sum(results[m].values()),
                             "ok": results[m]["ok"],
                             "crashes": results[m]["crash"],
                             "mismatches": results[m]["mismatch"],
                             "fusion_mismatches": results[m]["fusion_mismatch"],
                             "errors": dict(errors[m]),
                             "harness_errors": results[m]["harness_error"]} for m in modes},
               "failures": failures[:200]}
    print(f"\n{total} graphs in {elapsed:.0f} s ({summary['graphs_per_s']} graphs/s, "
          f"{args.workers} workers)")
    for m in modes:
        s = summary["modes"][m]
        print(f"  {m:8s} graphs {s['graphs']:7d}  ok {s['ok']:7d}  crashes {s['crashes']}  "
              f"mismatches {s['mismatches']}  fusion mismatches {s['fusion_mismatches']}  "
              f"errors {s['errors'] or 0}  harness errors {s['harness_errors']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    bad = sum(s["crashes"] + s["mismatches"] + s["fusion_mismatches"] + sum(s["errors"].values()) +
              s["harness_errors"] for s in summary["modes"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
