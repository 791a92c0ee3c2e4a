"""Train and test a two-layer network on MNIST with plain PopXL (no addons).

The MNIST program of the PopXL user guide, written for ipuxl and for data
that is already on the machine (``ipuxl.datasets``; no download). Everything
the addons package automates is done by hand here:

* each layer is a ``popxl.Module`` whose weights are graph inputs
  (``popxl.graph_input``); ``ir.create_graph`` builds one graph per layer
  and ``ops.call_with_info`` calls it with the main-graph variables passed
  through ``inputs_dict``;
* ``popxl.transforms.autodiff`` makes each layer's gradient graph: the last
  layer's gives the gradients of its input and weights, the first layer's
  is asked only for its weights (``grads_required``);
* the gradient graphs are called with the activations picked from the
  forward call sites (``GradGraphInfo.inputs_dict``), and
  ``fwd_parent_ins_to_grad_parent_outs`` maps each forward tensor to its
  gradient in the main graph;
* the loss is ``softmax`` followed by ``nll_loss_with_softmax_grad``, and
  SGD updates the weights in place with ``ops.scaled_add_``.

Network: 784 -> 32 -> 10, GELU after both layers (as in the user guide).

Run (one epoch, batch 8, lr 0.005, as in the user guide)::

    python examples/mnist_popxl.py
    python examples/mnist_popxl.py --dataset fashion
    python examples/mnist_popxl.py --dataset synthetic --limit-steps 300
"""
import argparse
import sys
import time
from typing import Dict, List, Tuple

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
import ipuxl.transforms as transforms
from ipuxl.datasets import BatchIterator, DatasetNotFoundError, load_mnist, synthetic_mnist
from ipuxl.ops.call import CallSiteInfo

try:
    from tqdm import tqdm
except ImportError:  # progress is then printed as plain lines
    tqdm = None

HIDDEN = 32
CLASSES = 10


class Linear(popxl.Module):
    """``gelu(x @ W + b)``, with ``W`` and ``b`` as inputs of the graph.

    After ``ir.create_graph(layer, x, out_features=...)`` the attributes
    ``W`` and ``b`` hold the graph's input tensors, which is how the call
    site names them in ``inputs_dict`` and how ``autodiff`` is told which
    gradients to produce."""

    def __init__(self) -> None:
        self.W = None
        self.b = None

    def build(self, x: popxl.Tensor, out_features: int, bias: bool = True) -> popxl.Tensor:
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        y = x @ self.W
        if bias:
            self.b = popxl.graph_input((out_features,), popxl.float32, "b")
            y = y + self.b
        return ops.gelu(y)


def _weights(shape) -> np.ndarray:
    return np.random.normal(0, 0.02, shape).astype(np.float32)


def build_forward(ir: popxl.Ir, x: popxl.Tensor):
    """Variables and two layer calls. Returns ``(hidden, logits)``, the
    variables by name, the two Linear modules and their call sites."""
    x = x.reshape((-1, 28 * 28))
    params = {
        "W0": popxl.variable(_weights((x.shape[-1], HIDDEN)), name="W0"),
        "b0": popxl.variable(_weights((HIDDEN,)), name="b0"),
        "W1": popxl.variable(_weights((HIDDEN, CLASSES)), name="W1"),
        "b1": popxl.variable(_weights((CLASSES,)), name="b1"),
    }
    layers: List[Linear] = []
    calls: List[CallSiteInfo] = []
    h = x
    for i, width in enumerate((HIDDEN, CLASSES)):
        layer = Linear()
        graph = ir.create_graph(layer, h, out_features=width)
        info = ops.call_with_info(graph, h, inputs_dict={layer.W: params[f"W{i}"],
                                                          layer.b: params[f"b{i}"]})
        layers.append(layer)
        calls.append(info)
        h = info.outputs[0]
    hidden, logits = calls[0].outputs[0], calls[1].outputs[0]
    return (hidden, logits), params, layers, calls


