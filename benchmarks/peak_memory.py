"""How much memory does one step of an MLP, a CNN and an LSTM take,
dezero_mini next to PyTorch?

Prints figures; it is not a test. Run:

    .venv/bin/python benchmarks/peak_memory.py             # 3 fresh processes per case
    .venv/bin/python benchmarks/peak_memory.py --repeats 5 --networks cnn

The networks, float32:

- mlp: 784-4096-4096-10 with ReLU on a batch of 512 (an 8 MiB activation per
  hidden layer, 76.4 MiB of weights);
- cnn: two 3x3 convolutions of 32 and 64 channels (padding 1), each followed
  by ReLU and 2x2 max-pooling, then a linear layer to 10 classes, on a batch
  of 64 images of 28x28 (the second convolution's im2col array would be
  13.8 MiB);
- lstm: one LSTM layer of 256 (input 256) over 35 steps of a batch of 32,
  the loss the sum of squares of the last hidden state (PyTorch's
  ``nn.LSTM``; dezero_mini's ``layers.LSTM`` step by step).

Each case runs in a fresh process, so that one case's freed memory (kept by
the allocator, never returned to the system) cannot lower or raise the next
one's figure:

- train: forward, loss, backward, SGD update, from cleared gradients
  (``cleargrads``, ``zero_grad(set_to_none=True)``), so the step makes the
  weights' gradients, as every training step does;
- infer (mlp): forward under ``no_grad``, then the predicted classes;
- planned (mlp): the same inference through stage 09's plan
  (``dezero_mini.planning.plan_inference``): traced and planned once, its
  arrays allocated once and reused by every call. Its figure is what the
  plan's arrays hold plus the peak of a call above them, so that memory
  allocated before the step is not hidden.

What is measured is the process's peak resident memory (Linux's ``VmHWM``)
above what it held just before the step: set-up (the weights, the data, a
warm-up step that makes the allocator and BLAS ready) does not count,
because writing ``5`` to ``/proc/self/clear_refs`` resets the peak to the
current size right before the step. This is RSS, the signal the operating
system kills a process on: page-granular and allocator-dependent (see the
chapter "How we measure"). Both frameworks run with the same allocator
setting, printed in the header: by default glibc's
``MALLOC_MMAP_THRESHOLD_=65536``, so that every array of 64 KiB or more is
mapped and unmapped by itself and resident memory follows the live arrays
(``--mmap-threshold 0`` leaves glibc's adaptive default, under which the
figures depend on the order in which blocks come and go). The figures are
per-case medians over fresh processes.

PyTorch is optional (a CPU build is enough); without it only dezero_mini's
figures are printed. The "lower bound" is memory that any execution of the
step must hold at one moment beyond set-up, counted as: the weights'
gradients (which all exist when backward ends) plus what backward must read
(see ``lower_bounds``).
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
from dezero_mini.machine import describe

# One BLAS thread for both frameworks: the comparison is of memory, and thread
# pools allocate per-thread buffers of their own. Read when numpy loads.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SIZES = (784, 4096, 4096, 10)  # mlp
BATCH = 512
CNN_BATCH, CNN_SIDE, CNN_CHANNELS, CNN_CLASSES = 64, 28, (1, 32, 64), 10
LSTM_BATCH, LSTM_STEPS, LSTM_HIDDEN = 32, 35, 256
MIB = 1024 * 1024
FLOAT32 = 4
# (network, step) in the order printed
CASES = (("mlp", "train"), ("mlp", "infer"), ("mlp", "planned"), ("cnn", "train"),
         ("lstm", "train"))


def status_kib(field):
    """A field of /proc/self/status (VmRSS, VmHWM) in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def trim_heap():
    """Give freed heap memory back to the system (glibc's malloc_trim), so
    that the step starts from what is really held."""
    gc.collect()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: nothing to trim with
        pass


def measure_step(step):
    """Run ``step()`` and return the peak RSS above the start, in bytes."""
    trim_heap()
    before = status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # VmHWM := VmRSS: the peak from here on
    step()
    return (status_kib("VmHWM") - before) * 1024


def batches(network):
    """The same inputs and targets for both frameworks, as NumPy arrays."""
    import numpy as np

    rng = np.random.RandomState(0)
    if network == "mlp":
        return rng.rand(BATCH, SIZES[0]).astype(np.float32), rng.randint(0, SIZES[-1], BATCH)
    if network == "cnn":
        x = rng.rand(CNN_BATCH, CNN_CHANNELS[0], CNN_SIDE, CNN_SIDE).astype(np.float32)
        return x, rng.randint(0, CNN_CLASSES, CNN_BATCH)
    return rng.rand(LSTM_STEPS, LSTM_BATCH, LSTM_HIDDEN).astype(np.float32), None


