"""Hostile data: every dataset file is checked before it is used.

A table of spoiled files, each tried three ways where it applies: as the digits
file that dezero_mini ships (refused by its SHA-256, with how to restore it), as
a digits file given to ``MNISTSample(source=...)`` (refused by its form: no
checksum is known for it), and through ``python -m dezero_mini train`` (exit
status 2, a message that names the file and the fix, no traceback, no training).
Then the same for the MNIST IDX files of ``train --dataset mnist --data-dir``,
with gzip bombs: files of about a megabyte that expand to a gigabyte or claim
more, refused without being decompressed or allocated.
"""
import contextlib
import gc
import gzip
import io
import os
import re
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dezero_mini import datasets
from dezero_mini.datasets import MNIST, DataFileError, MNISTSample, write_idx
from test_cli import run  # cli.main in this process: (exit status, stdout, stderr)


@contextlib.contextmanager
def peak_allocation():
    """``peak()``: the most bytes held at once inside the block, as tracemalloc counts them
    (NumPy reports its arrays to it), with the collector off: the same on a busy machine."""
    gc_was_on = gc.isenabled()
    gc.disable()
    tracemalloc.start()
    peak = []
    try:
        yield lambda: peak[0]
    finally:
        peak.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        if gc_was_on:
            gc.enable()

N = 20  # digits in a small good file: two of each class


def good_digits():
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (N, 28, 28), dtype=np.uint8), np.repeat(np.arange(10), 2)


def npy(array, allow_pickle=False):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=allow_pickle)
    return buffer.getvalue()


def zip_of(members):
    """A zip file (bytes) of ``{name: bytes}``, deflated, as np.savez_compressed makes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def digits_npz(images=None, labels=None, **extra):
    good_images, good_labels = good_digits()
    members = {"images.npy": npy(good_images if images is None else images),
               "labels.npy": npy((good_labels if labels is None else labels).astype(np.uint8))}
    members.update(extra)
    return zip_of(members)


def header_only(shape, descr="|u1"):
    """A .npy header that announces ``shape``, followed by a few bytes of data."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + bytes(64)


def flip_middle(data):
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 64]) + data[middle + 64:]


_, LABELS = good_digits()
GOOD = digits_npz()

