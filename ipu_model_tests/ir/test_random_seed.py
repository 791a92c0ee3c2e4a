"""popxl.random_seed helpers: the two-uint32 split checked against the
big-endian byte layout (struct), create_seeds against PopXL's documented
contract (shape, dtype, ``seed + offset``)."""
import struct

import numpy as np
import pytest

import ipuxl as popxl
from ipuxl.random_seed import MAX_UINT64, create_seeds, two_uint32_to_uint64, uint64_to_two_uint32


@pytest.mark.parametrize("num", [0, 1, 100, 2**32 - 1, 2**32, 0x0123456789ABCDEF, MAX_UINT64])
def test_split_is_big_endian_halves(num):
    hi, lo = struct.unpack(">II", struct.pack(">Q", num))
    assert uint64_to_two_uint32(num) == (hi, lo)
    assert two_uint32_to_uint64(hi, lo) == num


def test_split_errors():
    assert MAX_UINT64 == 18446744073709551615
    for bad in (-1, MAX_UINT64 + 1):
        with pytest.raises(ValueError):
            uint64_to_two_uint32(bad)
    for a, b in ((-1, 0), (0, 2**32), (2**32, 0)):
        with pytest.raises(ValueError):
            two_uint32_to_uint64(a, b)


def test_create_seeds_contract():
    s = create_seeds(42)
    assert s.dtype == np.uint32 and s.shape == (2,)
    np.testing.assert_array_equal(s, create_seeds(42))
    assert popxl.create_seeds is create_seeds
    # "offset added to seed"
    np.testing.assert_array_equal(create_seeds(40, offset=2), create_seeds(42))
    assert not np.array_equal(create_seeds(42), create_seeds(43))
    s = create_seeds(42, batches_per_step=3, gradient_accumulation_factor=7, replicas=9)
    assert s.dtype == np.uint32 and s.shape == (3, 7, 9, 2)
    assert create_seeds(1, replicas=4).shape == (4, 2)
    assert create_seeds(1, batches_per_step=2, replicas=4).shape == (2, 4, 2)


def test_create_seeds_are_numpy_uint64_draws():
    # each pair is (high, low) of a uint64 drawn by numpy's default generator
    s = create_seeds(7, batches_per_step=5).reshape(-1, 2)
    draws = np.random.default_rng(7).integers(0, MAX_UINT64, size=5, dtype=np.uint64,
                                              endpoint=True)
    halves = draws.astype("<u8").view("<u4").reshape(-1, 2)   # little-endian: (low, high)
    np.testing.assert_array_equal(s[:, 0], halves[:, 1])
    np.testing.assert_array_equal(s[:, 1], halves[:, 0])