# --- One case per framework: set-up, then a step to measure ----------------------------
def dezero_mini_case(network, mode):
    sys.path.insert(0, ROOT)
    import dezero_mini as dz
    import dezero_mini.functions as F
    import dezero_mini.layers as L
    from dezero_mini.models import MLP, Model

    x, t = batches(network)
    if network == "mlp":
        model = MLP(SIZES[1:], activation=F.relu)  # DeZero's MLP, as users write it
        loss_of = lambda: F.softmax_cross_entropy(model(x), t)  # noqa: E731
    elif network == "cnn":
        class CNN(Model):
            def __init__(self):
                super().__init__()
                self.conv1 = L.Conv2d(CNN_CHANNELS[1], 3, pad=1)
                self.conv2 = L.Conv2d(CNN_CHANNELS[2], 3, pad=1)
                self.fc = L.Linear(CNN_CLASSES)

            def forward(self, x):
                x = F.pooling(F.relu(self.conv1(x)), 2, 2)
                x = F.pooling(F.relu(self.conv2(x)), 2, 2)
                return self.fc(F.reshape(x, (len(x), -1)))

        model = CNN()
        loss_of = lambda: F.softmax_cross_entropy(model(x), t)  # noqa: E731
    else:
        model = L.LSTM(LSTM_HIDDEN, in_size=LSTM_HIDDEN)

        def loss_of():
            model.reset_state()
            for step_input in x:
                h = model(step_input)
            return F.sum(h * h)

    optimizer = dz.optimizers.SGD(lr=0.01).setup(model)

    def train_step():
        loss = loss_of()
        loss.backward()
        optimizer.update()

    def infer_step():
        with dz.no_grad():
            model(x).data.argmax(axis=1)

    if mode == "planned":
        return planned_case(model, x, infer_step)
    return (train_step, model.cleargrads) if mode == "train" else (infer_step, None)


def planned_case(model, x, infer_step):
    """The planned inference step, and what its preallocated arrays hold."""
    from dezero_mini.planning import plan_inference

    infer_step()  # the weights are made by the first call (Linear's in_size is inferred)
    trim_heap()
    before = status_kib("VmRSS")
    run = plan_inference(model, x)
    run(x)  # the plan's pages are touched by the first run
    trim_heap()
    held = (status_kib("VmRSS") - before) * 1024

    def planned_step():
        run(x).argmax(axis=1)

    return planned_step, None, held


