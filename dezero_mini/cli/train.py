"""The ``train`` command of the command line: data, model, loop and report.

The loop is DeZero's classic one (``model(x)``, a loss, ``cleargrads``,
``backward``, ``optimizer.update()``), with one thing to notice: a batch
returns plain floats, never the loss Variable. Keeping ``loss`` (or adding
it up, ``total_loss += loss``) would keep that batch's whole graph alive,
and the live-object count that it shows each epoch would grow instead of
staying flat.
"""
import argparse
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
# NumPy loads numpy.random on first use; loaded now, its ~600 KiB of module
# objects are not counted as traced memory of the data and the training.
import numpy.random  # noqa: F401

import dezero_mini
import dezero_mini.functions as F
from dezero_mini import DataLoader, no_grad, optimizers, test_mode
from dezero_mini.arguments import (output_file, positive_float, positive_int, seed_int,
                                   whole_number)
from dezero_mini.cli.guard import format_size, machine_memory
from dezero_mini.cli.options import command_parser, refuse_to_overwrite_inputs
from dezero_mini.datasets import MNIST, MNISTSample, SinCurve, Spiral
from dezero_mini.memory import count_live_objects
from dezero_mini.memory.probes import tracing
from dezero_mini.memory.refgraph import format_bytes
from dezero_mini.models import MLP
from dezero_mini.progress import progress_bar

ACTIVATIONS = {"relu": F.relu, "sigmoid": F.sigmoid, "tanh": F.tanh}
OPTIMIZERS = {
    "sgd": optimizers.SGD,
    "momentum": optimizers.MomentumSGD,
    "adagrad": optimizers.AdaGrad,
    "adam": optimizers.Adam,
}
# Learning rates for the default network (30,30 relu, 100 epochs, batches of
# 30). Training accuracy reached on the spiral, measured over seeds 0-19 for
# adam (the default) and 0-9 for the others: adam 98.0-99.3%, adagrad 99.3%,
# momentum 95.3-99.0%, sgd 93.7-99.0% (plain SGD is the slowest to get there).
DEFAULT_LR = {"sgd": 0.3, "momentum": 0.1, "adagrad": 0.1, "adam": 0.01}
#: The most --epochs: 100 times the largest default (spiral's 100). The
#: memory the command shows is flat after the first epoch; longer is a typo.
MAX_EPOCHS = 10_000


@dataclass(frozen=True)
class Task:
    """A dataset and how to learn it.

    inputs: the width of one sample (784 pixels for MNIST).
    outputs: the width of the last layer (classes, or 1 for regression).
    classify: softmax cross-entropy and accuracy when True, mean squared
        error alone when False.
    epochs, batch_size: the defaults for this dataset.
    """

    name: str
    inputs: int
    outputs: int
    classify: bool
    epochs: int
    batch_size: int

    def loss(self, y, t):
        """The loss Variable of the scores ``y`` against the targets ``t``."""
        return F.softmax_cross_entropy(y, t) if self.classify else F.mean_squared_error(y, t)

    def hits(self, y, t):
        """How many rows of ``y`` are right (None for regression)."""
        return round(float(F.accuracy(y, t).data) * len(t)) if self.classify else None


# mnist-sample, the default: 5 epochs of the 4,000 training digits take 2.5-4.5 s
# (one BLAS thread, a busy 2-core machine) and reach 95-97% on them, 90-93% on
# the 1,000 test digits (seeds 0 and 1, 30,30 relu, adam 0.01).
TASKS = {
    "mnist-sample": Task("mnist-sample", inputs=784, outputs=10, classify=True, epochs=5,
                         batch_size=100),
    "spiral": Task("spiral", inputs=2, outputs=3, classify=True, epochs=100, batch_size=30),
    "sincurve": Task("sincurve", inputs=1, outputs=1, classify=False, epochs=100,
                     batch_size=30),
    "mnist": Task("mnist", inputs=784, outputs=10, classify=True, epochs=3, batch_size=100),
}

# Bytes per weight while training, float32: the weight and its gradient, the
# optimizer's state (arrays of the weight's shape: Adam 2, momentum and
# AdaGrad 1, SGD none) and about three temporaries of the same shape while
# backward and the update run; at initialisation, NumPy's float64 random
# draw, its scaled copy and the float32 result (20 bytes) are alive at once.
FLOAT32_BYTES = 4
OPTIMIZER_STATE = {"sgd": 0, "momentum": 1, "adagrad": 1, "adam": 2}
TEMPORARIES = 3
INIT_BYTES_PER_WEIGHT = 20
# Per activation value of a batch: the layer's output, the activation's
# output and their gradients, kept or made during backward.
ARRAYS_PER_ACTIVATION = 4


