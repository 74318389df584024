"""The ``leaks`` command: run a learner's script, say what its loop keeps alive.

``python -m dezero_mini leaks train.py --lr 0.1`` runs ``train.py`` as
``__main__`` (with those arguments in ``sys.argv``) and watches every
Variable and Function of every framework it uses (``dezero_mini`` or a stage
module of the course, imported by the script in any way).

**How the iterations of the script's loops are found.** The script does not
cooperate, and its loops come in every shape: a training loop with one
``backward()`` per batch, ``total_loss += loss`` with one backward per epoch,
an evaluation loop with no backward at all, a bare ``val += x``, a ``while``
loop, a loop inside a function of the script. What they all have is the
loop statement itself. So the command parses the script and, before
compiling it, puts one call at the top of the body of every ``for``,
``async for`` and ``while`` statement of the file (in its functions and
methods too; comprehensions are expressions, not loops of the training, and
are left alone): ``__dezero_mini_leaks_round__(k)``, k naming the loop. Each
call after a loop's first is the end of one of its iterations, and there the
command takes the live count of framework objects for that loop (the birth
numbers and the live count come from :mod:`dezero_mini.memory.tracking`).
Nested loops (epochs and batches) each have their own series. The line
numbers stay the script's own, so its tracebacks read as usual. The cost is
one Python call per iteration of the script's own loops and nothing at all
in the framework's code (births are counted by a wrapper around the
constructors, about a microsecond each, as before). What was not chosen:
``sys.settrace`` (a Python call for every function call of the whole
program, framework included, to find the script's frames) and, on 3.12+,
``sys.monitoring`` JUMP events on the script's code objects (as cheap, but
only on new Pythons, and a backward jump is not always a loop going round:
inlined comprehensions and ``await`` jump backwards too, and a ``while``
loop jumps to its body's first line, not to its head); sampling the heap on
a timer (a count taken in the middle of a batch is not comparable with the
next).

**Where the loop is not in the script.** A script that calls a training
function of another module (``trainer.fit()``, the learner's ``train.py``
imported by ``run.py``) has no loop of its own going round. There the
command falls back to the ``backward()`` calls, one per batch in every stage
of the course: a ``backward()`` that returns with no round of a loop of the
script since the previous one is counted as an iteration of the unseen loop.
A loop elsewhere that never calls backward cannot be seen, and the command
says that no loop went round.

**When it reports.** Whenever the live count has grown at N rounds of one
loop in a row (``--consecutive``, default 5), it looks at what was made
during those iterations and is still alive (after a ``gc.collect()`` when
the collector is on, so that a reference cycle waiting for it does not
count), and prints the report of :func:`dezero_mini.memory.find_leaks`:
objects and bytes per iteration, and the shortest chain from a named root to
the largest surviving graph. After that, it reports again (for any loop)
only when the live count has doubled. At the end it judges each loop the
same way over its whole run and prints the largest leak (or, when nothing
grows, the loop that went round most). Exit status: the script's own when it
fails (``sys.exit(3)``: 3; an uncaught exception: 1, with the script's
traceback; ``sys.exit("message")``: 1, with the message), else 0 when nothing
grows and 1 when something does; 2 when the script cannot be run at all
(missing, a folder, a pipe or a device, or a syntax error). A script that
ends with ``os._exit`` is judged at that call, before the process ends, so
its verdict is never lost.
"""
import argparse
import contextlib
import gc
import os
import sys
import traceback
from pathlib import Path

from dezero_mini.arguments import output_file, whole_number
from dezero_mini.atomic import not_a_file
from dezero_mini.cli.guard import EXIT_NO_VERDICT, Terminated, end_for_lost_output, silence
from dezero_mini.cli.leaks_torch import PLOT_SUFFIXES, run_torch_leaks
from dezero_mini.cli.options import command_parser, refuse_to_overwrite_inputs
from dezero_mini.memory.leaks import judge, report_between, survivors_between
from dezero_mini.memory.loop_marks import (ROUND, compile_with_loop_marks, new_main_module,
                                          script_as_main)
from dezero_mini.memory.torch_leaks import (DEFAULT_CONSECUTIVE, DEFAULT_STEPS, MIN_STEPS,
                                           imports_torch, script_modules)
from dezero_mini.memory.tracking import Tracker

