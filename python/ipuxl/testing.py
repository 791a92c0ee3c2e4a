"""Test helpers, mirroring ``popxl.testing``, plus a gradient checker and
the host-pass checker.

``check_grads(fn, args, order=1)`` validates autodiff (and custom gradient
rules) against central finite differences, like ``jax.test_util.check_grads``.

:class:`HostPassChecker` runs a Session's program a second time without host
passes and compares (``IPUXL_CHECK_HOST_PASSES=1`` makes every Session use
one).
"""
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from . import dtypes

__all__ = ["get_all_dtypes", "get_all_int_dtypes", "check_grads", "HostPassChecker"]


def get_all_dtypes():
    """PopXL's list: the integer, floating-point (fp8 included) and complex
    dtypes, in that order; ``bool`` is not in it. Not every one of them runs
    on the ipuxl core (fp8 and complex do not)."""
    return get_all_int_dtypes() + [dtypes.float8_143, dtypes.float8_152, dtypes.float16,
                                   dtypes.float32, dtypes.float64, dtypes.complex64,
                                   dtypes.complex128]


def get_all_int_dtypes(include_signed: bool = True, include_unsigned: bool = True):
    """The signed integer dtypes, then the unsigned ones (as PopXL)."""
    out = []
    if include_signed:
        out += [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64]
    if include_unsigned:
        out += [dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64]
    return out


_FLOAT_NP = (np.float16, np.float32, np.float64)
# Default tolerances by the dtype the analytic gradient is computed in, and
# by order (a second-order check compares a gradient of a gradient, so the
# rounding of two sweeps adds up).
_TOL = {np.float16: (5e-2, 1e-1), np.float32: (2e-3, 5e-3), np.float64: (1e-6, 1e-5)}
# Central-difference steps by the dtype the differences are computed in:
# error ~ eps^2 (truncation) + ulp/eps (rounding).
_EPS = {np.float16: (1e-1, 1e-1), np.float32: (1e-3, 3e-3), np.float64: (1e-6, 1e-5)}


def _is_float(a) -> bool:
    return np.asarray(a).dtype.type in _FLOAT_NP


def _scalar_graph(ir, fn, specs, float_idx, order, cot, u):
    """A graph of the inputs ``specs`` returning one scalar S:

    * order 1: ``S = sum_k <fn(x)_k, cot_k>`` (over float outputs);
    * order 2: ``S = sum_i <dL/dx_i, u_i>`` with ``L`` the order-1 S, the
      first-order gradient built by autodiff and called inside the graph.
    """
    from . import constant, ops
    from .transforms import autodiff

    inner = ir.create_graph(lambda *a: fn(*a), *specs)
    outs = [t for t in inner.outputs if t.dtype.is_floating_point]
    if not outs:
        raise ValueError("check_grads: fn has no floating-point output")
    cot_np = cot(outs)

    def loss(*a):
        res = ops.call(inner, *a)
        total = None
        for k, t in enumerate(inner.outputs):
            if not t.dtype.is_floating_point:
                continue
            c = constant(cot_np[outs.index(t)].astype(t.dtype.as_numpy()), t.dtype, name=f"cot{k}")
            term = ops.sum(res[k] * c)
            total = term if total is None else total + term
        return total

    first = ir.create_graph(loss, *specs)
    if order == 1:
        return first
    info = autodiff(first, grads_provided=[first.outputs[0]],
                    grads_required=[first.inputs[i] for i in float_idx])
    u_np = u([first.inputs[i] for i in float_idx])

    def joint(*a):
        call = ops.call_with_info(first, *a)
        one = constant(np.ones((), first.outputs[0].dtype.as_numpy()), first.outputs[0].dtype,
                       name="one")
        gs = ops.call(info.graph, one, inputs_dict=info.inputs_dict(call))
        total = None
        for k, g in enumerate(gs):
            term = ops.sum(g * constant(u_np[k].astype(g.dtype.as_numpy()), g.dtype, name=f"u{k}"))
            total = term if total is None else total + term
        return total

    return ir.create_graph(joint, *specs)


