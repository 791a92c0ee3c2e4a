"""Where the MNIST training step's resident memory goes, stage by stage.

Builds the batch-8 program of ``mnist_step.py`` (ipuxl peer) in this
process and prints, after each stage, how much each mapping's resident set
grew (``/proc/self/smaps``, Linux only): anonymous memory, the heap, and
the pages of the core's shared object.

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/rss_breakdown.py [--host-copy]

``--host-copy`` keeps PopXL's separate host copy of the weights
(``share_host_weights=False``).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mnist_step as ms  # noqa: E402


def snapshot():
    """{mapping address range: (name, resident KiB)}."""
    out, cur = {}, None
    with open("/proc/self/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                cur = parts[0]
                out[cur] = [parts[-1] if len(parts) > 5 else "[anon]", 0]
            elif line.startswith("Rss:"):
                out[cur][1] = int(line.split()[1])
    return out


def report(before, after, stage, top=4):
    total = sum(v[1] for v in after.values()) - sum(v[1] for v in before.values())
    by_name = {}
    for key, (name, kib) in after.items():
        by_name[name] = by_name.get(name, 0) + kib - before.get(key, (name, 0))[1]
    for key, (name, kib) in before.items():
        if key not in after:
            by_name[name] = by_name.get(name, 0) - kib
    print(f"{stage:<34}{total / 1024:+7.2f} MiB")
    for name, kib in sorted(by_name.items(), key=lambda kv: -abs(kv[1]))[:top]:
        if abs(kib) >= 32:
            print(f"    {kib / 1024:+7.2f}  {os.path.basename(name) if '/' in name else name}")


def main():
    share = "--host-copy" not in sys.argv
    weights, pool = ms.make_weights(0), ms.make_batches(8, 16, 1)
    s0 = snapshot()
    import ipuxl
    import ipuxl.addons  # noqa: F401
    s1 = snapshot()
    report(s0, s1, "import ipuxl, ipuxl.addons")
    marks = {}
    init = ipuxl.Session.__init__

    def timed_init(self, *a, **k):
        marks["ir"] = snapshot()
        init(self, *a, **k)
        marks["session"] = snapshot()

    ipuxl.Session.__init__ = timed_init
    model = ms.IpuxlPeer(weights, 8, {"seed": 0, "share_host_weights": share})
    report(s1, marks["ir"], "IR build (modules, autodiff)")
    report(marks["ir"], marks["session"], "Session (lowering, engine)")
    s3 = snapshot()
    report(marks["session"], s3, "attach (weights_from_host)")
    feeds = [model.prepare(x, y) for x, y in pool]
    for i in range(50):
        model.step(feeds[i % len(feeds)])
    report(s3, snapshot(), "50 steps")
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    print(f"peak RSS {hwm / 1024:.1f} MiB (share_host_weights={share})")


if __name__ == "__main__":
    main()
