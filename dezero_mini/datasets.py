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
class MNIST(Dataset):
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

    @staticmethod
    def labels():
        return {i: str(i) for i in range(10)}