UNIT = "iteration"
#: The longest streak of growth ``--consecutive`` waits for before a report:
#: a loop that has grown 1,000 iterations in a row has long shown its leak
#: (and the verdict at the end judges the whole run whatever N is); more is a typo.
MAX_CONSECUTIVE = 1000
HEADER = "=== dezero_mini leaks"
SCRIPT_FAILED = 1  # Python's exit status after an uncaught exception


class _ReportNotWritten(BaseException):
    """A report could not be written (its reader has gone, its disk is full)
    while the script was running, in the script's own frames. It is carried
    out of them as a BaseException, which the script's ``except Exception``
    does not catch, so that it is not blamed on the script, and raised again
    as its OSError outside them."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


def _print_report(out, *texts):
    """Print ``texts`` on ``out`` after what the script printed before them;
    an OSError becomes :class:`_ReportNotWritten`."""
    _flush_script_output()
    try:
        for text in texts:
            print(text, file=out)
        out.flush()
    except OSError as error:
        raise _ReportNotWritten(error) from None


def _flush_script_output():
    """Write what the script printed so far, so that a report that follows
    it on the terminal or in a file follows it there too (the reports have a
    stream of their own). The script's stdout is the script's business: an
    error there is not the command's."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()


@contextlib.contextmanager
def _report_stream():
    """The stream of the reports: a duplicate of stdout's file descriptor, so
    that a script that closes or replaces ``sys.stdout`` does not take the
    reports with it. Where stdout has no descriptor (a test's capture), stdout
    itself. When the output is gone, what the stream still holds is dropped."""
    try:
        descriptor = os.dup(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        yield sys.stdout
        return
    out = os.fdopen(descriptor, "w", buffering=1, encoding=getattr(sys.stdout, "encoding", None),
                    errors=getattr(sys.stdout, "errors", None))
    try:
        yield out
    except OSError:
        silence(out)
        raise
    finally:
        with contextlib.suppress(OSError, ValueError):
            out.close()


class _Series:
    """The iterations of one loop: the serial number and the live count at
    the end of each (``marks``, ``counts``), and the streak of growth."""

    def __init__(self, name, unit_of_mark):
        self.name = name  # "the loop at train.py:12"
        self.unit_of_mark = unit_of_mark  # how the header names an iteration
        self.rounds = 0  # calls of the mark (a loop's first call starts its first iteration)
        self.marks, self.counts = [], []
        self.streak = 0

    def add(self, serial, live):
        self.marks.append(serial)
        self.counts.append(live)
        counts = self.counts
        self.streak = self.streak + 1 if len(counts) > 1 and counts[-1] > counts[-2] else 0


class _Watch:
    """Receives the rounds of the script's loops and the backward() calls,
    follows each loop's streak of growing counts, and prints a report when
    one reaches ``consecutive``."""

    def __init__(self, consecutive, namespaces, out, script_name, loop_lines):
        self.consecutive = consecutive
        self.namespaces = namespaces  # [(the script's globals, its name)]
        self.out = out
        self.tracker = None
        self.loops = [_Series(f"the loop at {script_name}:{line}", "iteration {n}")
                      for line in loop_lines]
        self.backward = _Series("the backward() calls", "iteration {n} (backward() call {n})")
        self.rounds = 0  # of every loop of the script
        self.rounds_at_last_backward = 0
        self.reported = 0
        self.report_when_live_reach = 0

    def round(self, number):
        """A loop of the script starts an iteration: the previous one ended."""
        loop = self.loops[number]
        loop.rounds += 1
        self.rounds += 1
        if loop.rounds < 2:
            return
        tracker = self.tracker
        if loop.marks and loop.marks[-1] == tracker.serial:
            # The iteration made no framework object, so it cannot have
            # grown them: no mark (a loop over a million numbers keeps none).
            return
        loop.add(tracker.serial, len(tracker.live))
        if loop.streak >= self.consecutive:
            self._check(loop)

    def on_backward(self, tracker):
        """A backward() returned: an iteration of a loop the script does not
        show, unless a loop of the script went round since the last one."""
        seen = self.rounds != self.rounds_at_last_backward
        self.rounds_at_last_backward = self.rounds
        if seen:
            return
        series = self.backward
        series.rounds += 1
        series.add(tracker.marks[-1], tracker.counts[-1])
        if series.streak >= self.consecutive:
            self._check(series)

    def _check(self, series):
        if series.counts[-1] < self.report_when_live_reach:
            return
        if gc.isenabled():
            gc.collect()  # what the collector would free anyway is no leak
        last = len(series.marks) - 1
        report = report_between(self.tracker, last - self.consecutive, last - 1, unit=UNIT,
                                extra_namespaces=self.namespaces, series=series)
        if not report.leaking:
            series.streak = 0
            return
        self.reported += 1
        self.report_when_live_reach = 2 * series.counts[-1]
        where = series.unit_of_mark.format(n=last + 1)
        _print_report(self.out, f"{HEADER}: after {where} of {series.name}, live Variables "
                      f"and Functions have grown at each of the last {self.consecutive} ===",
                      report)

    def final(self):
        """(the series to judge at the end, its slack), or (None, None).

        A loop's last iteration is never marked (no round follows it): it is
        the slack. Each backward() call ends an iteration: the last one may
        keep its graph. Of the loops that made survivors in more than one
        iteration, the one with the most survivors; else the loop that went
        round most."""
        candidates = [(loop, 0) for loop in self.loops if len(loop.marks) >= 2]
        if len(self.backward.marks) >= 3:
            candidates.append((self.backward, 1))
        best, best_size = None, 0
        for series, slack in candidates:
            survivors, spread = survivors_between(self.tracker, series.marks, 0,
                                                  len(series.marks) - 1 - slack)
            size = len(survivors) if spread >= 2 else 0
            survivors.clear()
            if size > best_size:
                best, best_size = (series, slack), size
        if best is None and candidates:
            best = max(candidates, key=lambda c: len(c[0].marks))
        return best or (None, None)


def run_leaks(args, out=None):
    """``leaks``: run the script under watch; return 0, 1 or 2. The reports
    go to ``out``, by default a stream of their own on stdout's descriptor
    (:func:`_report_stream`); when it fails (``| head -1``, ``> /dev/full``),
    its OSError reaches the command line as any command's would."""
    if out is not None:
        return _run_leaks(args, out)
    with _report_stream() as out:
        return _run_leaks(args, out)


def _run_leaks(args, out):
    """:func:`run_leaks` with its stream. A script that imports torch is run
    by :mod:`dezero_mini.cli.leaks_torch` (which imports PyTorch only once
    such a script runs)."""
    prog = args.parser.prog if getattr(args, "parser", None) else "dezero_mini leaks"
    if args.script is None:  # (optional to argparse, which would call ARGS required too)
        message = ("the following argument is required: SCRIPT (the Python script to run; "
                   "ARGS for it may follow)")
        if getattr(args, "parser", None):
            args.parser.error(message)
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    path = Path(args.script)
    what = not_a_file(path)
    if what is not None:  # a folder, a pipe or /dev/zero would be read forever or fail
        print(f"{prog}: error: the script {args.script!r} {what}; give a Python file to run",
              file=sys.stderr)
        return 2
    framework = getattr(args, "framework", "auto")
    try:
        source = path.read_bytes()
        _refuse_outputs_over_inputs(args, path, source)
        if framework == "torch" or (framework == "auto" and imports_torch(source, path)):
            return run_torch_leaks(args, path, source, out, prog)
        code, loops = compile_with_loop_marks(source, str(path))
        if getattr(args, "plot", None) is not None:  # (drawn for PyTorch scripts only)
            print(f"{prog}: note: --plot draws the counts of a PyTorch script; "
                  f"{path.name} does not import torch, so nothing is drawn", file=sys.stderr)
    except SyntaxError:
        print(f"{prog}: error: {args.script} cannot be run:", file=sys.stderr)
        traceback.print_exc(limit=0, file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"{prog}: error: cannot read {args.script!r}: {error}", file=sys.stderr)
        return 2

    module = new_main_module(path)
    namespaces = [(module.__dict__, path.name)]
    watch = _Watch(args.consecutive or DEFAULT_CONSECUTIVE, namespaces, out, path.name,
                   [loop.line for loop in loops])
    module.__dict__[ROUND] = watch.round
    tracker = watch.tracker = Tracker(mark_on_backward=True, on_mark=watch.on_backward).start()

    def conclude(script_status):
        """Judge the run, print the verdict; the exit status of the command."""
        tracker.stop()
        leak_status = _conclude(watch, tracker, path, namespaces, out)
        return script_status or leak_status

    failure, script_status, report_error = None, 0, None
    real_exit = os._exit
    os._exit = _judge_before_os_exit(real_exit, conclude, prog, args.script)
    try:
        with script_as_main(path, module, args.script_args):
            exec(code, module.__dict__)
    except SystemExit as ended:  # the script ended itself: judge what it did
        script_status = _exit_status(ended)
    except (KeyboardInterrupt, Terminated):  # the user stopped the command: not the script's error
        raise
    except _ReportNotWritten as lost:  # our output, not the script's error
        report_error = lost.error
    except BaseException as error:  # the script's own error: show its traceback
        failure = error
    finally:
        os._exit = real_exit
        tracker.stop()
    if report_error is not None:
        raise report_error
    if failure is not None:
        # Python's own status for an uncaught exception; the run was cut short,
        # so the iterations are not judged.
        print(f"{prog}: error: {args.script} stopped with an exception:", file=sys.stderr)
        traceback.print_exception(type(failure), failure, failure.__traceback__.tb_next,
                                  file=sys.stderr)
        return SCRIPT_FAILED
    status = conclude(script_status)
    if script_status:
        print(f"{prog}: {args.script} exited with status {script_status}", file=sys.stderr)
    return status


def _refuse_outputs_over_inputs(args, path, source):
    """argparse's error (exit 2), before the script runs, when an output of
    the command (``--plot``) is, or links to, a file that it reads: the
    script, or one of its own modules (:func:`script_modules`)."""
    if getattr(args, "parser", None) is None or getattr(args, "plot", None) is None:
        return
    inputs = [("the script", path)] + [(f"the module {module.name} of the script", module)
                                       for module in script_modules(source, path)]
    refuse_to_overwrite_inputs(args, [("--plot", args.plot)], inputs)


def _exit_status(ended):
    """The status ``python SCRIPT`` would exit with after ``SystemExit``
    ``ended``; a message (``sys.exit("fatal: ...")``) is shown as Python does."""
    code = ended.code
    if code is None:
        return 0
    if isinstance(code, int):  # as the shell sees it: sys.exit(-1) is 255
        return int(code) & 0xFF
    print(code, file=sys.stderr)
    return SCRIPT_FAILED


def _judge_before_os_exit(real_exit, conclude, prog, script):
    """A stand-in for ``os._exit`` while the script runs: ``os._exit`` ends the
    process at once, with no ``finally`` and no return to this command. So the
    command judges the iterations that ran, prints the verdict, and only then
    exits, with the script's status or, when that is 0, the verdict's (a leak
    report is never followed by exit 0). A child process made by ``fork``
    exits as it asked."""
    parent = os.getpid()

    def judge_then_exit(status):
        if os.getpid() != parent:
            real_exit(status)
        try:
            sys.stdout.flush()
            print(f"{prog}: {script} called os._exit({status}): the iterations up to there "
                  "are judged now", file=sys.stderr, flush=True)
            final = conclude(status)
            sys.stdout.flush()
            sys.stderr.flush()
        except (_ReportNotWritten, OSError) as error:  # the output is gone: 141, or one line
            error = getattr(error, "error", error)
            final = end_for_lost_output(error, prog, EXIT_NO_VERDICT) or status or SCRIPT_FAILED
        except BaseException:  # the process ends now whatever happens; never with 0
            final = status or SCRIPT_FAILED
        real_exit(final)

    return judge_then_exit


def _conclude(watch, tracker, path, namespaces, out):
    """Judge the whole run and print the verdict: 1 when something grows."""
    _flush_script_output()
    if gc.isenabled():
        gc.collect()
    series, slack = watch.final()
    if series is None:
        went_round = max((loop.rounds for loop in watch.loops), default=0)
        loops = (f"no loop of {path.name} went round" if went_round < 2 else
                 f"its loops went round at most {went_round} times")
        calls = len(tracker.marks)
        backward = ("it never called backward()" if not calls else
                    f"it called backward() {calls} time{'s' if calls > 1 else ''}")
        print(f"{HEADER}: {loops}, and {backward} ===\n"
              "no iterations to compare: leaks compares the iterations of the script's loops, "
              "or its backward() calls where its loop is elsewhere", file=out)
        return 1 if watch.reported else 0
    report = judge(tracker, slack, UNIT, extra_namespaces=namespaces, series=series)
    print(f"{HEADER}: {path.name} finished after {series.rounds} iterations of "
          f"{series.name} ===", file=out)
    print(report, file=out, flush=True)
    if watch.reported and not report.leaking:
        print(f"but the growth reported above was real: {watch.reported} report"
              f"{'s' if watch.reported > 1 else ''} during the run. Its graphs were let go "
              "later (at the end of an epoch?), so the memory peak still grows with the "
              "number of iterations they were kept for", file=out, flush=True)
    return 1 if report.leaking or watch.reported else 0


def add_parser(commands):
    """Add ``leaks`` to the command line's ``commands``."""
    parser = command_parser(commands, "leaks", "find what your own training loop keeps alive", (
        "Run SCRIPT (with ARGS) as python would, and watch the Variables and\n"
        "Functions of dezero_mini or of a stage module that it makes. An\n"
        "iteration is one round of a for or while loop of the script itself\n"
        "(each loop judged on its own), or one backward() call where the loop\n"
        "is in another module. When the live objects have grown at several\n"
        "iterations in a row, and at the end, print what the\n"
        "loop keeps alive: objects and bytes per iteration, and the shortest\n"
        "chain of references from a name of the script (total_loss,\n"
        "trainer.history['loss'][3], a closure, ...) to the largest surviving graph.\n\n"
        "A script that imports torch (itself or through its own modules) is\n"
        "judged at each training step (an optimizer step, else a round of the\n"
        "loop that calls backward): the tensors with and without a graph, their\n"
        "bytes, the autograd nodes that outlive their step (PyTorch keeps a\n"
        "graph in C++ nodes, where counting Python objects cannot see it) and\n"
        "resident memory. Graphs that outlive their steps are a leak, named by\n"
        "the chain of references that holds them, the line that stores them,\n"
        "the bytes kept per step and the fix; --plot draws the counts.\n\n"
                "exit status: the script's own when it fails (1 for an exception, N for\n"
        "sys.exit(N)); else 0 nothing grows, 1 something grows; 2 the script cannot\n"
        "be run (missing, not a file, or a syntax error)\n\n"
        "examples:\n"
        "  %(prog)s train.py\n"
        "  %(prog)s --consecutive 3 train.py --epochs 2\n"
        "  %(prog)s --steps 50 --plot memory.png train_torch.py"))
    # (default None: the PyTorch side takes the default down to what --steps
    # can compare in silence, and a value that was given with a note)
    parser.add_argument("--consecutive", type=whole_number(2, MAX_CONSECUTIVE), metavar="N",
                        help=(
        "report when the live objects have grown at N iterations in a row "
        f"(default: {DEFAULT_CONSECUTIVE}, at most {MAX_CONSECUTIVE}; for a PyTorch script, at "
        "most the steps that --steps leaves after its warm-up, else taken as those with a note)"))
    parser.add_argument("--framework", choices=("auto", "dezero_mini", "torch"), default="auto",
                        help=("what the script uses: auto (the default) runs a script that "
                              "imports torch as a PyTorch script, any other as a dezero_mini one"))
    parser.add_argument("--steps", type=whole_number(MIN_STEPS), default=DEFAULT_STEPS,
                        metavar="N", help=(
        "PyTorch scripts: stop the script after N training steps (optimizer steps, else "
        "rounds of the loop that calls backward) and judge them (default: %(default)s; "
        f"at least {MIN_STEPS}: the first starts the watch, two warm up, three are compared)"))
    parser.add_argument("--every-step", action="store_true", help=(
        "PyTorch scripts: count at every training step, whatever it costs (by default a "
        "count is skipped when watching would take more than 0.3 times the script's own CPU time)"))
    parser.add_argument("--plot", type=output_file(*PLOT_SUFFIXES), metavar="FILE", help=(
        "PyTorch scripts: draw what was counted at each step (graphs kept, bytes with and "
        "without a graph, resident memory) into FILE (.png, .svg or .pdf; never SCRIPT or "
        "a module of it)"))
    # SCRIPT is checked by run_leaks: required here, argparse would say that
    # ARGS, which may be empty, is required too.
    parser.add_argument("script", nargs="?", metavar="SCRIPT", help="the Python script to run")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="arguments for the script")
    parser.set_defaults(run=run_leaks, parser=parser, explain_unrecognized=dash_named_script,
                        lost_output_status=EXIT_NO_VERDICT)


def dash_named_script(unrecognized):
    """What to say when an argument argparse did not know is a script whose
    name starts with a dash (``leaks -train.py`` reads as an option); None
    for any other argument."""
    for argument in unrecognized:
        if argument.startswith("-") and argument.lower().endswith(".py"):
            return (f"{argument!r} reads as an option; give a script whose name starts with "
                    f"a dash with its folder: ./{argument}")
    return None
