"""Argument types: the text of a command-line option turned into a checked value.

Each function takes the text that argparse read and returns the value, or
raises ``argparse.ArgumentTypeError`` with what was wrong and what is
accepted (argparse adds the option's name and exits with status 2). They
are shared by the course's command line (:mod:`dezero_mini.cli`) and the
Gradescope autograder (:mod:`dezero_mini.grading.gradescope`), which is why
they live here, below both: neither imports the other for them.
"""
import argparse
import math
from pathlib import Path

from dezero_mini.atomic import leads_to_a_file, output_target_problem
from dezero_mini.contracts import get_stage, stages
from dezero_mini.contracts.scoring import Weights, WeightsError
from dezero_mini.memory import STAGES, load_stage

#: The longest time an option takes: a larger one (1e300, say) would overflow
#: the clock's arithmetic.
MAX_SECONDS = 86400.0


# --- Numbers --------------------------------------------------------------------------
# Each number type says what it accepts in ``.accepts`` too (the words of its
# refusal), so that a test can hold every numeric option of the command line
# to one line that names the option, the value and the range.
def whole_number(low, high=None):
    """An argument type: a whole number from ``low`` to ``high`` (no upper
    bound when None). Refused in one line with the range: 0 where 1 is the
    least, a negative, one above ``high``, ``2.5``, ``nan``, ``inf``, and
    digits beyond what Python converts (``int`` refuses 4,300 of them)."""
    accepts = (f"a whole number from {low} to {high}" if high is not None
               else f"a whole number of at least {low}")

    def convert(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {accepts}, got {text!r}")
        return value

    convert.accepts = accepts
    return convert


#: A whole number of at least 1 (batches, sizes, steps).
positive_int = whole_number(1)
#: A whole number of at least 2: growth is read from one iteration (or batch)
#: to the next, so it needs two (``leaks --consecutive``, the ``--batches`` of
#: the contracts).
at_least_two = whole_number(2)
#: A seed for NumPy's random generator: a whole number from 0 to 2**32 - 1.
seed_int = whole_number(0, 2**32 - 1)


def _number(text):
    """``text`` as a float, or nan when it is no number (every range test then fails)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def number_above_zero(high=None, unit=""):
    """An argument type: a number above 0 and at most ``high`` (finite when
    None); ``unit`` (``"seconds"``) names what it counts. nan, inf and what
    is no number are refused, with the range."""
    what = f"a number of {unit}" if unit else "a number"
    accepts = (f"{what} above 0 and at most {high:g}" if high is not None
               else f"{what} above 0")

    def convert(text):
        value = _number(text)
        if not 0 < value < math.inf or (high is not None and value > high):  # and nan
            raise argparse.ArgumentTypeError(f"must be {accepts}, got {text!r}")
        return value

    convert.accepts = accepts
    return convert


#: A finite number above zero.
positive_float = number_above_zero()
#: A number of seconds above 0 and at most a day (``MAX_SECONDS``): a timeout.
seconds = number_above_zero(MAX_SECONDS, "seconds")


# --- Stages ---------------------------------------------------------------------------
def stage_number(text):
    """The number of a stage that has contracts (``check``, ``grade``, the autograder)."""
    try:
        number = int(text)
        get_stage(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be the number of a stage of the course ({known_stage_numbers()}), "
            f"got {text!r}") from None
    return number


def known_stage_numbers():
    """``1, 2, 3, ...``: the stages that have contracts, for messages and help."""
    return ", ".join(str(stage.number) for stage in stages())


#: ``1 to 10``: the stages of the course by number, for the help of ``stage_modules``.
STAGE_NUMBERS = f"{STAGES[0][0]} to {STAGES[-1][0]}" if STAGES else "none found"


def stage_modules(text):
    """One or more stages separated by commas, as modules (``"1,dezero_mini"``)."""
    modules = []
    for part in text.split(","):
        try:
            modules.append(load_stage(part.strip()))
        except ValueError as error:  # load_stage's message lists the valid stages
            raise argparse.ArgumentTypeError(str(error)) from None
    return modules


def one_stage(text):
    """Exactly one stage, as a module."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"takes one stage, got {text!r}")
    return stage_modules(text)[0]


def weights_file(text):
    """A weights file (``scoring.Weights``), read and checked; ``-``: JSON on
    standard input (how ``grade`` gives each check the weights it read once)."""
    try:
        if text == "-":
            return Weights.from_standard_input()
        return Weights.from_file(text)
    except WeightsError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# --- Files ----------------------------------------------------------------------------
def output_file(*suffixes):
    """An argument type for a file to write, as a Path: checked when the
    arguments are read, before any long run (:func:`atomic.output_target_problem`);
    its name must end in one of ``suffixes`` when any are given (kept as
    ``.output_suffixes`` of the type, for the command's own check).

    A name that leads to an existing file may be one of the command's
    inputs, which only the command knows once every argument is read: that
    one is judged there, with them (``cli.options.refuse_to_overwrite_inputs``),
    so that "which this command reads" is said rather than a lesser reason."""

    def convert(text):
        problem = output_target_problem(text, suffixes)
        if problem is not None and not leads_to_a_file(text):
            raise argparse.ArgumentTypeError(problem)
        return Path(text)

    convert.output_suffixes = suffixes
    return convert


# --- The sandbox -----------------------------------------------------------------------
def add_sandbox_option(parser, default, grading):
    """--sandbox: whether the learner's code runs in bubblewrap's sandbox
    (``check``, ``grade``, the Gradescope autograder)."""
    parser.add_argument("--sandbox", choices=("auto", "required", "off"), default=default, help=(
        "run the file in bubblewrap's sandbox (no view of the machine's processes, files, "
        "network or other submissions): 'auto' where it can run, saying in one line when it "
        "cannot; 'required' refuses to grade without it; 'off' never uses it"
        + (" (default: required, as grading should; 'auto' grades unsandboxed where "
           "bubblewrap cannot run)" if grading else
           " (default: auto; required with --gradescope)")))
