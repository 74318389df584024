"""Hostile input to the public API, by family, from a sweep of new inputs
(tools/hostile_sweep.py): each call answered before with a raw exception
from inside (ZeroDivisionError, IndexError 'tuple index out of range',
NumPy's UFuncTypeError, AttributeError), an error naming the wrong thing
(RNN's sizes blamed on Linear), or nothing at all until later (a transform
that is not a function, an activation given as a string, an empty MLP, a
SeqDataLoader of more parts than samples, a clip bound of nan). Each now
raises TypeError, ValueError, IndexError or MemoryError with one line that
names the function and the argument.
"""
import numpy as np
import pytest

import dezero_mini as dz
import dezero_mini.functions as F
import dezero_mini.layers as L
from dezero_mini import datasets, models, optimizers, utils
from dezero_mini.dataloaders import SeqDataLoader


def V(*shape):
    return dz.Variable(np.ones(shape))


#: (case, call, the exception, what its message names)
CASES = [
    # convolution geometry: a stride of 0 divided by zero, a kernel of 0 or a negative one passed
    ("conv2d stride 0", lambda: F.conv2d(V(1, 1, 4, 4), V(1, 1, 3, 3), stride=0), ValueError, "stride"),
    ("conv2d stride -1", lambda: F.conv2d(V(1, 1, 4, 4), V(1, 1, 3, 3), stride=-1), ValueError, "stride"),
    ("conv2d stride (1, 0)", lambda: F.conv2d(V(1, 1, 4, 4), V(1, 1, 3, 3), stride=(1, 0)), ValueError, "stride"),
    ("conv2d stride (1.5, 1)", lambda: F.conv2d(V(1, 1, 4, 4), V(1, 1, 3, 3), stride=(1.5, 1)), ValueError, "pair"),
    ("average_pooling stride 0", lambda: F.average_pooling(V(1, 1, 4, 4), 2, stride=0), ValueError, "stride"),
    ("pooling stride 0", lambda: F.pooling(V(1, 1, 4, 4), 2, stride=0), ValueError, "stride"),
    ("im2col stride 0", lambda: F.im2col(V(1, 1, 4, 4), 2, stride=0), ValueError, "stride"),
    ("get_conv_outsize stride 0", lambda: utils.get_conv_outsize(4, 3, 0, 0), ValueError, "get_conv_outsize: stride"),
    ("get_conv_outsize kernel 0", lambda: utils.get_conv_outsize(4, 0, 1, 0), ValueError, "get_conv_outsize: kernel_size"),
    ("get_conv_outsize pad -1", lambda: utils.get_conv_outsize(4, 3, 1, -1), ValueError, "get_conv_outsize: pad"),
    # the sizes a layer is made with, named for that layer
    ("Conv2d out_channels 0", lambda: L.Conv2d(0, 3), ValueError, "Conv2d: out_channels"),
    ("Conv2d kernel 0", lambda: L.Conv2d(2, 0), ValueError, "Conv2d: kernel_size"),
    ("Conv2d kernel (3, -1)", lambda: L.Conv2d(2, (3, -1)), ValueError, "Conv2d: kernel_size[1]"),
    ("Conv2d in_channels 0", lambda: L.Conv2d(2, 3, in_channels=0), ValueError, "Conv2d: in_channels"),
    ("Deconv2d out_channels -1", lambda: L.Deconv2d(-1, 3), ValueError, "Deconv2d: out_channels"),
    ("RNN hidden 0", lambda: L.RNN(0), ValueError, "RNN: hidden_size"),
    ("RNN in_size 2.5", lambda: L.RNN(3, in_size=2.5), TypeError, "RNN: in_size"),
    ("LSTM hidden -1", lambda: L.LSTM(-1), ValueError, "LSTM: hidden_size"),
    ("EmbedID in 0", lambda: L.EmbedID(0, 3), ValueError, "EmbedID: in_size"),
    ("EmbedID in 2.5", lambda: L.EmbedID(2.5, 3), TypeError, "EmbedID: in_size"),
    ("EmbedID out '3'", lambda: L.EmbedID(2, "3"), TypeError, "EmbedID: out_size"),
    ("Linear too large", lambda: L.Linear(10**9, in_size=10**9), MemoryError, "Linear: weights of shape"),
    ("EmbedID too large", lambda: L.EmbedID(10**9, 10**9), MemoryError, "EmbedID: weights of shape"),
    ("BatchNorm 0-d", lambda: L.BatchNorm()(np.array(1.0)), ValueError, "BatchNorm: x must be"),
    ("BatchNorm 1-d", lambda: L.BatchNorm()(np.ones(3)), ValueError, "BatchNorm: x must be"),
    ("BatchNorm 3-d", lambda: L.BatchNorm()(np.ones((2, 3, 4))), ValueError, "BatchNorm: x must be"),
    # what is called later must be callable now
    ("MLP activation 'relu'", lambda: models.MLP((3,), activation="relu"), TypeError, "MLP: activation"),
    ("MLP activation None", lambda: models.MLP((3,), activation=None), TypeError, "MLP: activation"),
    ("MLP no layer", lambda: models.MLP(()), ValueError, "MLP: fc_output_sizes"),
    ("add_hook 3", lambda: optimizers.SGD().add_hook(3), TypeError, "SGD.add_hook: f"),
    ("add_hook 'clip'", lambda: optimizers.Adam().add_hook("clip"), TypeError, "Adam.add_hook: f"),
    ("Spiral transform 3", lambda: datasets.Spiral(transform=3), TypeError, "Spiral: transform"),
    ("Spiral target_transform 'x'", lambda: datasets.Spiral(target_transform="x"), TypeError, "Spiral: target_transform"),
    # a dataset is read one integer index at a time
    ("Spiral['a']", lambda: datasets.Spiral()["a"], TypeError, "Spiral: index"),
    ("Spiral[1.5]", lambda: datasets.Spiral()[1.5], TypeError, "Spiral: index"),
    ("Spiral[True]", lambda: datasets.Spiral()[True], TypeError, "Spiral: index"),
    ("Spiral[None]", lambda: datasets.Spiral()[None], TypeError, "Spiral: index"),
    ("Spiral[10**6]", lambda: datasets.Spiral()[10**6], IndexError, "Spiral: index 1000000"),
    ("Spiral[-301]", lambda: datasets.Spiral()[-301], IndexError, "Spiral: index -301"),
    ("SeqDataLoader more parts than samples", lambda: SeqDataLoader(datasets.SinCurve(), 10**6), ValueError, "SeqDataLoader: batch_size"),
    ("show_digits 1-d", lambda: datasets.show_digits(np.ones(5)), ValueError, "show_digits: images"),
    ("show_digits no image", lambda: datasets.show_digits(np.ones((0, 28, 28))), ValueError, "show_digits: images"),
    ("show_digits row 0", lambda: datasets.show_digits(np.ones((3, 28, 28)), row=0), ValueError, "show_digits: row"),
    ("get_file ''", lambda: datasets.get_file(""), ValueError, "get_file: url"),
    ("get_file None", lambda: datasets.get_file(None), ValueError, "get_file: url"),
    ("get_file url ending in /", lambda: datasets.get_file("https://example.invalid/data/"), ValueError, "get_file: the cached file"),
    ("get_file file_name '..'", lambda: datasets.get_file("https://example.invalid/x", ".."), ValueError, "get_file: the cached file"),
    ("get_file file_name with a folder", lambda: datasets.get_file("https://example.invalid/x", "../../etc/x"), ValueError, "get_file: the cached file"),
    # numbers that poison a result
    ("clip x_min nan", lambda: F.clip(V(3), float("nan"), 1.0), ValueError, "clip: x_min is nan"),
    ("clip x_max array with nan", lambda: F.clip(V(3), 0.0, np.array([1.0, np.nan, 1.0])), ValueError, "clip: x_max is nan"),
    ("clip x_max 'a'", lambda: F.clip(V(3), 0.0, "a"), TypeError, "clip: x_max"),
    ("numerical_grad eps 'a'", lambda: utils.numerical_grad(F.sin, np.ones(2), eps="a"), TypeError, "numerical_grad: eps"),
    ("numerical_grad eps 0", lambda: utils.numerical_grad(F.sin, np.ones(2), eps=0), ValueError, "numerical_grad: eps"),
    ("get_dot_graph 3", lambda: utils.get_dot_graph(3), TypeError, "get_dot_graph: output"),
    ("get_dot_graph ndarray", lambda: utils.get_dot_graph(np.ones(2)), TypeError, "get_dot_graph: output"),
    # a Variable of something other than numbers: refused when made, not at its first operation
    ("Variable of str", lambda: dz.Variable(np.array(["a"])), TypeError, "Variable: data must be numbers (bool, int, float or complex), got an array of <U1"),
    ("Variable of objects", lambda: dz.Variable(np.array([object()])), TypeError, "got an array of object; convert it first"),
    ("Variable of numbers as objects", lambda: dz.Variable(np.array([1.0, 2.0], dtype=object)), TypeError, "x.astype(np.float64)"),
    ("Variable of datetime64", lambda: dz.Variable(np.array(["2026-01-01"], dtype="datetime64[D]")), TypeError, "got an array of datetime64[D]"),
    ("Variable of timedelta64", lambda: dz.Variable(np.array([1], dtype="timedelta64[s]")), TypeError, "got an array of timedelta64[s]"),
    ("Variable of bytes", lambda: dz.Variable(np.array([b"a"])), TypeError, "got an array of |S1"),
    ("Parameter of str", lambda: dz.Parameter(np.array(["a"])), TypeError, "Variable: data must be numbers"),
    ("as_variable of str", lambda: dz.as_variable(np.array(["a"])), TypeError, "Variable: data must be numbers"),
]


