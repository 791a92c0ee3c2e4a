"""Small datasets for ipuxl's examples, read from local files only.

``ipuxl.datasets`` never downloads: it reads data that a package manager
has already put on the machine (see :mod:`ipuxl.datasets.mnist`).
"""
from .mnist import (FASHION_MEAN, FASHION_STD, MNIST_MEAN, MNIST_STD, BatchIterator,
                    DatasetNotFoundError, find_mnist, load_mnist, read_idx, read_mnist_pickle,
                    synthetic_mnist)

__all__ = [
    "FASHION_MEAN", "FASHION_STD", "MNIST_MEAN", "MNIST_STD", "BatchIterator",
    "DatasetNotFoundError", "find_mnist", "load_mnist", "read_idx", "read_mnist_pickle",
    "synthetic_mnist",
]