def torch_case(network, mode):
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, t = (None if a is None else torch.from_numpy(a) for a in batches(network))
    if network == "mlp":
        layers = []
        for m, n in zip(SIZES[:-1], SIZES[1:]):
            layers += [nn.Linear(m, n), nn.ReLU()]
        model = nn.Sequential(*layers[:-1])
        loss_of = lambda: nn.functional.cross_entropy(model(x), t)  # noqa: E731
    elif network == "cnn":
        _, c1, c2 = CNN_CHANNELS
        model = nn.Sequential(
            nn.Conv2d(CNN_CHANNELS[0], c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(c2 * (CNN_SIDE // 4) ** 2, CNN_CLASSES))
        loss_of = lambda: nn.functional.cross_entropy(model(x), t)  # noqa: E731
    else:
        model = nn.LSTM(LSTM_HIDDEN, LSTM_HIDDEN)

        def loss_of():
            h = model(x)[1][0][-1]
            return (h * h).sum()

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step():
        loss = loss_of()
        loss.backward()
        optimizer.step()

    def infer_step():
        with torch.no_grad():
            model(x).argmax(dim=1)

    def clear_gradients():
        optimizer.zero_grad(set_to_none=True)

    return (train_step, clear_gradients) if mode == "train" else (infer_step, None)


FRAMEWORKS = {"dezero_mini": dezero_mini_case, "torch": torch_case}


def run_child(framework, network, mode):
    step, clear_gradients, *held = FRAMEWORKS[framework](network, mode)
    step()  # warm-up: BLAS buffers, allocator pools, lazy set-up
    if clear_gradients is not None:
        clear_gradients()  # the measured step makes the gradients, as every step does
    print(json.dumps({"peak_bytes": measure_step(step) + sum(held)}))


def lower_bounds():
    """The least memory a step needs beyond set-up, per (network, step), in bytes.

    Training: the weights' gradients (all alive when backward ends) plus what
    backward must read, counted at the end of the forward pass: the input of
    every layer with weights (but the batch, which is set-up), and one byte
    per element for every ReLU and max-pooling (where the gradient goes)."""
    f = FLOAT32
    # mlp. Inference: a layer's input and output alive together (the batch
    # itself is set-up), the largest such pair. Training: the last gradient
    # made, the first layer's dW = x.T @ g, needs g (batch x first hidden
    # width) while every other gradient is already there.
    activation = [BATCH * n * f for n in SIZES]
    mlp_infer = max(activation[i] + activation[i + 1] for i in range(1, len(SIZES) - 1))
    mlp_gradients = sum((m + 1) * n * f for m, n in zip(SIZES[:-1], SIZES[1:]))
    # cnn
    c0, c1, c2 = CNN_CHANNELS
    side, half, quarter = CNN_SIDE, CNN_SIDE // 2, CNN_SIDE // 4
    cnn_gradients = (c1 * (c0 * 9 + 1) + c2 * (c1 * 9 + 1)
                     + (c2 * quarter ** 2 + 1) * CNN_CLASSES) * f
    cnn_read = CNN_BATCH * (c1 * half ** 2 * f + c2 * quarter ** 2 * f  # conv2's and fc's inputs
                            + c1 * side ** 2 + c2 * half ** 2  # ReLU masks
                            + c1 * half ** 2 + c2 * quarter ** 2)  # pooling's maxima
    # lstm: per step, the previous h (the input of the h-to-gate weights; the
    # step's x is set-up), the previous c and the four gates.
    hidden = LSTM_HIDDEN
    lstm_gradients = 4 * (2 * hidden * hidden + hidden) * f
    lstm_read = LSTM_STEPS * 6 * LSTM_BATCH * hidden * f
    return {("mlp", "train"): mlp_gradients + activation[1], ("mlp", "infer"): mlp_infer,
            ("mlp", "planned"): mlp_infer, ("cnn", "train"): cnn_gradients + cnn_read,
            ("lstm", "train"): lstm_gradients + lstm_read}


def have(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def versions():
    """The machine, the date and the versions the figures come from."""
    import datetime
    import platform

    import numpy

    parts = [f"Python {platform.python_version()}", f"NumPy {numpy.__version__}"]
    if have("torch"):
        import torch
        parts.append(f"PyTorch {torch.__version__}")
    cpu = platform.processor() or platform.machine()
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu}, "
            f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; " + ", ".join(parts))


def child_environment(mmap_threshold):
    env = dict(os.environ)
    if mmap_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(mmap_threshold)
    else:
        env.pop("MALLOC_MMAP_THRESHOLD_", None)
    return env


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per case")
    parser.add_argument("--networks", nargs="+", choices=("mlp", "cnn", "lstm"),
                        default=("mlp", "cnn", "lstm"))
    parser.add_argument("--mmap-threshold", type=int, default=65536,
                        help="glibc's MALLOC_MMAP_THRESHOLD_ for both frameworks "
                             "(0: glibc's adaptive default)")
    parser.add_argument("--child", nargs=3, metavar=("FRAMEWORK", "NETWORK", "MODE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(describe())  # where and when these figures were measured
    if args.child:
        return run_child(*args.child)
    if not os.path.exists("/proc/self/clear_refs"):
        sys.exit("peak_memory.py: needs Linux's /proc/self/clear_refs to reset the peak")

    frameworks = (["torch"] if have("torch") else []) + ["dezero_mini"]
    if "torch" not in frameworks:
        print("PyTorch is not installed: only dezero_mini is measured "
              "(install a CPU build to compare).")
    env = child_environment(args.mmap_threshold)
    allocator = (f"MALLOC_MMAP_THRESHOLD_={args.mmap_threshold}" if args.mmap_threshold
                 else "glibc's adaptive mmap threshold")
    bounds = lower_bounds()
    print(versions())
    print(f"Peak RSS above the start of one step, median of {args.repeats} fresh processes "
          f"(MiB), {allocator} for both")
    print(f"{'network':<8} {'step':<8} {'framework':<12} {'median':>8} {'min':>8} {'max':>8} "
          f"{'/ torch':>8} {'/ bound':>8}")
    torch_infer = None
    for network, mode in CASES:
        if network not in args.networks:
            continue
        torch_median = None
        for framework in frameworks if mode != "planned" else ["dezero_mini"]:
            peaks = []
            for _ in range(args.repeats):
                out = subprocess.run([sys.executable, __file__, "--child", framework, network,
                                      mode], capture_output=True, text=True, check=True,
                                     env=env).stdout
                peaks.append(json.loads(out.splitlines()[-1])["peak_bytes"])
            median = statistics.median(peaks)
            if framework == "torch":
                torch_median = median
            elif mode == "planned":
                torch_median = torch_infer
            versus = f"{median / torch_median:8.2f}" if torch_median else f"{'':>8}"
            print(f"{network:<8} {mode:<8} {framework:<12} {median / MIB:8.1f} "
                  f"{min(peaks) / MIB:8.1f} {max(peaks) / MIB:8.1f} {versus} "
                  f"{median / bounds[network, mode]:8.2f}")
        if mode == "infer":
            torch_infer = torch_median
        print(f"{network:<8} {mode:<8} {'lower bound':<12} {bounds[network, mode] / MIB:8.1f}")


if __name__ == "__main__":
    main()
