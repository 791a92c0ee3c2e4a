"""Random ops: random_uniform, random_normal, dropout, shaped_dropout and
split_random_seed (with create_random_seed, the op behind it).

Every op takes a seed tensor: uint32 of shape (2,), e.g. loaded from
``popxl.create_seeds``. Outputs are a pure function of the seed value (a
Philox4x32-10 counter-based generator keyed by the two seed words, see
cpp/kernels/random.cpp): the same seed gives the same numbers on every run
and platform. Use ``split_random_seed`` to derive fresh seeds.
"""
import numbers
from typing import Iterable, Tuple

from .. import dtypes
from ..grad import register_grad
from .._shapes import check_shape
from ..op import create_op
from ..opdef import define_op
from .rules import like_input
from ..tensor import Tensor, constant
from .utils import FLOAT_DTYPES, check_dtype_in, check_in_graph, check_tensor, same_tile_set

__all__ = ["random_uniform", "random_normal", "dropout", "shaped_dropout", "split_random_seed",
           "create_random_seed"]


def _check_seed(op: str, seed: Tensor, name: str = "seed_tensor") -> None:
    check_tensor(op, name, seed)
    if seed.dtype != dtypes.uint32 or seed.shape != (2,):
        raise ValueError(f"{op}: {name} {seed.id!r} must be uint32 of shape (2,), got "
                         f"{seed.dtype.name} {seed.shape}")


def _check_shape(op: str, shape) -> Tuple[int, ...]:
    return check_shape(op, shape, 8)


def _check_float(op: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a float, got {type(value).__name__} {value!r}")
    v = float(value)
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"{op}: {name} must be finite, got {v}")
    return v


def _check_float_dtype(op: str, dtype) -> dtypes.dtype:
    if not isinstance(dtype, dtypes.dtype):
        raise TypeError(f"{op}: dtype must be a popxl dtype, got {dtype!r}")
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: dtype must be one of float16, float32, float64; got {dtype.name}")
    return dtype


def random_uniform(seed_tensor: Tensor, shape: Tuple[int, ...], low: float = 0.0,
                   high: float = 1.0, dtype: dtypes.dtype = dtypes.float32) -> Tensor:
    """Samples uniformly from ``[low, high)`` (values that would round up to
    ``high`` in ``dtype`` are moved just below it).

    Args:
        seed_tensor: uint32 tensor of shape (2,).
        shape: output shape.
        low, high: the range, finite with ``low <= high``.
        dtype: float16, float32 (default) or float64.
    """
    op = "random_uniform"
    _check_seed(op, seed_tensor)
    check_in_graph(op, seed_tensor=seed_tensor)
    shape = _check_shape(op, shape)
    low = _check_float(op, "low", low)
    high = _check_float(op, "high", high)
    if low > high:
        raise ValueError(f"{op}: low ({low}) must not exceed high ({high})")
    dtype = _check_float_dtype(op, dtype)
    return create_op("RandomUniform", [seed_tensor], ["random_uniform_out"],
                     {"low": low, "high": high, "shape": list(shape), "_dtype": dtype},
                     name=op).outputs[0]


def random_normal(seed_tensor: Tensor, shape: Tuple[int, ...], mean: float = 0.0,
                  std: float = 1.0, dtype: dtypes.dtype = dtypes.float32) -> Tensor:
    """Samples from the normal distribution N(mean, std^2) (Box-Muller).

    Args:
        seed_tensor: uint32 tensor of shape (2,).
        shape: output shape.
        mean: the mean; std: the standard deviation (>= 0).
        dtype: float16, float32 (default) or float64.
    """
    op = "random_normal"
    _check_seed(op, seed_tensor)
    check_in_graph(op, seed_tensor=seed_tensor)
    shape = _check_shape(op, shape)
    mean = _check_float(op, "mean", mean)
    std = _check_float(op, "std", std)
    if std < 0:
        raise ValueError(f"{op}: std must be >= 0, got {std}")
    dtype = _check_float_dtype(op, dtype)
    return create_op("RandomNormal", [seed_tensor], ["random_normal_out"],
                     {"mean": mean, "std": std, "shape": list(shape), "_dtype": dtype},
                     name=op).outputs[0]