def training_bytes(task, hidden, optimizer, batch_size, samples):
    """An estimate of the peak bytes of training an MLP (``hidden`` widths)
    on ``samples`` samples: weights with their gradients, optimizer state and
    temporaries, and the activations of one batch."""
    widths = (task.inputs, *hidden, task.outputs)
    weights = sum(fan_in * fan_out + fan_out for fan_in, fan_out in zip(widths, widths[1:]))
    per_weight = max(FLOAT32_BYTES * (2 + OPTIMIZER_STATE[optimizer] + TEMPORARIES),
                     INIT_BYTES_PER_WEIGHT)
    rows = min(batch_size, samples)
    activations = rows * sum(widths[1:]) * FLOAT32_BYTES * ARRAYS_PER_ACTIVATION
    return weights * per_weight + activations


def too_big_message(task, hidden, optimizer, batch_size, samples, available):
    """None when training fits in ``available`` bytes; else the message that
    says how much it needs and the widest layer that would fit."""
    needed = training_bytes(task, hidden, optimizer, batch_size, samples)
    if needed <= available:
        return None
    widest = max(range(len(hidden)), key=lambda i: hidden[i])

    def with_width(width):
        return training_bytes(task, hidden[:widest] + (width,) + hidden[widest + 1:], optimizer,
                              batch_size, samples)

    base, per_unit = with_width(0), with_width(1) - with_width(0)  # linear in one width
    fits = max(0, int((available - base) // per_unit))
    sizes = ",".join(str(width) for width in hidden)
    advice = (f"at most {fits:,} fits in that layer with the others as given" if fits else
              "the other layers are too wide already")
    return (f"--hidden {sizes} needs about {format_size(needed)} of memory to train "
            f"(float32 weights with their gradients and {optimizer}'s state); this machine "
            f"has {format_size(available)}: {advice}")


# --- Data -------------------------------------------------------------------------------
class TrainingDiverged(ArithmeticError):
    """The loss of a batch was not a finite number (nan or inf): the weights
    have left the range of floating point, and every later batch would only
    carry the nan on. The run stops there, and nothing is saved.

    where: ``"at epoch 1, batch 2"``, or where the trained model was measured."""

    def __init__(self, loss, where, lr):
        self.loss, self.where, self.lr = loss, where, lr
        super().__init__(f"the loss became {loss} {where}")


def load_datasets(task, data_dir=None):
    """``(training set, test set or None)`` of a task.

    Raises OSError (a missing folder or file) or ValueError (a broken,
    altered or empty data file: datasets.DataFileError names the file and the
    fix) for MNIST and mnist-sample; the other datasets are made in code.
    """
    if task.name == "mnist-sample":
        return MNISTSample(train=True), MNISTSample(train=False)
    if task.name == "spiral":
        return Spiral(train=True), Spiral(train=False)
    if task.name == "sincurve":
        return SinCurve(train=True), SinCurve(train=False)
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    if not MNIST.has_files(folder, train=True):
        needed = " and ".join(MNIST.files[True])
        raise FileNotFoundError(f"{folder} must hold {needed} (gzip-compressed or not); "
                                f"they are published at {MNIST.url}")
    train_set = MNIST(train=True, data_dir=folder)
    if len(train_set) == 0:
        raise ValueError(f"the MNIST files in {folder} hold no images")
    has_test = MNIST.has_files(folder, train=False)
    return train_set, MNIST(train=False, data_dir=folder) if has_test else None


# --- Training -------------------------------------------------------------------------
def train_batch(model, optimizer, task, x, t):
    """One step of gradient descent on a batch; returns ``(loss, hits)`` as
    plain numbers, so that the batch's graph is freed when this returns."""
    y = model(x)
    loss = task.loss(y, t)
    model.cleargrads()
    loss.backward()
    optimizer.update()
    return float(loss.data), task.hits(y, t)


def evaluate(model, task, dataset, batch_size):
    """``(mean loss, accuracy or None)`` of ``model`` on a whole dataset, in
    test mode and under ``no_grad()``: no graph is built."""
    totals = Totals()
    with test_mode(), no_grad():
        for x, t in DataLoader(dataset, batch_size, shuffle=False):
            y = model(x)
            totals.add(float(task.loss(y, t).data), task.hits(y, t), len(x))
    return totals.loss, totals.accuracy


class Totals:
    """Running mean loss and accuracy over batches, weighted by batch size."""

    def __init__(self):
        self.loss_sum, self.hits, self.samples, self.batches = 0.0, 0, 0, 0
        self.classify = False

    def add(self, loss, hits, size):
        """Count one batch: its mean loss, its right answers (None: regression), its size."""
        self.loss_sum += loss * size
        self.samples += size
        self.batches += 1
        if hits is not None:
            self.hits += hits
            self.classify = True

    @property
    def loss(self):
        return self.loss_sum / self.samples

    @property
    def accuracy(self):
        return self.hits / self.samples if self.classify else None

    def text(self):
        """``loss 0.1234  acc  95.0%`` (no accuracy for regression)."""
        text = f"loss {self.loss:.4f}"
        return text + f"  acc {self.accuracy:6.1%}" if self.classify else text


# The bar of train on a terminal: short (no counts, no rate), so that the epoch's loss,
# accuracy and memory fit beside it on 80 columns.
TRAIN_BAR = "{desc} |{bar:8}| {remaining} left{postfix}"


def memory_text():
    """The memory now, short enough for a progress bar: ``live`` Variables
    and Functions of the framework, and the bytes ``traced`` by tracemalloc."""
    live = count_live_objects(dezero_mini)["total"]
    current, _ = tracemalloc.get_traced_memory()
    return f"live {live}  traced {format_bytes(current)}"


def train(task, train_set, test_set=None, *, epochs=None, batch_size=None, hidden=(30, 30),
          activation="relu", optimizer="adam", lr=None, seed=0, save=None, stream=None):
    """Train an MLP on ``train_set`` and report on ``stream`` (default stdout).

    epochs, batch_size, lr: None for the defaults of the task and optimizer.
    save: a ``.npz`` path for the trained weights, or None.
    Returns a dict of the results: ``loss`` and ``accuracy`` (None for
    regression) of the trained model on the whole training set, the same
    for the test set (``test_loss``, ``test_accuracy``; None without one),
    ``seconds`` (the training loop), ``peak_traced`` (bytes), and the
    counts that the summary prints.
    """
    stream = stream if stream is not None else sys.stdout
    epochs = epochs or task.epochs
    batch_size = batch_size or task.batch_size
    lr = lr or DEFAULT_LR[optimizer]
    np.random.seed(seed)  # the initial weights and the order of the batches
    model = MLP((*hidden, task.outputs), activation=ACTIVATIONS[activation])
    updater = OPTIMIZERS[optimizer](lr).setup(model)
    loader = DataLoader(train_set, batch_size)
    sizes = "-".join(str(n) for n in (*hidden, task.outputs))
    print(f"training an MLP {sizes} ({activation}) on {task.name}: {len(train_set)} samples, "
          f"{loader.max_iter} batches of up to {batch_size} per epoch; {optimizer}, lr {lr}, "
          f"random seed {seed}", file=stream)
    print("memory: live = framework Variables+Functions alive; "
          "traced = bytes held by Python and NumPy (tracemalloc)", file=stream)
    # On a terminal, a bar of the batches with the running epoch's loss and the memory; in
    # a pipe or a log, a plain line per epoch instead (progress_bar draws nothing there).
    bar = progress_bar(epochs * loader.max_iter, f"epoch 1/{epochs}", stream=stream,
                       report=stream, unit="batch", leave=True, bar_format=TRAIN_BAR)
    # Overflow and invalid values are not warned about, from lines of the
    # framework that are not the user's fault: a loss that is not finite
    # stops the run instead, with the batch and the learning rate.
    with tracing(), np.errstate(over="ignore", invalid="ignore"):
        started = time.perf_counter()
        memory = memory_text()
        with bar:
            for epoch in range(1, epochs + 1):
                totals = Totals()
                head = f"epoch {epoch:>{len(str(epochs))}}/{epochs}"
                bar.set_description_str(head, refresh=False)
                for x, t in loader:
                    loss, hits = train_batch(model, updater, task, x, t)
                    if not np.isfinite(loss):
                        where = f"at epoch {epoch}, batch {totals.batches + 1}"
                        raise TrainingDiverged(loss, where, lr)
                    totals.add(loss, hits, len(x))
                    if not bar.disable:
                        bar.set_postfix_str(_bar_text(totals, memory), refresh=False)
                        bar.update(1)
                # The memory is measured once an epoch (counting the live objects walks
                # the collector's lists): flat from one epoch to the next.
                memory = memory_text()
                if bar.disable:
                    print(_progress_text(head, totals, loader.max_iter, memory), file=stream,
                          flush=True)
                else:
                    bar.set_postfix_str(_bar_text(totals, memory))
        results = {"seconds": time.perf_counter() - started, "epochs": epochs,
                   "batches": epochs * loader.max_iter, "samples": len(train_set),
                   "test_samples": len(test_set) if test_set is not None else None,
                   "live_at_end": count_live_objects(dezero_mini)["total"],
                   "parameters": len(list(model.params())),
                   "gradients": sum(p.grad is not None for p in model.params())}
        results["loss"], results["accuracy"] = evaluate(model, task, train_set, batch_size)
        if not np.isfinite(results["loss"]):  # the last update sent the weights out of range
            raise TrainingDiverged(results["loss"], "on the training set after the last batch",
                                   lr)
        results["test_loss"] = results["test_accuracy"] = None
        if test_set is not None:
            results["test_loss"], results["test_accuracy"] = evaluate(model, task, test_set,
                                                                      batch_size)
        results["peak_traced"] = tracemalloc.get_traced_memory()[1]
    print_summary(results, stream)
    if save is not None:
        written = model.save_weights(save)
        print(f"saved the weights to {written}", file=stream)
    return results


def print_summary(results, stream):
    """The end of a training run: time, how well the model does, memory."""
    print(f"finished {results['epochs']} epochs ({results['batches']} batches) "
          f"in {results['seconds']:.1f} s", file=stream)
    print(f"training set: {_result_text(results['loss'], results['accuracy'])} "
          f"(the trained model on all {results['samples']} samples)", file=stream)
    if results["test_samples"] is not None:
        print(f"test set:     {_result_text(results['test_loss'], results['test_accuracy'])} "
              f"({results['test_samples']} samples it never trained on)", file=stream)
    print(f"memory: peak {format_bytes(results['peak_traced'])} traced (tracemalloc); "
          f"{results['live_at_end']} Variables+Functions alive after training: the model's "
          f"{results['parameters']} Parameters and {results['gradients']} gradients",
          file=stream)


def _progress_text(head, totals, batches_per_epoch, memory):
    """The line of a finished epoch where no bar is drawn: ``epoch  3/100  batch 10/10
    loss 0.1234  acc  95.0%  live 12  traced 45.6 KiB``."""
    width = len(str(batches_per_epoch))
    return (f"{head}  batch {totals.batches:>{width}}/{batches_per_epoch}  "
            f"{totals.text()}  {memory}")


def _bar_text(totals, memory):
    """The end of the bar, single-spaced to fit 80 columns with it:
    ``loss 0.0684 acc 98.7% live 12 traced 1.3 MiB``."""
    return " ".join(f"{totals.text()} {memory}".split())


def _result_text(loss, accuracy):
    text = f"loss {loss:.4f}"
    return text if accuracy is None else text + f", accuracy {accuracy:.1%}"


# --- The command line -------------------------------------------------------------
def layer_sizes(text):
    """Hidden layer widths separated by commas: ``"10"`` or ``"30,30"``."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdecimal() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(
            f"must be one or more widths above 0 separated by commas, like 10 or 30,30; "
            f"got {text!r}")
    return tuple(int(part) for part in parts)


def _defaults_text(defaults, field=None):
    """``default: 0.3 for sgd, 0.01 for adam``: a default that depends on a choice."""
    values = {name: getattr(value, field) if field else value for name, value in defaults.items()}
    return "default: " + ", ".join(f"{value} for {name}" for name, value in values.items())


def add_parser(commands):
    """Add ``train`` to the command line's ``commands``."""
    parser = command_parser(commands, "train", "train a small network and watch its memory", (
        "Train a multi-layer perceptron with dezero_mini and show, epoch by epoch,\n"
        "the loss, the accuracy and the memory: how many Variables and Functions\n"
        "are alive, and the bytes that Python and NumPy hold (tracemalloc).\n"
        "Both stay flat: each batch's graph is freed once the batch is done.\n\n"
        "examples:\n"
        "  %(prog)s\n"
        "  %(prog)s --dataset spiral --hidden 10 --activation sigmoid --optimizer sgd --epochs 300\n"
        "  %(prog)s --dataset mnist --data-dir ~/mnist --save mnist.npz"))
    parser.add_argument("--dataset", choices=list(TASKS), default="mnist-sample", help=(
        "mnist-sample: 5,000 real MNIST digits (4,000 to train, 1,000 to test) shipped "
        "with dezero_mini (read offline, checked by its SHA-256); "
        "spiral: 300 points in 3 classes (made in code); sincurve: predict the next value "
        "of a noisy sine wave (regression); mnist: the full MNIST, read from "
        "--data-dir (never downloaded). Default: %(default)s."))
    parser.add_argument("--data-dir", type=Path, metavar="DIR", help=(
        "for --dataset mnist: the folder with train-images-idx3-ubyte.gz and "
        "train-labels-idx1-ubyte.gz (and, to measure the test accuracy, the t10k- files); "
        "the names without .gz work too"))
    parser.add_argument("--epochs", type=whole_number(1, MAX_EPOCHS), metavar="N", help=(
        f"passes over the training set, at most {MAX_EPOCHS:,} "
        f"({_defaults_text(TASKS, 'epochs')})"))
    parser.add_argument("--batch-size", type=positive_int, metavar="N", help=(
        f"samples per batch; more than the training set is the whole set in one batch "
        f"({_defaults_text(TASKS, 'batch_size')})"))
    parser.add_argument("--hidden", type=layer_sizes, default="30,30", metavar="SIZES", help=(
        "widths of the hidden layers, separated by commas (default: %(default)s)"))
    parser.add_argument("--activation", choices=list(ACTIVATIONS), default="relu", help=(
        "the function between layers (default: %(default)s)"))
    parser.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam", help=(
        "how the weights are updated (default: %(default)s)"))
    # No upper bound: a rate too large is stopped at the first loss that is not
    # finite, in one line that names it and the default (diverged_message).
    parser.add_argument("--lr", type=positive_float, help=(
        f"learning rate ({_defaults_text(DEFAULT_LR)})"))
    parser.add_argument("--seed", type=seed_int, default=0, metavar="N", help=(
        "seeds the initial weights and the order of the batches: the same seed gives "
        "the same run (default: %(default)s)"))
    parser.add_argument("--save", type=output_file(".npz"), metavar="PATH.npz", help=(
        "write the trained weights to this file (model.load_weights reads it); never a file "
        "of --data-dir"))
    parser.set_defaults(run=run_train, parser=parser)


