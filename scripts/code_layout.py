"""Measure which of the core's functions a training program runs and write
them to ``cpp/code_layout.txt``, the section ordering that the build hands
to ld.gold (see CMakeLists.txt).

Why: Linux maps a shared object's code in 64 KiB windows around each page
fault ("fault-around"), so a program that runs 250 functions spread over the
core's 2.9 MB of machine code ends up with ~2 MB of it resident. Linked next
to each other they take a few hundred KiB.

How: a measurement core is built with every function aligned to its own
4 KiB pages (``-falign-functions=4096``, symbols kept). The workload (import
ipuxl and ipuxl.addons, build the MNIST addons training step of
``bench/mnist_step.py`` at batch 8 and 128, run steps) runs in a child
process while the file is out of the page cache and the block device reads
no pages ahead, so a page of the core is resident exactly when the program
executed (or read) it. ``/proc/self/pagemap`` then names those pages, and
the symbol table names the functions on them.

Needs Linux and root (it sets ``/sys/block/DEV/queue/read_ahead_kb`` to 0
for the run and restores it afterwards), CMake, Ninja and the compiler.

    python3 scripts/code_layout.py    # builds build/layout, rewrites cpp/code_layout.txt

Re-run it after large changes to the C++ core: a stale list costs resident
memory, never correctness.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIST = os.path.join(ROOT, "cpp", "code_layout.txt")
PAGE = 4096

# Suffixes GCC and LTO add to clones and private copies of a function: the
# list names the function, a glob matches every copy.
_CLONE = re.compile(r"\.(lto_priv|constprop|isra|part|cold|localalias)(\.\d+)*.*$")

WORKLOAD = r"""
import json, struct, sys
sys.path.insert(0, {bench!r})
import mnist_step as ms

def resident():
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()
            if len(p) >= 6 and p[5] == {so!r}:
                lo, hi = (int(x, 16) for x in p[0].split("-"))
                maps.append((lo, hi, int(p[2], 16)))
    out = []
    with open("/proc/self/pagemap", "rb") as pm:
        for lo, hi, off in maps:
            n = (hi - lo) // 4096
            pm.seek(lo // 4096 * 8)
            data = pm.read(n * 8)
            out += [off + i * 4096 for i in range(n)
                    if struct.unpack_from("<Q", data, i * 8)[0] >> 63]
    return out

import ipuxl, ipuxl.addons
for batch, steps in ((8, 20), (128, 5)):
    peer = ms.IpuxlPeer(ms.make_weights(0), batch, {{"seed": 0, "share_host_weights": True}})
    feeds = [peer.prepare(x, y) for x, y in ms.make_batches(batch, 2, 1)]
    for i in range(steps):
        peer.step(feeds[i % 2])
json.dump(resident(), open({out!r}, "w"))
"""


def build(build_dir):
    """A Release core with every function on its own pages and symbols kept."""
    import pybind11
    if not os.path.exists(os.path.join(build_dir, "build.ninja")):
        subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_STRIP={shutil.which('true')}",
                        "-DIPUXL_CODE_LAYOUT=OFF", f"-DIPUXL_ALIGN_FUNCTIONS={PAGE}",
                        f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
                        f"-DPython_EXECUTABLE={sys.executable}"], check=True)
    subprocess.run(["cmake", "--build", build_dir, "-j", os.environ.get("JOBS", "2")], check=True)
    (so,) = [f for f in os.listdir(build_dir) if f.startswith("_core") and f.endswith(".so")]
    return os.path.join(build_dir, so)


def block_device_of(path):
    """/sys/block/NAME/queue/read_ahead_kb of the disk holding path."""
    dev = os.stat(path).st_dev
    sys_dev = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    real = os.path.realpath(sys_dev)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    ra = os.path.join(real, "queue", "read_ahead_kb")
    if not os.path.exists(ra):
        sys.exit(f"code_layout: no read-ahead setting for {path} ({ra})")
    return ra


def touched_pages(so, tmp):
    """File offsets of the core's pages the workload made resident."""
    copy = os.path.join(tmp, os.path.basename(so))
    shutil.copy(so, copy)
    fd = os.open(copy, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # out of the page cache
    finally:
        os.close(fd)
    out = os.path.join(tmp, "pages.json")
    script = WORKLOAD.format(bench=os.path.join(ROOT, "bench"), so=copy, out=out)
    ra = block_device_of(copy)
    old = open(ra).read().strip()
    env = dict(os.environ, IPUXL_CORE_DIR=tmp,
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        with open(ra, "w") as f:
            f.write("0")
        subprocess.run([sys.executable, "-c", script], env=env, check=True)
    finally:
        with open(ra, "w") as f:
            f.write(old)
    return set(json.load(open(out)))


def symbols(so):
    """[(address, size, kind, name)] of the functions."""
    nm = subprocess.run(["nm", "-S", "--defined-only", so], capture_output=True, text=True,
                        check=True).stdout
    out = []
    for line in nm.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwW":
            out.append((int(p[0], 16), int(p[1], 16), p[2].lower(), p[3]))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "layout"))
    args = ap.parse_args()
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        sys.exit("code_layout: needs Linux and root (it turns off block-device read-ahead "
                 "for the measured run)")
    so = build(args.build_dir)
    tmp = os.path.join(args.build_dir, "measure")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    pages = touched_pages(so, tmp)
    hot, size = [], 0
    for addr, sz, kind, name in symbols(so):
        if any(p in pages for p in range(addr // PAGE * PAGE, addr + max(sz, 1), PAGE)):
            hot.append((kind, _CLONE.sub("", name), ".cold" in name))
            size += sz
    lines, seen = [], set()
    for kind, name, cold in hot:
        if kind not in "tw":
            continue  # gold orders code sections only
        # The function's own section, or .text.startup where GCC put code
        # that runs once (static initialisers and what only they call); a
        # cold part only when it ran as well.
        pats = ([f".text.unlikely.{name}*"] if cold else
                [f".text.{name}*", f".text.startup.{name}*"])
        for pat in pats:
            if pat not in seen:
                seen.add(pat)
                lines.append(pat)
    with open(LIST, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"code_layout: {len(pages)} pages touched; {len(hot)} functions ({size // 1024} KiB) "
          f"-> {os.path.relpath(LIST, ROOT)} ({len(lines)} patterns)")


if __name__ == "__main__":
    main()
