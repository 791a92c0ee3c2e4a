"""Program size of outlined vs inlined layers, on the IPU model.

The network of Graphcore's PopXL MNIST tutorial (784 -> 512 -> 512 -> 512
-> 10 with GELU, tutorials/popxl/1_basic_concepts) built three ways:

* ``inlined``: every hidden layer is built in the main graph (what calling a
  Python ``build`` function or a ``Module`` twice gives: "the nodes are
  repeated for each layer, even if they are identical");
* ``outlined``: the hidden layer is one graph (``ir.create_graph``) called
  once per layer with that layer's weights: one Function, whose code exists
  once, plus per-call-site control code and input/output copies;
* ``repeat``: the outlined layer run ``repeat`` times with shared weights;
  its code does not grow with the trip count.

It prints the profiles side by side, saves each one's ``profile.json``
(``inlined.json``, ``outlined.json``, ``repeat.json``) and writes the
viewer's comparison page ``profile_outlining.html`` (memory and code by
category and by Function, with their differences to the inlined program)::

    python examples/profile_outlining.py [--layers 4] [--batch 16] [--out DIR]
    ipuxl profile --compare DIR/inlined.json DIR/outlined.json --out DIR
"""
import argparse
import os
import sys

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import compare, profile_ir, write_html

HIDDEN = 512


def _layer(x, W, b):
    return ops.gelu(x @ W + b)


def build(mode: str, layers: int = 2, batch: int = 16, seed: int = 0) -> popxl.Ir:
    """The tutorial's network with ``layers`` hidden 512x512 layers, built
    ``mode`` = "inlined", "outlined" or "repeat"."""
    rng = np.random.default_rng(seed)

    def var(shape, name):
        return popxl.variable(rng.normal(0, 0.02, shape).astype(np.float32), name=name)

    ir = popxl.Ir()
    with ir.main_graph:
        img = popxl.h2d_stream((batch, 784), popxl.float32, name="img")
        x = ops.host_load(img)
        x = _layer(x, var((784, HIDDEN), "W0"), var((HIDDEN,), "b0"))
        if mode == "inlined":
            for i in range(layers):
                x = _layer(x, var((HIDDEN, HIDDEN), f"W{i + 1}"), var((HIDDEN,), f"b{i + 1}"))
        else:
            spec_x = popxl.TensorSpec((batch, HIDDEN), popxl.float32)
            spec_w = popxl.TensorSpec((HIDDEN, HIDDEN), popxl.float32)
            spec_b = popxl.TensorSpec((HIDDEN,), popxl.float32)
            graph = ir.create_graph(_layer, spec_x, spec_w, spec_b)
            if mode == "outlined":
                for i in range(layers):
                    (x,) = ops.call(graph, x, var((HIDDEN, HIDDEN), f"W{i + 1}"),
                                    var((HIDDEN,), f"b{i + 1}"))
            elif mode == "repeat":
                (x,) = ops.repeat(graph, layers, x, var((HIDDEN, HIDDEN), "W1"),
                                  var((HIDDEN,), "b1"))
            else:
                raise ValueError(f"mode must be inlined, outlined or repeat, got {mode!r}")
        logits = x @ var((HIDDEN, 10), "Wout") + var((10,), "bout")
        out = popxl.d2h_stream(logits.shape, logits.dtype, name="logits")
        ops.host_store(out, logits)
    return ir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--version", default="ipu2", choices=("ipu1", "ipu2", "ipu21"))
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    what = f"profile_outlining.py --layers {args.layers} --batch {args.batch}"
    profiles = {}
    for mode in ("inlined", "outlined", "repeat"):
        profiles[mode] = profile_ir(build(mode, args.layers, args.batch), args.version,
                                    name=f"{what}: {mode}")
    print(compare(profiles["inlined"], profiles["outlined"]))
    print()
    print(compare(profiles["outlined"], profiles["repeat"]))
    os.makedirs(args.out, exist_ok=True)
    for mode, p in profiles.items():
        p.save(os.path.join(args.out, f"{mode}.json"))
    path = os.path.join(args.out, "profile_outlining.html")
    try:
        write_html(list(profiles.values()), path, title="Outlined vs inlined layers")
        print(f"\nwrote {path} and {', '.join(m + '.json' for m in profiles)} in {args.out}")
    except ImportError as e:
        print(f"\nno HTML page: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