def build_backward(dlogits: popxl.Tensor, hidden: popxl.Tensor, params: Dict[str, popxl.Tensor],
                   layers: List[Linear], calls: List[CallSiteInfo]) -> Dict[str, popxl.Tensor]:
    """Gradients of the loss with respect to every variable, by name."""
    # Layer 1: gradients of all its inputs (hidden activations, W1, b1).
    grad_info_1 = transforms.autodiff(calls[1].called_graph)
    grad_call_1 = ops.call_with_info(grad_info_1.graph, dlogits,
                                     inputs_dict=grad_info_1.inputs_dict(calls[1]))
    grads_1 = grad_info_1.fwd_parent_ins_to_grad_parent_outs(calls[1], grad_call_1)

    # Layer 0: only the weights need gradients (not the input images), so the
    # gradient graph has exactly two outputs, in the order asked for.
    grad_info_0 = transforms.autodiff(calls[0].called_graph,
                                      grads_required=[layers[0].W, layers[0].b])
    dW0, db0 = ops.call(grad_info_0.graph, grads_1[hidden],
                        inputs_dict=grad_info_0.inputs_dict(calls[0]))
    return {"W0": dW0, "b0": db0, "W1": grads_1[params["W1"]], "b1": grads_1[params["b1"]]}


def build_train_ir(batch_size: int, lr: float):
    ir = popxl.Ir()
    ir.num_host_transfers = 1
    ir.replication_factor = 1
    # in_sequence: ops run in the order they are created (loss stored after
    # it is computed, weights updated after every gradient that reads them).
    with ir.main_graph, popxl.in_sequence():
        img_stream = popxl.h2d_stream((batch_size, 28, 28), popxl.float32, name="images")
        label_stream = popxl.h2d_stream((batch_size,), popxl.int32, name="labels")
        x = ops.host_load(img_stream, "x")
        labels = ops.host_load(label_stream, "labels")

        (hidden, logits), params, layers, calls = build_forward(ir, x)
        probs = ops.softmax(logits, axis=-1)
        loss, dlogits = ops.nll_loss_with_softmax_grad(probs, labels)
        grads = build_backward(dlogits, hidden, params, layers, calls)

        for name, var in params.items():
            ops.scaled_add_(var, grads[name], b=-lr)

        loss_stream = popxl.d2h_stream(loss.shape, loss.dtype, name="loss")
        ops.host_store(loss_stream, loss)
    return ir, (img_stream, label_stream), loss_stream, params


def build_test_ir(batch_size: int):
    ir = popxl.Ir()
    ir.num_host_transfers = 1
    ir.replication_factor = 1
    with ir.main_graph, popxl.in_sequence():
        img_stream = popxl.h2d_stream((batch_size, 28, 28), popxl.float32, name="images")
        x = ops.host_load(img_stream, "x")
        (_, logits), params, _, _ = build_forward(ir, x)
        out_stream = popxl.d2h_stream(logits.shape, logits.dtype, name="logits")
        ops.host_store(out_stream, logits)
    return ir, img_stream, out_stream, params


def get_data(args) -> Tuple[BatchIterator, BatchIterator]:
    if args.dataset == "synthetic":
        n_train = 60000 if args.limit_steps is None else args.batch_size * args.limit_steps
        n_test = 10000 if args.limit_test_steps is None else \
            args.test_batch_size * args.limit_test_steps
        train = synthetic_mnist(n_train, seed=args.seed)
        test = synthetic_mnist(n_test, seed=args.seed + 1)
    else:
        train = load_mnist("train", args.dataset, data_dir=args.data_dir)
        test = load_mnist("test", args.dataset, data_dir=args.data_dir)
    return (BatchIterator(*train, args.batch_size, shuffle=True, seed=args.seed, drop_last=True,
                          limit=args.limit_steps, image_shape=(28, 28)),
            BatchIterator(*test, args.test_batch_size, shuffle=False, drop_last=True,
                          limit=args.limit_test_steps, image_shape=(28, 28)))


