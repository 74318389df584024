"""Weights load as they were saved: a table of weights files that are not.

Each bad file is refused with an error that names the file (and the
parameter, when one parameter is wrong), and the model is left as it was:
nothing is loaded halfway. Pickled data is never loaded.
"""
import os
import zipfile

import numpy as np
import pytest

from dezero_mini.models import MLP


def model():
    np.random.seed(0)
    net = MLP((4, 2))
    net(np.zeros((1, 3), dtype=np.float32))  # makes the lazy W of the first layer
    return net


def saved_arrays(net):
    return {key: param.data for key, param in net._named_params().items()}


def write_npz(path, arrays, **options):
    np.savez(path, **arrays, **options)


def good_file(path):
    model().save_weights(path)
    return path.read_bytes()


def flip_bytes_in_the_middle(data):
    data = bytearray(data)
    for i in range(60, 120):
        data[i] ^= 0xFF
    return bytes(data)


# (name of the case, how to make the file from a good one's bytes and arrays, words of the error)
BAD_FILES = [
    ("empty", lambda path, good, arrays: path.write_bytes(b""), ["empty file"]),
    ("cut in half", lambda path, good, arrays: path.write_bytes(good[:len(good) // 2]),
     ["not a .npz archive"]),
    ("cut short by 30 bytes", lambda path, good, arrays: path.write_bytes(good[:-30]),
     ["not a .npz archive"]),
    ("damaged inside", lambda path, good, arrays: path.write_bytes(flip_bytes_in_the_middle(good)),
     ["not a weights file"]),
    ("a .npy array", lambda path, good, arrays: np.save(open(path, "wb"), np.zeros(3)),
     ["not a .npz archive"]),
    ("a text file", lambda path, good, arrays: path.write_text("W: 1, 2, 3\n"),
     ["not a .npz archive"]),
    ("pickled objects", lambda path, good, arrays: write_npz(
        path, {k: np.array([object()] * v.size, dtype=object).reshape(v.shape)
               for k, v in arrays.items()}), ["not a weights file", "pickle"]),
    *[(f"{dtype} arrays", lambda path, good, arrays, dtype=dtype: write_npz(
        path, {k: v.astype(dtype) for k, v in arrays.items()}),
       ["parameter 'l0/W' is float32", f"has {np.dtype(dtype)}"])
      for dtype in ("float64", "float16", "int64", "complex64", "bool", "U8")],
    ("a wrong shape", lambda path, good, arrays: write_npz(
        path, {**arrays, "l0/W": np.zeros((3, 5), np.float32)}),
     ["parameter 'l0/W' has shape (3, 4)", "has (3, 5)"]),
    ("a missing array", lambda path, good, arrays: write_npz(
        path, {k: v for k, v in arrays.items() if k != "l1/b"}), ["no array", "l1/b"]),
    ("an extra array", lambda path, good, arrays: write_npz(
        path, {**arrays, "l9/W": np.zeros(2, np.float32)}), ["l9/W", "match no parameter"]),
]


@pytest.mark.parametrize("make, words", [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_a_bad_weights_file_is_named_and_nothing_is_loaded(tmp_path, make, words):
    good_path = tmp_path / "good.npz"
    good = good_file(good_path)
    path = tmp_path / "bad.npz"
    make(path, good, saved_arrays(model()))
    net = model()
    before = {key: value.copy() for key, value in saved_arrays(net).items()}
    with pytest.raises((ValueError, KeyError)) as caught:
        net.load_weights(path)
    message = str(caught.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message
    after = saved_arrays(net)
    assert all(after[key].dtype == before[key].dtype and np.array_equal(after[key], before[key])
               for key in before)


def test_a_lazy_parameter_takes_only_floating_point_values(tmp_path):
    path = tmp_path / "w.npz"
    write_npz(path, {k: v.astype(np.int64) for k, v in saved_arrays(model()).items()})
    lazy = MLP((4, 2))  # no forward yet: l0/W has no data, so no dtype to compare
    with pytest.raises(ValueError, match="'l0/W' needs floating-point values"):
        lazy.load_weights(path)


def test_weights_round_trip_keeps_values_and_dtypes(tmp_path):
    net = model()
    path = tmp_path / "w.npz"
    assert net.save_weights(path) == path
    other = MLP((4, 2))
    other.load_weights(path)
    for key, value in saved_arrays(net).items():
        loaded = saved_arrays(other)[key]
        assert loaded.dtype == value.dtype and np.array_equal(loaded, value)
    with zipfile.ZipFile(path) as archive:  # plain .npy members, nothing else
        assert sorted(archive.namelist()) == sorted(f"{key}.npy" for key in saved_arrays(net))


@pytest.mark.parametrize("given, written", [
    ("W.NPZ", "W.NPZ"), ("w.npz", "w.npz"), ("w.Npz", "w.Npz"),
    ("w", "w.npz"),  # NumPy and DeZero add .npz to a name without it: said, not silent
])
def test_save_weights_writes_the_name_it_returns(tmp_path, given, written):
    returned = model().save_weights(str(tmp_path / given))
    assert returned == str(tmp_path / written)
    assert os.listdir(tmp_path) == [written]


def test_train_save_writes_exactly_the_name_given(tmp_path, capsys, monkeypatch):
    from dezero_mini import cli

    monkeypatch.chdir(tmp_path)
    code = cli.main(["train", "--dataset", "spiral", "--epochs", "1", "--save", "W.NPZ"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "saved the weights to W.NPZ"
    assert os.listdir(tmp_path) == ["W.NPZ"]
    net = MLP((30, 30, 3))
    net.load_weights("W.NPZ")