def _build(fn, arrays, float_idx, order, cot, u, with_grad: bool):
    """An Ir that loads ``arrays``' values from host streams and stores S
    (and, with ``with_grad``, dS/dx for the float inputs)."""
    import ipuxl as px
    from . import ops
    from .transforms import autodiff

    ir = px.Ir()
    with ir.main_graph:
        streams, xs = [], []
        for i, a in enumerate(arrays):
            s = px.h2d_stream(a.shape, dtypes.dtype.as_dtype(a.dtype), name=f"arg{i}")
            streams.append(s)
            xs.append(ops.host_load(s, f"arg{i}"))
        g = _scalar_graph(ir, fn, [x.spec for x in xs], float_idx, order, cot, u)
        call = ops.call_with_info(g, *xs)
        s_out = call.outputs[0]
        out_streams = [px.d2h_stream(s_out.shape, s_out.dtype, name="S")]
        ops.host_store(out_streams[0], s_out)
        if with_grad:
            info = autodiff(g, grads_provided=[g.outputs[0]],
                            grads_required=[g.inputs[i] for i in float_idx])
            seed = px.constant(np.ones(s_out.shape, s_out.dtype.as_numpy()), s_out.dtype,
                               name="seed")
            grads = ops.call(info.graph, seed, inputs_dict=info.inputs_dict(call))
            for k, gr in enumerate(grads):
                st = px.d2h_stream(gr.shape, gr.dtype, name=f"grad{k}")
                ops.host_store(st, gr)
                out_streams.append(st)
    return ir, streams, out_streams


def check_grads(fn: Callable, args: Sequence, order: int = 1, modes: Sequence[str] = ("rev",),
                atol: Optional[float] = None, rtol: Optional[float] = None,
                eps: Optional[float] = None, seed: int = 0, n_directions: int = 3,
                device: str = "ipu_model") -> None:
    """Check the reverse-mode gradients of ``fn`` against finite differences.

    ``fn`` maps ipuxl Tensors (one per entry of ``args``, NumPy arrays) to a
    Tensor or a tuple of Tensors. Its float outputs are contracted with fixed
    random cotangents into a scalar ``L``. For ``order=1`` the gradient of
    ``L`` from :func:`ipuxl.transforms.autodiff` is checked; for ``order=2``
    the gradient of ``<dL/dx, u>`` (``u`` random), which differentiates a
    graph that calls the forward graph and its gradient graph, i.e. a
    Hessian-vector product.

    For each of ``n_directions`` random directions ``v`` (over all float
    inputs), ``<grad, v>`` must match the central difference
    ``(S(x + eps v) - S(x - eps v)) / (2 eps)``. The differences are computed
    in float64 when ``fn`` builds and runs with float64 inputs (otherwise in
    the inputs' own dtypes, with a larger ``eps``). Integer and bool inputs
    are held fixed. Tolerances default by dtype: a mismatch means
    ``|ad - fd| > atol + rtol * max(|ad|, |fd|)``.

    Raises:
        AssertionError: naming the order, the direction and both values, on
            a mismatch.
        NotImplementedError: for ``modes`` other than ``("rev",)`` (ipuxl has
            no forward-mode transform).
    """
    from .session import Session

    if order not in (1, 2):
        raise ValueError(f"check_grads: order must be 1 or 2, got {order!r}")
    modes = tuple(modes)
    if not modes or any(m != "rev" for m in modes):
        raise NotImplementedError(
            f"check_grads: modes {modes!r}: only reverse mode ('rev') is implemented in ipuxl")
    arrays = [np.asarray(a) for a in args]
    float_idx = [i for i, a in enumerate(arrays) if _is_float(a)]
    if not float_idx:
        raise ValueError("check_grads: no floating-point argument to differentiate")
    rng = np.random.default_rng(seed)
    cot_cache: List[np.ndarray] = []
    u_cache: List[np.ndarray] = []

    def cot(outs):
        while len(cot_cache) < len(outs):
            t = outs[len(cot_cache)]
            cot_cache.append(rng.standard_normal(t.shape))
        return cot_cache

    def u(ins):
        while len(u_cache) < len(ins):
            t = ins[len(u_cache)]
            u_cache.append(rng.standard_normal(t.shape))
        return u_cache

    # The analytic gradient, in the arguments' own dtypes.
    ir, in_s, out_s = _build(fn, arrays, float_idx, order, cot, u, with_grad=True)
    with Session(ir, device) as sess:
        res = sess.run(dict(zip(in_s, arrays)))
    grads = [np.asarray(res[s], np.float64) for s in out_s[1:]]

    # The finite differences, in float64 if fn builds and runs with float64
    # inputs; otherwise in the arguments' own dtypes.
    lowest = min((arrays[i].dtype.type for i in float_idx), key=lambda t: np.finfo(t).bits)
    d_tol = _TOL[lowest][order - 1]
    rtol = d_tol if rtol is None else rtol
    atol = d_tol if atol is None else atol

    def make(feed_arrays):
        fir, fin, fout = _build(fn, feed_arrays, float_idx, order, cot, u, with_grad=False)
        sess = Session(fir, device)
        sess.__enter__()
        try:
            sess.run(dict(zip(fin, feed_arrays)))
        except BaseException:
            sess.__exit__(None, None, None)
            raise
        return sess, fin, fout

    fd_type = np.float64
    hi = [a.astype(np.float64) if i in float_idx else a for i, a in enumerate(arrays)]
    try:
        fd_sess, fd_in, fd_out = make(hi)
    except Exception:  # a kernel or fn itself needs the original dtypes
        fd_type, hi = lowest, arrays
        fd_sess, fd_in, fd_out = make(hi)
    step = eps if eps is not None else _EPS[fd_type][order - 1]

    def value(shift: float, v: List[np.ndarray]) -> float:
        feed = []
        for i, a in enumerate(hi):
            if i in float_idx:
                k = float_idx.index(i)
                a = (a.astype(np.float64) + shift * v[k]).astype(a.dtype)
            feed.append(a)
        r = fd_sess.run(dict(zip(fd_in, feed)))
        return float(np.asarray(r[fd_out[0]], np.float64))

    try:
        for d in range(n_directions):
            v = [rng.standard_normal(arrays[i].shape) for i in float_idx]
            ad = float(sum(np.sum(g * vk) for g, vk in zip(grads, v)))
            fd = (value(step, v) - value(-step, v)) / (2 * step)
            if not np.isfinite(ad) or abs(ad - fd) > atol + rtol * max(abs(ad), abs(fd)):
                raise AssertionError(
                    f"check_grads: order-{order} reverse-mode gradient of {getattr(fn, '__name__', fn)!r} "
                    f"disagrees with central differences in random direction {d} (seed {seed}): "
                    f"autodiff <grad, v> = {ad!r}, finite difference = {fd!r} "
                    f"(eps={step}, computed in {np.dtype(fd_type).name}; atol={atol}, rtol={rtol})")
    finally:
        fd_sess.__exit__(None, None, None)


