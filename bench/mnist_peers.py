"""The MNIST training step of bench/mnist_step.py in each peer (NumPy,
PyTorch, JAX, ipuxl): the model (784-512-512-512-10, SGD), its weights and
batches, and one class per peer with the same step."""
import os
import time

import numpy as np

LAYERS = (784, 512, 512, 512, 10)
LR = 0.05
INIT_STD = 0.02
PEERS = ("ipuxl", "numpy", "torch", "jax")
INSTALL = {
    "ipuxl": "build the core (scripts/dev_build.sh build/dev) and run with "
             "IPUXL_CORE_DIR=build/dev PYTHONPATH=python, or pip install the project",
    "numpy": "pip install numpy",
    "torch": "pip install torch==2.13.0",
    "jax": "pip install jax jaxlib",
}
# Relative/absolute tolerances against the float64 reference. float32 with
# different summation orders and a few dozen SGD steps stays far inside these;
# a wrong gradient or update moves the weights by ~lr * |grad| ~ 1e-3.
LOSS_RTOL = 1e-4
W_ATOL = 2e-5


# --------------------------------------------------------------------------- data

def make_weights(seed: int, dtype=np.float32):
    """[(W, b)] for every layer: W ~ N(0, 0.02), b = 0."""
    rng = np.random.default_rng(seed)
    out = []
    for fan_in, fan_out in zip(LAYERS[:-1], LAYERS[1:]):
        w = rng.normal(0.0, INIT_STD, (fan_in, fan_out)).astype(np.float32).astype(dtype)
        out.append((w, np.zeros(fan_out, dtype)))
    return out


def make_batches(batch: int, count: int, seed: int):
    """``count`` batches ``(images (B, 28, 28) float32, labels (B,) int32)``."""
    rng = np.random.default_rng([seed, batch])
    images = rng.standard_normal((count, batch, 28, 28)).astype(np.float32)
    labels = rng.integers(0, LAYERS[-1], (count, batch)).astype(np.int32)
    return [(images[i], labels[i]) for i in range(count)]


# --------------------------------------------------------------------------- peers
# Each peer: __init__(weights, batch, opts); prepare(images, labels) -> its
# native batch (done once, outside the timed loops); step(prepared) -> the
# loss as a Python float; weights() -> [(W, b)] as NumPy arrays.

class NumpyPeer:
    """The step written by hand: forward keeping the activations, softmax
    cross-entropy and its gradient, backward through GELU, SGD in place."""

    name = "numpy"

    def __init__(self, weights, batch, opts, dtype=np.float32):
        self.dt = np.dtype(dtype)
        self.params = [(w.astype(dtype, copy=True), b.astype(dtype, copy=True))
                       for w, b in weights]
        self.c = self.dt.type(np.sqrt(2.0 / np.pi))
        self.k = self.dt.type(0.044715)
        self.lr = self.dt.type(LR)
        self.one, self.half = self.dt.type(1), self.dt.type(0.5)

    @staticmethod
    def version():
        return np.__version__

    def prepare(self, images, labels):
        return images.reshape(images.shape[0], -1).astype(self.dt, copy=False), labels

    def step(self, batch):
        x, y = batch
        n = x.shape[0]
        rows = np.arange(n)
        ins, pre, tanhs = [], [], []
        h = x
        last = len(self.params) - 1
        for i, (w, b) in enumerate(self.params):
            ins.append(h)
            z = h @ w
            z += b
            if i < last:
                t = np.tanh(self.c * (z + self.k * z * z * z))
                pre.append(z)
                tanhs.append(t)
                h = self.half * z * (self.one + t)
            else:
                h = z
        # Softmax cross-entropy, mean over the batch.
        m = h - h.max(axis=1, keepdims=True)
        e = np.exp(m)
        s = e.sum(axis=1, keepdims=True)
        loss = -np.mean(m[rows, y] - np.log(s[:, 0]))
        g = e / s
        g[rows, y] -= self.one
        g /= self.dt.type(n)
        for i in range(last, -1, -1):
            w, b = self.params[i]
            dw = ins[i].T @ g
            db = g.sum(axis=0)
            if i > 0:
                # d gelu/dz = 0.5 (1 + t) + 0.5 z (1 - t^2) c (1 + 3 k z^2)
                z, t = pre[i - 1], tanhs[i - 1]
                g = g @ w.T
                g *= self.half * (self.one + t) + self.half * z * (self.one - t * t) * self.c * (
                    self.one + self.dt.type(3) * self.k * z * z)
            w -= self.lr * dw  # after w was used for the input gradient
            b -= self.lr * db
        return float(loss)

    def weights(self):
        return [(w.copy(), b.copy()) for w, b in self.params]


