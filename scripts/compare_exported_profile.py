#!/usr/bin/env python3
"""Exports a PopXL script's main Session as a Poplar C++ program, builds and
runs it on ipuxl's Poplar with autoReport, and prints its IPU model beside
``Session.profile()`` category by category (:mod:`ipuxl.export.profile_compare`).

  scripts/compare_exported_profile.py script.py [script args...] [--out DIR]
  scripts/compare_exported_profile.py --mnist | --transformer [--out DIR]

``--mnist``: examples/mnist_popxl.py's training step (batch 8);
``--transformer``: bench/transformer_step.py's block ("small").
"""
import argparse
import importlib.util
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def _load(rel, *deps):
    for d in deps:  # sibling modules the file imports by name
        sys.path.insert(0, os.path.dirname(os.path.join(ROOT, d)))
    spec = importlib.util.spec_from_file_location(os.path.basename(rel)[:-3], os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def program_ir(ns):
    from ipuxl.export.profile_compare import ir_of_script

    if ns.mnist:
        return _load("examples/mnist_popxl.py").build_train_ir(8, 0.1)[0]
    if ns.transformer:
        tf = _load("bench/transformer_step.py", "bench/_peer.py")
        peer = tf.IpuxlPeer(tf.make_weights("small", 0), "small", {})
        peer.session.__exit__(None, None, None)
        return peer.session._ir
    if not ns.script:
        raise SystemExit("give a script, --mnist or --transformer")
    return ir_of_script(ns.script, ns.args)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="directory for the program (default: a temporary one)")
    ap.add_argument("--mnist", action="store_true")
    ap.add_argument("--transformer", action="store_true")
    ap.add_argument("script", nargs="?")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    from ipuxl.export.profile_compare import compare_rows, exported_profiles, format_rows

    ir = program_ir(ns)
    out = ns.out or tempfile.mkdtemp(prefix="ipuxl-profile-")
    want, got, summary = exported_profiles(ir, os.path.join(out, "exported"))
    print(format_rows(compare_rows(want, got, summary)))
    print(f"(program and report in {out}/exported)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