class HostPassChecker:
    """Checks a Session's host passes on every run: the program is also
    built without them (the "shadow"), and each run of the Session runs
    both from the same state and compares every output stream, variable
    and remote buffer entry (float: ``rtol=1e-4, atol=1e-5``; others
    exactly). A difference raises ``AssertionError`` naming the tensor and
    the passes applied.

    A Session creates one when the settings ask (``IPUXL_CHECK_HOST_PASSES``)
    and its program has host passes applied, and hands each run to
    :meth:`run` instead of its engine. Before each run the shadow takes the
    Session engine's variables and remote buffers, so rounding differences
    never accumulate across runs, and nothing else of the Session needs to
    know about the shadow.
    """

    def __init__(self, session):
        from .lowering import build

        self.session = session
        self.shadow = build(session.ir, "none")
        # Under popdist the shadow exchanges with the other instances'
        # shadows, as the Session's engine does with theirs.
        session._distribute(self.shadow.engine)

    def run(self, bound: List[Optional[np.ndarray]], n: int) -> List[int]:
        """Runs the Session's engine on ``bound`` (its stream arrays, in
        stream order) for ``n`` transfers, and the shadow on copies, and
        compares; returns the engine's per-stream transfer counts."""
        sess = self.session
        prog, sh, eng = sess._prog, self.shadow, sess._engine
        R = int(eng.replicas)
        for v in prog.variables:
            a = np.empty(v.shape, v.dtype.as_numpy())
            for r in range(R):
                eng.read_tensor(prog.tensor_index[v], a, r)
                sh.engine.write_tensor(sh.tensor_index[v], a, r)
        sess._remote.copy_to(sh.engine)
        shadow_bound = [None if a is None else a.copy() for a in bound]
        sh.engine.run(shadow_bound, n, sh.stream_item_bytes)
        used = eng.run(bound, n, prog.stream_item_bytes)
        pairs = [(f"stream {s.tensor_id!r}", bound[i], shadow_bound[i])
                 for i, s in enumerate(prog.streams) if s in sess._d2h and bound[i] is not None]
        for v in prog.variables:
            for r in range(R):
                a = np.empty(v.shape, v.dtype.as_numpy())
                b = np.empty(v.shape, v.dtype.as_numpy())
                eng.read_tensor(prog.tensor_index[v], a, r)
                sh.engine.read_tensor(sh.tensor_index[v], b, r)
                pairs.append((f"variable {v.id!r}" + (f" (replica {r})" if R > 1 else ""), a, b))
        for bi, entries, shape, dt in sess._remote.buffers:
            for r in range(R):
                for e in range(entries):
                    a, b = np.empty(shape, dt), np.empty(shape, dt)
                    eng.read_remote(bi, e, r, a)
                    sh.engine.read_remote(bi, e, r, b)
                    pairs.append((f"remote buffer {bi} entry {e} (replica {r})", a, b))
        for what, got, want in pairs:
            if got.dtype.kind == "f":
                ok = np.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
            else:
                ok = np.array_equal(got, want)
            if not ok:
                diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
                raise AssertionError(
                    f"host passes changed a result: {what} differs from the unfused program "
                    f"(largest difference {np.nanmax(diff) if diff.size else 0}; passes applied: "
                    f"{', '.join(k for k, c in prog.host_passes.items() if c)})")
        return used
