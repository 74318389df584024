"""How much memory does one step of a big MLP take, dezero_mini next to PyTorch?

Prints figures; it is not a test. Run:

    .venv/bin/python benchmarks/peak_memory.py             # 3 fresh processes per case
    .venv/bin/python benchmarks/peak_memory.py --repeats 5

The network is an MLP 784-4096-4096-10 with ReLU, float32, on a batch of 512
(an 8 MiB activation per hidden layer, 76.4 MiB of weights). Each case runs in a
fresh process, so that one case's freed memory (kept by the allocator, never
returned to the system) cannot lower or raise the next one's figure:

- train: forward, softmax cross-entropy, backward, SGD update, from
  cleared gradients (``cleargrads``, ``zero_grad(set_to_none=True)``), so the
  step makes the weights' gradients, as every training step does;
- infer: forward under ``no_grad``, then the predicted classes;
- planned: the same inference through stage 09's plan
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
chapter "How we measure"), so the figures are per-case medians over fresh
processes and what to compare is their ratios, not the last MiB.

PyTorch is optional (a CPU build is enough); without it only dezero_mini's
figures are printed. The "lower bound" is memory that any execution of the
step must hold at one moment beyond set-up: for inference, the input and the
output of the 4096-4096 layer; for training, the weights' gradients (which all
exist when backward ends) plus the gradient of the first hidden layer's
output, from which the last of them is computed.
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
SIZES = (784, 4096, 4096, 10)
BATCH = 512
MIB = 1024 * 1024
FLOAT32 = 4


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


# --- One case per framework: set-up, then a step to measure ----------------------------
def dezero_mini_case(mode):
    sys.path.insert(0, ROOT)
    import numpy as np

    import dezero_mini as dz
    import dezero_mini.functions as F
    from dezero_mini.models import MLP

    rng = np.random.RandomState(0)
    model = MLP(SIZES[1:], activation=F.relu)  # DeZero's MLP, as users write it
    x = rng.rand(BATCH, SIZES[0]).astype(np.float32)
    t = rng.randint(0, SIZES[-1], size=BATCH)
    optimizer = dz.optimizers.SGD(lr=0.01).setup(model)

    def train_step():
        loss = F.softmax_cross_entropy(model(x), t)
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


def torch_case(mode):
    import numpy as np
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for m, n in zip(SIZES[:-1], SIZES[1:]):
        layers += [torch.nn.Linear(m, n), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    rng = np.random.RandomState(0)
    x = torch.from_numpy(rng.rand(BATCH, SIZES[0]).astype(np.float32))
    t = torch.from_numpy(rng.randint(0, SIZES[-1], size=BATCH))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step():
        loss = torch.nn.functional.cross_entropy(model(x), t)
        loss.backward()
        optimizer.step()

    def infer_step():
        with torch.no_grad():
            model(x).argmax(dim=1)

    def clear_gradients():
        optimizer.zero_grad(set_to_none=True)

    return (train_step, clear_gradients) if mode == "train" else (infer_step, None)


CASES = {"dezero_mini": dezero_mini_case, "torch": torch_case}


def run_child(framework, mode):
    step, clear_gradients, *held = CASES[framework](mode)
    step()  # warm-up: BLAS buffers, allocator pools, lazy set-up
    if clear_gradients is not None:
        clear_gradients()  # the measured step makes the gradients, as every step does
    print(json.dumps({"peak_bytes": measure_step(step) + sum(held)}))


def lower_bounds():
    """The least memory a step needs beyond set-up (see the module docstring)."""
    activation = [BATCH * n * FLOAT32 for n in SIZES]
    # Inference: a layer's input and output alive together (the batch itself
    # is set-up), the largest such pair.
    infer = max(activation[i] + activation[i + 1] for i in range(1, len(SIZES) - 1))
    gradients = sum((m + 1) * n * FLOAT32 for m, n in zip(SIZES[:-1], SIZES[1:]))
    # Training: the last gradient made, the first layer's dW = x.T @ g, needs g
    # (batch x first hidden width) while every other gradient is already there.
    train = gradients + activation[1]
    return {"train": train, "infer": infer, "planned": infer}


def have(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per case")
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "MODE"),
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
    bounds = lower_bounds()
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32; peak RSS above the "
          f"start of the step, median of {args.repeats} fresh processes (MiB)")
    print(f"{'step':<6} {'framework':<12} {'median':>8} {'min':>8} {'max':>8} "
          f"{'/ torch':>8} {'/ bound':>8}")
    torch_medians = {}
    for mode in ("train", "infer", "planned"):
        medians = {}
        for framework in frameworks if mode != "planned" else ["dezero_mini"]:
            peaks = []
            for _ in range(args.repeats):
                out = subprocess.run([sys.executable, __file__, "--child", framework, mode],
                                     capture_output=True, text=True, check=True).stdout
                peaks.append(json.loads(out.splitlines()[-1])["peak_bytes"])
            medians[framework] = statistics.median(peaks)
            if framework == "torch":
                torch_medians[mode] = medians[framework]
            torch_figure = torch_medians.get(mode if mode != "planned" else "infer")
            versus = f"{medians[framework] / torch_figure:8.2f}" if torch_figure else f"{'':>8}"
            print(f"{mode:<6} {framework:<12} {medians[framework] / MIB:8.1f} "
                  f"{min(peaks) / MIB:8.1f} {max(peaks) / MIB:8.1f} {versus} "
                  f"{medians[framework] / bounds[mode]:8.2f}")
        print(f"{mode:<6} {'lower bound':<12} {bounds[mode] / MIB:8.1f}")


if __name__ == "__main__":
    main()