class TorchPeer:
    """PyTorch eager: autograd and torch.optim.SGD."""

    name = "torch"

    def __init__(self, weights, batch, opts):
        import torch
        import torch.nn.functional as F
        if opts.get("threads", 0) > 0:
            torch.set_num_threads(opts["threads"])
        self.torch, self.F = torch, F
        self.params = []
        for w, b in weights:
            self.params.append((torch.tensor(w, requires_grad=True),
                                torch.tensor(b, requires_grad=True)))
        self.opt = torch.optim.SGD([p for wb in self.params for p in wb], lr=LR)

    @staticmethod
    def version():
        import torch
        n = int(os.environ.get("OMP_NUM_THREADS", "0")) or torch.get_num_threads()
        return f"{torch.__version__} ({n} threads)"

    def prepare(self, images, labels):
        t = self.torch
        return (t.from_numpy(images.reshape(images.shape[0], -1)),
                t.from_numpy(labels.astype(np.int64)))

    def step(self, batch):
        x, y = batch
        h = x
        last = len(self.params) - 1
        for i, (w, b) in enumerate(self.params):
            h = h @ w + b
            if i < last:
                h = self.F.gelu(h, approximate="tanh")
        loss = self.F.cross_entropy(h, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.item()

    def weights(self):
        return [(w.detach().numpy().copy(), b.detach().numpy().copy()) for w, b in self.params]


class JaxPeer:
    """JAX: the whole step (value_and_grad + SGD) under one jax.jit; the
    parameters are donated so XLA may update them in place."""

    name = "jax"

    def __init__(self, weights, batch, opts):
        import jax
        import jax.numpy as jnp
        self.jax = jax

        def loss_fn(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = jax.nn.gelu(h, approximate=True)
            logp = jax.nn.log_softmax(h, axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        def train_step(params, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            params = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
            return params, loss

        self._step = jax.jit(train_step, donate_argnums=0)
        self.params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in weights]

    @staticmethod
    def version():
        import jax
        import jaxlib
        return f"{jax.__version__} (jaxlib {jaxlib.__version__}, {jax.default_backend()})"

    def prepare(self, images, labels):
        # NumPy arrays: every call transfers them to the device (the feed).
        return images.reshape(images.shape[0], -1), labels

    def step(self, batch):
        self.params, loss = self._step(self.params, *batch)
        return float(loss)

    def weights(self):
        return [(np.array(w), np.array(b)) for w, b in self.params]


class IpuxlPeer:
    """The popxl_addons program of PopXL's MNIST tutorial 1, one
    Session.run per step."""

    name = "ipuxl"

    def __init__(self, weights, batch, opts):
        import ipuxl as popxl
        import ipuxl.addons as addons
        import ipuxl.ops as ops

        t0 = time.perf_counter()

        class Linear(addons.Module):
            def __init__(self, w, b):
                super().__init__()
                self.w, self.b = w, b

            def build(self, x):
                w = self.add_variable_input("weight", lambda: self.w.copy(), x.dtype)
                y = x @ w
                b = self.add_variable_input("bias", lambda: self.b.copy(), x.dtype)
                return y + b

        class Net(addons.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.fc2, self.fc3, self.fc4 = (Linear(w, b) for w, b in weights)

            def build(self, x):
                x = x.reshape((-1, 28 * 28))
                x = ops.gelu(self.fc1(x))
                x = ops.gelu(self.fc2(x))
                x = ops.gelu(self.fc3(x))
                return self.fc4(x)

        ir = popxl.Ir(replication=1)
        with ir.main_graph:
            img_stream = popxl.h2d_stream((batch, 28, 28), popxl.float32, "image")
            label_stream = popxl.h2d_stream((batch,), popxl.int32, "labels")
            img = ops.host_load(img_stream, "image")
            labels = ops.host_load(label_stream, "labels")

            facts, fwd_graph = Net().create_graph(img)
            bwd_graph = addons.autodiff(fwd_graph)
            variables = facts.init()
            fwd_info = fwd_graph.bind(variables).call_with_info(img)
            loss, dlogits = addons.ops.cross_entropy_with_grad(fwd_info.outputs[0], labels)
            loss_stream = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
            ops.host_store(loss_stream, loss)
            activations = bwd_graph.grad_graph_info.inputs_dict(fwd_info)
            bwd_info = bwd_graph.call_with_info(dlogits, args=activations)
            grads = bwd_graph.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(
                fwd_info, bwd_info)
            for w in variables.tensors:
                ops.scaled_add_(w, grads[w], b=-LR)
        ir.num_host_transfers = 1
        self.ir_build_s = time.perf_counter() - t0

        # Compile time runs from here to the end of the first run.
        self.session_start = time.perf_counter()
        self.session = popxl.Session(ir, opts.get("device", "ipu_model"),
                                     share_host_weights=opts.get("share_host_weights", True))
        self.session.__enter__()
        self.img_stream, self.label_stream, self.loss_stream = img_stream, label_stream, loss_stream
        named = variables.to_dict()
        self.vars = [(named[f"fc{i}.weight"], named[f"fc{i}.bias"]) for i in range(1, 5)]

    @staticmethod
    def version():
        import ipuxl
        from ipuxl._core_loader import blas_backend, core
        blas = blas_backend.split(" (")[0]
        return f"{ipuxl.__version__} ({core.num_threads()} core threads, level {core.isa()}, GEMM {blas})"

    def prepare(self, images, labels):
        return {self.img_stream: images, self.label_stream: labels}

    def step(self, feeds):
        return float(self.session.run(feeds)[self.loss_stream])

    def weights(self):
        data = self.session.get_tensors_data([t for wb in self.vars for t in wb])
        return [(data[w], data[b]) for w, b in self.vars]


PEER_CLASSES = {"ipuxl": IpuxlPeer, "numpy": NumpyPeer, "torch": TorchPeer, "jax": JaxPeer}
