"""dezero_mini: a small autograd framework that frees its memory.

The finished framework of the course "Where does the memory go?": every
memory fix of the course, with DeZero's public names, so that code written for
DeZero runs with ``import dezero_mini as dezero``. The memory instruments that
the notebooks use live in ``dezero_mini.memory``.
"""
from dezero_mini import startup as _startup

_startup.leave_out_current_folder()  # under `python -m dezero_mini...` only
if _startup.started_as_command():
    # `python -m dezero_mini` or the `dezero_mini` script is importing us: before
    # NumPy and the rest, a Ctrl-C, a removed current folder or a setting of the
    # environment that cannot be used become one line (dezero_mini.startup).
    _startup.prepare_command()
from dezero_mini.core import (  # noqa: F401  (the public API)
    Config,
    Function,
    Parameter,
    Variable,
    as_array,
    as_variable,
    no_grad,
    setup_variable,
    test_mode,
    using_config,
)

from dezero_mini import functions, utils  # noqa: E402, F401  (after core: they import it)

setup_variable()

# DeZero's module flag: True while its book uses the first core (steps 23-32),
# which some of its programs read. There is one core here, the full one.
is_simple_core = False

STAGE = "dezero_mini"
STAGE_TITLE = "dezero_mini (all fixes)"

# The names every stage module of the course also has, so that the memory
# instruments and the tests can treat the package as one more stage.
from dezero_mini.functions import (  # noqa: E402, F401
    add,
    broadcast_to,
    div,
    exp,
    matmul,
    mean_squared_error,
    mul,
    neg,
    pow,
    reshape,
    sigmoid,
    square,
    sub,
    sum,
    sum_to,
    tanh,
    transpose,
)

__version__ = "0.1.0"

# Layers, models, optimizers, datasets and their loader (after core and functions).
from dezero_mini import datasets, layers, models, optimizers, transforms  # noqa: E402, F401
# DeZero's CPU/GPU switch, CPU only here: dezero.cuda.get_array_module(x) code runs.
from dezero_mini import cuda  # noqa: E402, F401
from dezero_mini.dataloaders import DataLoader, SeqDataLoader  # noqa: E402, F401
from dezero_mini.layers import Layer  # noqa: E402, F401
from dezero_mini.models import Model  # noqa: E402, F401
# Keep a part of a model's inputs and recompute the rest during backward.
from dezero_mini.checkpointing import checkpoint  # noqa: E402, F401
# Plan the memory of a static graph before allocating any of it (stage 09's API).
from dezero_mini.planning import Executor, plan_memory, trace  # noqa: E402, F401