def _check_ratio(op: str, name: str, p) -> float:
    p = _check_float(op, name, p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{op}: {name} must be in [0, 1), got {p}")
    return p


def dropout(t: Tensor, seed_tensor: Tensor, p: float) -> Tensor:
    """Zeroes each element of ``t`` with probability ``p`` and scales the
    kept ones by ``1 / (1 - p)``.

    Args:
        t: a floating point tensor.
        seed_tensor: uint32 tensor of shape (2,); the mask is a function of
            its value, so update it between steps (``split_random_seed``).
        p: the drop probability, in [0, 1).
    """
    op = "dropout"
    check_tensor(op, "t", t)
    _check_seed(op, seed_tensor)
    check_in_graph(op, t=t, seed_tensor=seed_tensor)
    same_tile_set(op, t, seed_tensor)
    check_dtype_in(op, t, FLOAT_DTYPES)
    p = _check_ratio(op, "p", p)
    return create_op("Dropout", [t, seed_tensor], ["dropout_out"], {"ratio": p},
                     name=op).outputs[0]


def shaped_dropout(t: Tensor, seed_tensor: Tensor, shape: Iterable[int],
                   ratio: float) -> Tensor:
    """Dropout with a mask of shape ``shape`` broadcast over ``t``, so whole
    slices (for example channels) are dropped together. Kept values are
    scaled by ``1 / (1 - ratio)``.

    Args:
        t: a floating point tensor.
        seed_tensor: uint32 tensor of shape (2,).
        shape: the mask shape; must broadcast to ``t.shape``.
        ratio: the drop probability, in [0, 1).
    """
    op = "shaped_dropout"
    check_tensor(op, "t", t)
    _check_seed(op, seed_tensor)
    check_in_graph(op, t=t, seed_tensor=seed_tensor)
    same_tile_set(op, t, seed_tensor)
    check_dtype_in(op, t, FLOAT_DTYPES)
    mshape = _check_shape(op, shape)
    ok = len(mshape) <= t.rank and all(
        m in (1, d) for m, d in zip(reversed(mshape), reversed(t.shape)))
    if not ok:
        raise ValueError(f"{op}: the mask shape {mshape} does not broadcast to the shape "
                         f"{t.shape} of {t.id!r}")
    ratio = _check_ratio(op, "ratio", ratio)
    return create_op("ShapedDropout", [t, seed_tensor], ["shapeddropout_out"],
                     {"ratio": ratio, "shape": list(mshape)}, name=op).outputs[0]


def create_random_seed(seed: Tensor, modifier: Tensor) -> Tensor:
    """A new seed from ``seed`` (uint32, shape (2,)) and an integer scalar
    ``modifier``: distinct modifiers give unrelated seeds."""
    op = "create_random_seed"
    check_tensor(op, "seed", seed)
    check_tensor(op, "modifier", modifier)
    check_in_graph(op, seed=seed, modifier=modifier)
    same_tile_set(op, seed, modifier)
    if seed.shape != (2,) or seed.dtype != dtypes.uint32:
        raise ValueError(f"seed Tensor must be shape=(2,) dtype=uint32. Provided {seed}")
    if not modifier.dtype.is_int or modifier.nelms != 1:
        raise ValueError(f"{op}: modifier {modifier.id!r} must be an integer scalar, got "
                         f"{modifier.dtype.name} {modifier.shape}")
    return create_op("ModifyRandomSeed", [seed, modifier], ["modified_seed"],
                     name="modify_random_seed").outputs[0]


# Random ops are not recomputed in a gradient graph (as PopART): a
# recomputation would have to reproduce the forward pass's seed exactly.
_sampled = lambda ins, attrs, graphs=(): [(tuple(attrs["shape"]), attrs["_dtype"])]  # noqa: E731
define_op("RandomUniform", _sampled, recomputable=False, cost="random", no_grad="samples: no input to differentiate")
define_op("RandomNormal", _sampled, recomputable=False, cost="random", no_grad="samples: no input to differentiate")
define_op("Dropout", like_input(0), recomputable=False, cost="random")
define_op("ShapedDropout", like_input(0), recomputable=False, cost="random")
define_op("ModifyRandomSeed", lambda ins, attrs, graphs=(): [((2,), dtypes.uint32)],
          no_grad="integer output", cost="elementwise")


def split_random_seed(seed: Tensor, n: int = 2) -> Tuple[Tensor, ...]:
    """``n`` new seeds derived from ``seed`` (uint32, shape (2,)), the i-th
    with modifier constant ``i``::

        seed, s1 = ops.split_random_seed(seed)
        y = ops.dropout(x, s1, 0.1)
    """
    op = "split_random_seed"
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{op}: n must be an int, got {n!r}")
    if n < 1:
        raise ValueError(f"{op}: n must be >= 1, got {n}")
    _check_seed(op, seed, "seed")
    check_in_graph(op, seed=seed)
    return tuple(create_random_seed(seed, constant(i, dtypes.uint32)) for i in range(int(n)))


# ---- gradient rules. The mask is a pure function of the seed, so dropping
# out the incoming gradient with the same seed and ratio reproduces it
# exactly: dy/dx = mask / (1 - ratio). The seed never carries a gradient.

@register_grad("Dropout", nondiff=[1])
def _dropout_grad(ctx):
    g = ctx.g()
    if g is None or not ctx.needs(0):
        return [None, None]
    return [dropout(g, ctx.x(1), ctx.attrs["ratio"]), None]


@register_grad("ShapedDropout", nondiff=[1])
def _shaped_dropout_grad(ctx):
    g = ctx.g()
    if g is None or not ctx.needs(0):
        return [None, None]
    return [shaped_dropout(g, ctx.x(1), ctx.attrs["shape"], ctx.attrs["ratio"]), None]