def run_train(args):
    """``train``: check the options that depend on each other, then train."""
    if args.dataset == "mnist" and args.data_dir is None:
        args.parser.error("--dataset mnist needs --data-dir: the folder that holds the MNIST "
                          "files (this command never downloads anything)")
    if args.dataset != "mnist" and args.data_dir is not None:
        args.parser.error(f"--data-dir is only used with --dataset mnist, not {args.dataset}")
    data_files = (list(args.data_dir.iterdir())
                  if args.data_dir is not None and args.data_dir.is_dir() else [])
    refuse_to_overwrite_inputs(args, [("--save", args.save)], [
        ("a file of --data-dir", path) for path in data_files])
    task = TASKS[args.dataset]
    # Traced from before the data is loaded, so that the peak includes it.
    with tracing():
        try:
            train_set, test_set = load_datasets(task, args.data_dir)
        except (OSError, ValueError) as error:  # missing, unreadable, broken or altered files
            option = "--data-dir" if args.data_dir is not None else f"--dataset {task.name}"
            args.parser.error(f"{option}: {error}")
        if args.batch_size is not None and args.batch_size > len(train_set):
            print(f"{args.parser.prog}: note: --batch-size {args.batch_size} is more than the "
                  f"{len(train_set):,} training samples; one batch of {len(train_set):,} per epoch",
                  file=sys.stderr)
            args.batch_size = len(train_set)
        memory = machine_memory()
        batch_size = args.batch_size or task.batch_size
        too_big = memory and too_big_message(task, args.hidden, args.optimizer, batch_size,
                                              len(train_set), memory)
        if too_big:
            args.parser.error(too_big)
        if test_set is None:
            print(f"no test set: {args.data_dir} has no t10k- files, so only the training "
                  "set is measured")
        try:
            train(task, train_set, test_set, epochs=args.epochs, batch_size=args.batch_size,
                  hidden=args.hidden, activation=args.activation, optimizer=args.optimizer,
                  lr=args.lr, seed=args.seed, save=args.save)
        except TrainingDiverged as diverged:
            print(f"{args.parser.prog}: error: {diverged_message(diverged, args)}",
                  file=sys.stderr)
            return 1
    return 0


def diverged_message(diverged, args):
    """What to say when the loss stopped being a number, and what to try."""
    default = DEFAULT_LR[args.optimizer]
    if args.lr is not None and args.lr > default:
        advice = (f"(--lr {args.lr:g}): the learning rate is too large; try the default "
                  f"({default:g} for {args.optimizer})")
    else:
        advice = (f"(lr {diverged.lr:g}, {args.optimizer}): try a smaller --lr, or another "
                  "--optimizer")
    return f"{diverged} {advice}; no weights were saved" if args.save else f"{diverged} {advice}"