# name, the spoiled file's bytes, what the error says when the file is given as a
# source (None: nothing in the file's form shows it; only a known checksum can).
SPOILED_DIGITS = [
    ("damaged zip", flip_middle(GOOD), r"not a readable \.npz file"),
    ("truncated npz", GOOD[: len(GOOD) // 2], r"not a readable \.npz file"),
    ("empty file", b"", r"not a readable \.npz file"),
    ("not a zip at all", b"images,labels\n", r"not a readable \.npz file"),
    ("every label moved by one class", digits_npz(labels=(LABELS + 1) % 10), None),
    ("labels out of range", digits_npz(labels=LABELS + 1), r"label 10 at index 18"),
    ("images of another dtype", digits_npz(images=good_digits()[0].astype(np.float64)),
     r"images\.npy is float64, expected uint8"),
    ("images of another shape", digits_npz(images=good_digits()[0].reshape(N, 784)),
     r"images of shape \(20, 784\).*expected \(N, 28, 28\)"),
    ("fewer labels than images", digits_npz(labels=LABELS[:-1]), r"20 images but 19 labels"),
    ("an array too many", digits_npz(**{"test.npy": npy(np.zeros(3))}),
     r"expected exactly images\.npy and labels\.npy"),
    ("pickled objects, never unpickled",
     zip_of({"images.npy": npy(np.array([{"a": 1}], dtype=object), allow_pickle=True),
             "labels.npy": npy(LABELS.astype(np.uint8))}),
     r"images\.npy is object, expected uint8"),
    ("header announcing 785 GB", digits_npz(**{"images.npy": header_only((10**9, 28, 28))}),
     r"announces shape \(1000000000, 28, 28\), 784,000,000,000 bytes"),
    ("array longer than its header", digits_npz(**{"labels.npy": npy(LABELS.astype(np.uint8))
                                                   + bytes(1000)}),
     r"labels\.npy is longer than its header says"),
]
IDS = [case[0] for case in SPOILED_DIGITS]
RESTORE = "git checkout -- dezero_mini/data/mnist_sample.npz"


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """Where the shipped digits file is looked for, in a test folder."""
    path = tmp_path / "package" / "mnist_sample.npz"
    path.parent.mkdir()
    monkeypatch.setattr(datasets, "MNIST_SAMPLE_FILE", path)
    monkeypatch.setattr(MNISTSample, "_memory_cache", {})
    monkeypatch.setenv("DEZERO_MINI_DATA", str(tmp_path / "cache"))
    return path


def test_the_harness_passes_the_real_file(shipped):
    real = datasets.Path(datasets.__file__).parent / "data" / "mnist_sample.npz"
    shipped.write_bytes(real.read_bytes())
    assert len(MNISTSample()) == 4000  # so a refusal below comes from the spoiled bytes


@pytest.mark.parametrize("name,data,_", SPOILED_DIGITS, ids=IDS)
def test_a_spoiled_shipped_file_is_refused_by_its_checksum(shipped, name, data, _):
    shipped.write_bytes(data)
    with pytest.raises(DataFileError) as refused:
        MNISTSample()
    message = str(refused.value)
    assert message.startswith(f"{shipped}: SHA-256 ")
    assert datasets.MNIST_SAMPLE_SHA256 in message and "is not used" in message
    assert "pip install --force-reinstall dezero_mini" in message and RESTORE in message


def test_a_missing_shipped_file_says_how_to_restore_it(shipped):
    with pytest.raises(DataFileError, match=rf"{re.escape(str(shipped))}: missing; reinstall"):
        MNISTSample()


@pytest.mark.parametrize("name,data,message", SPOILED_DIGITS, ids=IDS)
def test_a_spoiled_source_file_is_refused_by_its_form(tmp_path, monkeypatch, name, data, message):
    if message is None:
        pytest.skip("in range and well formed: only a known SHA-256 tells (the shipped file)")
    monkeypatch.setattr(MNISTSample, "_memory_cache", {})
    path = tmp_path / "digits.npz"
    path.write_bytes(data)
    with peak_allocation() as peak, pytest.raises(DataFileError, match=message) as refused:
        MNISTSample(source=path)
    assert str(refused.value).startswith(f"{path}: ")
    assert peak() < 64 * 2**20  # nothing big was read or allocated (tracemalloc's bytes, not the clock)


@pytest.mark.parametrize("name,data,_", SPOILED_DIGITS, ids=IDS)
def test_train_on_a_spoiled_shipped_file_exits_2_with_the_fix(capsys, shipped, name, data, _):
    shipped.write_bytes(data)
    code, out, err = run(capsys, "train", "--epochs", "1")
    assert code == 2 and out == ""  # refused at load: not one batch trained
    last = err.strip().splitlines()[-1]
    assert f"--dataset mnist-sample: {shipped}: SHA-256" in last and RESTORE in last
    assert "Traceback" not in err


# --- MNIST IDX files from --data-dir -------------------------------------------------------
IMAGES, LABELS_FILE = MNIST.files[True]
GZIP_OF_16_MIB_OF_ZEROS = gzip.compress(bytes(1 << 24), compresslevel=9)


def write_mnist(folder, images=None, labels=None):
    rng = np.random.default_rng(0)
    write_idx(folder / IMAGES, rng.integers(0, 256, (N, 28, 28), dtype=np.uint8)
              if images is None else images)
    write_idx(folder / LABELS_FILE, LABELS.astype(np.uint8) if labels is None else labels)


def labels_gzip_bomb(folder):
    """A good labels file followed by 1 GiB of zeros (64 gzip members of 16 MiB):
    about 1 MB on disk. Decompressed whole, it was a MemoryError or minutes."""
    write_mnist(folder)
    path = folder / LABELS_FILE
    path.write_bytes(path.read_bytes() + GZIP_OF_16_MIB_OF_ZEROS * 64)


def header_bomb(folder):
    """An images file whose header announces 4,294,967,295 images of 28x28."""
    write_mnist(folder)
    header = bytes([0, 0, 8, 3]) + (2**32 - 1).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
    (folder / IMAGES).write_bytes(gzip.compress(header + bytes(1000)))


def truncated_gzip(folder):
    write_mnist(folder)
    data = (folder / IMAGES).read_bytes()
    (folder / IMAGES).write_bytes(data[: len(data) // 2])


# name, how to spoil a folder of good files, which file the message names, what it says
SPOILED_IDX = [
    ("labels above 9", lambda f: write_mnist(f, labels=np.where(LABELS == 3, 12, LABELS)
                                             .astype(np.uint8)),
     LABELS_FILE, r"label 12 at index 6 \(2 labels outside 0-9\)"),
    ("gzip bomb, 1 GiB of trailing zeros", labels_gzip_bomb, LABELS_FILE,
     r"longer than its header says.*the rest was not decompressed"),
    ("header announcing 3.4 TB", header_bomb, IMAGES,
     r"announces shape \(4294967295, 28, 28\), 3,367,254,359,280 bytes"),
    ("truncated gzip", truncated_gzip, IMAGES, r"broken gzip data"),
    ("images of 27x27 pixels",
     lambda f: write_mnist(f, images=np.zeros((N, 27, 27), np.uint8)), IMAGES,
     r"images of 27x27 pixels, MNIST's are 28x28"),
    ("fewer labels than images",
     lambda f: write_mnist(f, labels=LABELS[:-1].astype(np.uint8)), IMAGES,
     r"holds 20 images but .* 19 labels"),
    ("an images file as the labels",
     lambda f: write_mnist(f, labels=np.zeros((N, 28, 28), np.uint8)), LABELS_FILE,
     r"magic number 2051, expected 2049"),
]
IDX_IDS = [case[0] for case in SPOILED_IDX]


@pytest.mark.parametrize("name,spoil,culprit,message", SPOILED_IDX, ids=IDX_IDS)
def test_spoiled_mnist_files_are_refused_at_load_with_the_fix(
        capsys, tmp_path, name, spoil, culprit, message):
    spoil(tmp_path)
    assert os.path.getsize(tmp_path / culprit) < 2_000_000  # small on disk, whatever it claims
    with peak_allocation() as peak:
        code, out, err = run(capsys, "train", "--dataset", "mnist", "--data-dir", str(tmp_path))
    assert peak() < 64 * 2**20  # a bomb is not decompressed (tracemalloc's bytes, not the clock)
    assert code == 2 and out == "" and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert f"--data-dir: {tmp_path / culprit}" in last
    assert re.search(message, last), last
    assert f"replace the files in {tmp_path} with the ones published at {MNIST.url}" in last


@pytest.mark.parametrize("name", ["labels above 9", "gzip bomb, 1 GiB of trailing zeros"])
def test_a_real_process_ends_with_the_message_not_a_traceback(tmp_path, name):
    spoil, culprit, message = {case[0]: case[1:] for case in SPOILED_IDX}[name]
    spoil(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "dezero_mini", "train", "--dataset", "mnist",
         "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert str(tmp_path / culprit) in done.stderr and re.search(message, done.stderr)


def test_a_csv_of_digits_is_read_up_to_a_bound(tmp_path):
    # The default bound (256 MiB) would make this test read that much; a smaller
    # bound shows the same rule: reading stops one byte past it.
    path = tmp_path / "digits.csv.gz"
    path.write_bytes(GZIP_OF_16_MIB_OF_ZEROS * 4)
    with pytest.raises(DataFileError, match=r"more than 1,048,576 bytes once decompressed.*"
                                            r"reading stopped there"):
        datasets.read_mnist_csv(path, max_bytes=1 << 20)


# --- The data folder ($DEZERO_MINI_DATA) that is not one ------------------------------------------
# (how the folder is spoiled, words the error must hold). Before: FileExistsError
# "File exists: '/dev/null'", IsADirectoryError, FileNotFoundError, none with a fix.
SPOILED_DATA_FOLDERS = [
    ("a file", lambda folder: folder.write_text("not a folder\n"),
     "which is a file, not a folder; set DEZERO_MINI_DATA to a folder"),
    ("a folder in the file's place",
     lambda folder: (folder / "train-images-idx3-ubyte.gz").mkdir(parents=True),
     "is a folder or another kind of file; remove it"),
    ("a folder that cannot be made", lambda folder: folder.parent.write_text(""),
     "cannot make the data folder"),
]


@pytest.mark.parametrize("case, spoil, words", SPOILED_DATA_FOLDERS,
                         ids=[case[0] for case in SPOILED_DATA_FOLDERS])
def test_a_data_folder_that_is_not_one_is_named_with_the_fix(tmp_path, monkeypatch, case, spoil,
                                                              words):
    folder = tmp_path / "data"
    if case == "a folder that cannot be made":
        folder = tmp_path / "blocker" / "data"  # blocker is a file
    spoil(folder)
    monkeypatch.setenv("DEZERO_MINI_DATA", str(folder))

    def no_network(*args, **kwargs):
        raise AssertionError("nothing may be downloaded into a folder that is not one")

    monkeypatch.setattr(datasets, "_urlopen", no_network)
    with pytest.raises(datasets.DownloadError) as raised:
        MNIST(train=True)
    assert words in str(raised.value)


# --- What stands where a file of --data-dir should be ----------------------------------------
# (the name in the folder, what is put there, what the error says it is). Before: "DIR must
# hold train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz", with the files right there.
def _link_to(target):
    return lambda path: path.symlink_to(target)


NOT_FILES = [
    (IMAGES, "a folder", Path.mkdir, "is a folder"),
    (IMAGES, "a link to nothing", _link_to("nowhere.gz"), "is a link to nothing"),
    (IMAGES.removesuffix(".gz"), "a folder, unpacked name", Path.mkdir, "is a folder"),
    *([(IMAGES, "a pipe", os.mkfifo, "is not a regular file (a pipe or a device)"),
       (LABELS_FILE.removesuffix(".gz"), "a pipe, unpacked name", os.mkfifo,
        "is not a regular file (a pipe or a device)")] if hasattr(os, "mkfifo") else []),
    *([(IMAGES, "a link to /dev/zero", _link_to("/dev/zero"),
        "is not a regular file (a pipe or a device)")] if os.path.exists("/dev/zero") else []),
    # the test split: named too, not taken for "no test set"
    (MNIST.files[False][0], "a folder for the test images", Path.mkdir, "is a folder"),
]


@pytest.mark.parametrize("name, case, make, words", NOT_FILES, ids=[row[1] for row in NOT_FILES])
def test_what_stands_where_a_data_file_should_be_is_named(capsys, tmp_path, name, case, make,
                                                          words):
    write_mnist(tmp_path)  # both training files, good
    if not name.startswith("t10k"):
        (tmp_path / IMAGES).unlink()
        (tmp_path / LABELS_FILE).unlink()
        if name != LABELS_FILE.removesuffix(".gz"):
            write_idx(tmp_path / LABELS_FILE, LABELS.astype(np.uint8))
        else:
            write_idx(tmp_path / IMAGES, np.zeros((N, 28, 28), np.uint8))
    make(tmp_path / name)
    code, out, err = run(capsys, "train", "--dataset", "mnist", "--data-dir", str(tmp_path))
    assert code == 2 and out == "" and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert f"--data-dir: {tmp_path / name} {words}; MNIST's files must be regular files" in last
    assert MNIST.url in last