@pytest.mark.parametrize("case, call, error, named", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_one_clear_error_naming_the_function(case, call, error, named,
                                                              monkeypatch, tmp_path):
    monkeypatch.setenv("DEZERO_MINI_DATA", str(tmp_path))  # get_file never writes elsewhere
    with pytest.raises(error) as raised:
        call()
    message = str(raised.value)
    assert named in message and "\n" not in message.strip(), message


#: What still works as before, beside the refusals above.
STILL_WORKS = [
    ("conv2d stride (1, 2)", lambda: F.conv2d(V(1, 1, 5, 5), V(1, 1, 3, 3), stride=(1, 2)).shape == (1, 1, 3, 2)),
    ("Conv2d kernel (3, 1)", lambda: L.Conv2d(2, (3, 1), in_channels=1).W.shape == (2, 1, 3, 1)),
    ("Spiral[np.int64(3)]", lambda: datasets.Spiral()[np.int64(3)][0].shape == (2,)),
    ("Spiral[-1]", lambda: datasets.Spiral()[-1][0].shape == (2,)),
    ("SeqDataLoader as many parts as samples", lambda: len(list(SeqDataLoader(datasets.SinCurve(), 999))) >= 1),
    ("clip with None", lambda: float(F.clip(dz.Variable(np.array([5.0])), None, 1.0).data[0]) == 1.0),
    ("clip with arrays", lambda: list(F.clip(V(2), np.zeros(2), np.array([0.5, 2.0])).data) == [0.5, 1.0]),
    ("MLP with F.relu", lambda: models.MLP((3, 2), activation=F.relu)(np.ones((1, 2))).shape == (1, 2)),
    ("BatchNorm 4-d", lambda: L.BatchNorm()(np.ones((2, 3, 4, 4))).shape == (2, 3, 4, 4)),
    ("add_hook WeightDecay", lambda: optimizers.SGD().add_hook(optimizers.WeightDecay(1e-4)) is None),
    ("Variable of bools, ints, floats, complex", lambda: all(
        dz.Variable(np.array([1], dtype)).requires_grad for dtype in (bool, np.uint8, np.int64, np.float32, complex))),
    ("Variable of None", lambda: dz.Variable(None).data is None),
]


@pytest.mark.parametrize("case, call", STILL_WORKS, ids=[c[0] for c in STILL_WORKS])
def test_what_is_right_still_works(case, call):
    assert call()
