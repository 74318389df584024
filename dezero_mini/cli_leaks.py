"""The ``leaks`` command: run a learner's script, say what its loop keeps alive.

``python -m dezero_mini leaks train.py --lr 0.1`` runs ``train.py`` as
``__main__`` (with those arguments in ``sys.argv``) and watches every
Variable and Function of every framework it uses (``dezero_mini`` or a stage
module of the course, imported by the script in any way).

**How the iterations of the script's loop are found.** The script does not
cooperate, so the command needs a moment that comes once per iteration of a
training loop, and only then. It uses the calls of ``backward()``: every
training loop makes exactly one per batch, in every stage of the course (the
stage modules have no optimizer, so ``Optimizer.update`` would miss them),
and at that moment a clean loop always holds the same thing, the parameters
and the graph just built (the previous batch's graph went when the loop's
names were rebound), so the live counts of a clean loop are equal from one
call to the next, and those of a leaking loop grow. The hook is one wrapper
around ``Variable.backward`` (one Python call per batch) and one around the
constructors, which give every object a birth number for about a
microsecond each (:mod:`dezero_mini.memory.tracking`). What was not chosen:
``sys.settrace``/``sys.setprofile`` on the lines of the outermost loop (a
Python call for every line or call of the whole program, several times
slower, and "the outermost loop" is not always the training loop); sampling
the heap on a timer (a count taken in the middle of a batch is not
comparable with the next); the optimizer update (dezero_mini only). The
limit: a loop that never calls ``backward()`` (a bare ``val += x``, an
inference loop) has no iterations to compare, and the command says so.

**When it reports.** Whenever the live count has grown at N calls in a row
(``--consecutive``, default 5), it looks at what was made during those
iterations and is still alive (after a ``gc.collect()`` when the collector
is on, so that a reference cycle waiting for it does not count), and prints
the report of :func:`dezero_mini.memory.find_leaks`: objects and bytes per
iteration, and the shortest chain from a named root to the largest
surviving graph. After that, it reports again only when the live count has
doubled. At the end it judges the whole run the same way (all iterations
but the last). Exit status: 0 when nothing grows, 1 when something does, 2
when the script cannot be run (its own traceback is shown).
"""
import builtins
import gc
import sys
import traceback
import types
from pathlib import Path

from dezero_mini.memory.leaks import judge, report_between
from dezero_mini.memory.tracking import Tracker

UNIT = "iteration"
HEADER = "=== dezero_mini leaks"


class _Watch:
    """Called at every backward(): follows the streak of growing counts and
    prints a report when it reaches ``consecutive``."""

    def __init__(self, consecutive, namespaces, out):
        self.consecutive = consecutive
        self.namespaces = namespaces  # [(the script's globals, its name)]
        self.out = out
        self.streak = 0
        self.reported = 0
        self.report_when_live_reach = 0

    def __call__(self, tracker):
        counts = tracker.counts
        self.streak = self.streak + 1 if len(counts) > 1 and counts[-1] > counts[-2] else 0
        if self.streak < self.consecutive or counts[-1] < self.report_when_live_reach:
            return
        if gc.isenabled():
            gc.collect()  # what the collector would free anyway is no leak
        last = len(tracker.marks) - 1
        report = report_between(tracker, last - self.consecutive, last - 1, unit=UNIT,
                                extra_namespaces=self.namespaces)
        if not report.leaking:
            self.streak = 0
            return
        self.reported += 1
        self.report_when_live_reach = 2 * counts[-1]
        print(f"{HEADER}: at iteration {last + 1} (backward() call {last + 1}), live Variables "
              f"and Functions have grown at each of the last {self.consecutive} ===",
              file=self.out)
        print(report, file=self.out, flush=True)


def run_leaks(args, out=None):
    """``leaks``: run the script under watch; return 0, 1 or 2."""
    out = out or sys.stdout
    prog = args.parser.prog if getattr(args, "parser", None) else "dezero_mini leaks"
    path = Path(args.script)
    if not path.is_file():
        print(f"{prog}: error: no such script: {args.script!r}", file=sys.stderr)
        return 2
    try:
        code = compile(path.read_bytes(), str(path), "exec")
    except SyntaxError:
        print(f"{prog}: error: {args.script} cannot be run:", file=sys.stderr)
        traceback.print_exc(limit=0, file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"{prog}: error: cannot read {args.script!r}: {error}", file=sys.stderr)
        return 2

    module = types.ModuleType("__main__")
    module.__file__ = str(path)
    module.__builtins__ = builtins
    namespaces = [(module.__dict__, path.name)]
    watch = _Watch(args.consecutive, namespaces, out)
    saved = sys.argv, list(sys.path), sys.modules.get("__main__")
    sys.argv = [str(path), *args.script_args]
    sys.path.insert(0, str(path.resolve().parent))  # as `python SCRIPT` does
    sys.modules["__main__"] = module
    tracker = Tracker(mark_on_backward=True, on_mark=watch).start()
    failure = None
    try:
        exec(code, module.__dict__)
    except SystemExit:
        pass  # the script ended itself: judge what it did
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # the script's own error: show its traceback
        failure = error
    finally:
        tracker.stop()
        sys.argv, sys.path[:] = saved[0], saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]
        sys.stdout.flush()
    if failure is not None:
        print(f"{prog}: error: {args.script} stopped with an exception:", file=sys.stderr)
        traceback.print_exception(type(failure), failure, failure.__traceback__.tb_next,
                                  file=sys.stderr)
        return 2

    if not tracker.marks:
        print(f"{HEADER}: {path.name} never called backward() ===\n"
              "no training iteration to compare: leaks counts the iterations of a loop by its "
              "backward() calls", file=out)
        return 0
    if gc.isenabled():
        gc.collect()
    report = judge(tracker, 1, UNIT, extra_namespaces=namespaces)
    print(f"{HEADER}: {path.name} finished after {len(tracker.marks)} iterations "
          "(backward() calls) ===", file=out)
    print(report, file=out, flush=True)
    return 1 if report.leaking or watch.reported else 0
