"""Train an MNIST classifier with SGD and momentum, saving a checkpoint after
every epoch and resuming from the last one when restarted.

The checkpoint (``Session.save_checkpoint``) holds the weights, the
momentum buffers (optimizer state) and the epoch counter, written
atomically: killing this script at any moment, even in the middle of a
save, leaves the previous checkpoint intact, and a restart continues to the
same final weights as an uninterrupted run (the data order depends only on
the epoch). ``ipu_model_tests/session/test_checkpoint_kill.py`` kills it at
random points to check exactly that.

    python examples/train_with_checkpoints.py --dir /tmp/run --epochs 4
"""
import argparse
import os

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.datasets import load_mnist, synthetic_mnist

HIDDEN = 64


def build(batch: int, lr: float, momentum: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((batch, 784), popxl.float32, name="images")
        ys = popxl.h2d_stream((batch,), popxl.int32, name="labels")
        shapes = {"w0": (784, HIDDEN), "b0": (HIDDEN,), "w1": (HIDDEN, 10), "b1": (10,)}
        params = {k: popxl.variable((rng.standard_normal(s) * (0.05 if k[0] == "w" else 0.0))
                                    .astype(np.float32), name=k) for k, s in shapes.items()}
        velocity = {k: popxl.variable(np.zeros(s, np.float32), name=f"velocity_{k}")
                    for k, s in shapes.items()}
        epoch = popxl.variable(np.int32(0), name="epoch")
        specs = [p.spec for p in params.values()]

        def forward(x, w0, b0, w1, b1):
            return ops.gelu(x @ w0 + b0) @ w1 + b1

        g = ir.create_graph(forward, popxl.TensorSpec((batch, 784), popxl.float32), *specs)
        info = ops.call_with_info(g, ops.host_load(xs), *params.values())
        probs = ops.softmax(info.outputs[0], 1)
        loss, dlogits = ops.nll_loss_with_softmax_grad(probs, ops.host_load(ys))
        gi = popxl.transforms.autodiff(g, grads_required=g.inputs[1:])
        grads = ops.call(gi.graph, dlogits, inputs_dict=gi.inputs_dict(info))
        for (k, p), d in zip(params.items(), grads):
            v = velocity[k]
            ops.scaled_add_(v, d, a=momentum, b=1.0)  # v = momentum v + grad
            ops.scaled_add_(p, v, b=-lr)              # p -= lr v
        ls = popxl.d2h_stream(loss.shape, loss.dtype, name="loss")
        ops.host_store(ls, loss)
    return ir, xs, ys, ls, params, velocity, epoch


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="where checkpoint.npz and final.npz go")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--samples", type=int, default=2048, help="training images used")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--synthetic", action="store_true", help="synthetic data (no MNIST needed)")
    ap.add_argument("--data", help="an .npz with 'images' and 'labels' to train on instead")
    args = ap.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    ckpt = os.path.join(args.dir, "checkpoint.npz")
    if args.data:
        with np.load(args.data) as z:
            images, labels = z["images"], z["labels"]
    elif args.synthetic:
        images, labels = synthetic_mnist(args.samples, seed=0)
    else:
        images, labels = load_mnist("train")
    images = images[:args.samples].reshape(-1, 784).astype(np.float32)
    labels = labels[:args.samples].astype(np.int32)
    ir, xs, ys, ls, params, velocity, epoch = build(args.batch, args.lr, 0.9)
    steps = args.samples // args.batch
    with popxl.Session(ir, "ipu_model") as sess:
        if os.path.exists(ckpt):
            sess.load_checkpoint(ckpt)
        start = int(sess.get_tensor_data(epoch))
        for e in range(start, args.epochs):
            order = np.random.default_rng(1000 + e).permutation(len(labels))
            for s in range(steps):
                idx = order[s * args.batch:(s + 1) * args.batch]
                loss = sess.run({xs: images[idx], ys: labels[idx]})[ls]
            sess.write_variable_data(epoch, np.int32(e + 1))
            sess.save_checkpoint(ckpt)
            print(f"epoch {e + 1}/{args.epochs} loss {float(loss):.4f}", flush=True)
        final = sess.get_tensors_data(list(params.values()) + list(velocity.values()))
    np.savez(os.path.join(args.dir, "final.npz"), **{t.id: a for t, a in final.items()})


if __name__ == "__main__":
    main()
