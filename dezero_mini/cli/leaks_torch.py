"""``leaks`` on a PyTorch script: which names keep an autograd graph across steps.

``python -m dezero_mini leaks train.py`` runs a script that imports
``torch`` here instead of in :mod:`dezero_mini.cli.leaks` (or with
``--framework torch``). The watching and judging is
:mod:`dezero_mini.memory.torch_leaks`; this module prints the report and
chooses the exit status as for a dezero_mini script: 0 nothing grows, 1 a
name keeps a growing graph (or the script raised an error of its own, shown
with its traceback), 2 the script cannot be run at all, and the script's own
status when it ended with ``sys.exit(N)``. A script that cuts itself off
with ``os._exit`` is judged on the steps it made.
"""
import gc
import sys
import traceback

from dezero_mini.memory.refgraph import format_bytes

HEADER = "=== dezero_mini leaks (PyTorch)"


def _report(leaks, series, out):
    for leak in leaks:
        saved = (f"{format_bytes(leak.saved_bytes)} of saved tensors "
                 f"({format_bytes(max(leak.saved_bytes_per_step, 0))} more per {series.unit})"
                 if leak.saved_bytes else
                 "no saved tensors (backward freed them; the nodes stay)")
        followers = (f"\n  (and so does {', '.join(leak.followers)}, computed from it)"
                     if leak.followers else "")
        print(f"{leak.path} ({leak.where}) keeps an autograd graph of {leak.nodes} nodes, "
              f"{leak.nodes_per_step:g} more per {series.unit}, and {saved}{followers}\n"
              f"  fix: {leak.fix}", file=out)
    if series.device and series.device[-1] is not None:
        print(f"device memory allocated: {format_bytes(series.device[0])} at the first "
              f"{series.unit}, {format_bytes(series.device[-1])} at the last", file=out)


def run_torch_leaks(args, path, source, out, prog):
    """Run the PyTorch script ``path`` (its ``source`` already read) and
    judge its steps; returns the exit status."""
    try:
        from dezero_mini.memory.torch_leaks import DEFAULT_STEPS, judge, watch_script

        run = watch_script(path, source, args.script_args,
                           steps=getattr(args, "steps", DEFAULT_STEPS))
    except ImportError as error:
        if (error.name or "").partition(".")[0] != "torch":
            raise
        print(f"{prog}: error: {path.name} imports torch, which is not installed here. "
              "Install a CPU build (pip install torch --index-url "
              "https://download.pytorch.org/whl/cpu), then run leaks again", file=sys.stderr)
        return 2
    except SyntaxError:
        print(f"{prog}: error: {path.name} cannot be run:", file=sys.stderr)
        traceback.print_exc(limit=0, file=sys.stderr)
        return 2
    if run.error is not None:
        print(f"{prog}: error: {path.name} stopped with an exception:", file=sys.stderr)
        error = run.error
        traceback.print_exception(type(error), error, error.__traceback__.tb_next,
                                  file=sys.stderr)
        return 1
    if run.exit_code and not run.cut_off:
        if run.exit_message:
            print(run.exit_message, file=sys.stderr)
        print(f"{prog}: error: {path.name} ended with exit status {run.exit_code} before it "
              "could be judged", file=sys.stderr)
        return run.exit_code
    if run.cut_off:
        print(f"{prog}: {path.name} ended itself with os._exit({run.exit_code}); judging the "
              "steps it made", file=sys.stderr)

    series, consecutive = run.series, args.consecutive
    if series is None or len(series.snapshots) < consecutive + 1:
        counted = 0 if series is None else len(series.snapshots)
        print(f"{HEADER}: {path.name} made {counted} optimizer steps or loop rounds; leaks "
              f"needs {consecutive + 1} to see growth (--consecutive {consecutive}) ===",
              file=out)
        return 0
    gc.collect()
    leaks = judge(series, consecutive)
    how = "stopped by leaks" if run.stopped else "finished"
    print(f"{HEADER}: {path.name} {how} after {len(series.snapshots)} of {series.name}"
          f"{f' (--steps {args.steps})' if run.stopped else ''} ===", file=out)
    if not leaks:
        if run.cut_off and run.exit_code:
            return run.exit_code
        last = series.snapshots[-1].values()
        largest = max(last, key=lambda held: held.size.nodes, default=None)
        held = (f"; the largest graph a name holds at the end is {largest.path}'s, "
                f"{largest.size.nodes} nodes" if largest else "")
        print(f"no name keeps a growing autograd graph across {series.unit}s{held}", file=out)
        _report([], series, out)
        return 0
    _report(leaks, series, out)
    return 1