def progress(iterable, total: int, desc: str, bars: bool):
    """tqdm bar when installed and wanted, else a line every ~10%."""
    if bars and tqdm is not None:
        yield from tqdm(iterable, total=total, desc=desc)
        return
    every = max(1, total // 10)
    for i, item in enumerate(iterable, 1):
        yield item
        if i % every == 0 or i == total:
            print(f"{desc}: {i}/{total}", flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="MNIST training in plain PopXL (ipuxl)",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--batch-size", type=int, default=8, help="training batch size")
    p.add_argument("--test-batch-size", type=int, default=80, help="test batch size")
    p.add_argument("--epochs", type=int, default=1, help="training epochs")
    p.add_argument("--lr", type=float, default=0.005, help="SGD learning rate")
    p.add_argument("--dataset", choices=("mnist", "fashion", "synthetic"), default="mnist",
                   help="synthetic: generated class patterns, needs no installed data")
    p.add_argument("--data-dir", default=None,
                   help="read the dataset only from this directory of IDX files (or this "
                        "mnist.pkl.gz) instead of the default places")
    p.add_argument("--limit-steps", type=int, default=None,
                   help="at most this many training steps per epoch (quick runs)")
    p.add_argument("--limit-test-steps", type=int, default=None,
                   help="at most this many test batches")
    p.add_argument("--seed", type=int, default=0, help="weight init and shuffling seed")
    p.add_argument("--device", default="ipu_model", help="Session device type")
    p.add_argument("--no-progress", action="store_true", help="no tqdm bars")
    args = p.parse_args(argv)
    for name in ("batch_size", "test_batch_size", "epochs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("limit_steps", "limit_test_steps"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    bars = not args.no_progress
    try:
        train_data, test_data = get_data(args)
    except DatasetNotFoundError as e:
        print(f"error: {e}\n(or run with --dataset synthetic)", file=sys.stderr)
        return 2
    print(f"dataset {args.dataset}: {len(train_data)} training steps per epoch of "
          f"{args.batch_size}, {len(test_data)} test batches of {args.test_batch_size}")

    np.random.seed(args.seed)
    train_ir, (img_stream, label_stream), loss_stream, train_params = build_train_ir(
        args.batch_size, args.lr)
    steps, losses, train_time = 0, [], 0.0
    with popxl.Session(train_ir, args.device) as session:
        for epoch in range(1, args.epochs + 1):
            start = time.perf_counter()
            for images, labels in progress(train_data, len(train_data),
                                           f"epoch {epoch}/{args.epochs}", bars):
                out = session.run({img_stream: images, label_stream: labels})
                losses.append(float(out[loss_stream]))
                steps += 1
            train_time += time.perf_counter() - start
        trained = session.get_tensors_data(list(train_params.values()))
    tail = losses[-100:]
    print(f"Final training loss: {losses[-1]:.4f} (mean of the last {len(tail)} steps "
          f"{np.mean(tail):.4f})")
    print(f"Training: {steps} steps in {train_time:.1f} s, "
          f"{steps / max(train_time, 1e-9):.1f} steps/s")

    test_ir, test_stream, out_stream, test_params = build_test_ir(args.test_batch_size)
    test_session = popxl.Session(test_ir, args.device)
    # Both IRs name their variables W0, b0, W1, b1: match them by name.
    test_session.write_variables_data(
        {test_params[name]: trained[train_params[name]].copy() for name in test_params})

    correct = seen = 0
    start = time.perf_counter()
    with test_session:
        for images, labels in progress(test_data, len(test_data), "test", bars):
            logits = test_session.run({test_stream: images})[out_stream]
            correct += int(np.sum(np.argmax(logits, axis=-1) == labels))
            seen += len(labels)
    test_time = time.perf_counter() - start
    print(f"Test: {len(test_data)} batches in {test_time:.1f} s, "
          f"{len(test_data) / max(test_time, 1e-9):.1f} steps/s")
    print(f"Accuracy on test set: {100.0 * correct / max(seen, 1):.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
