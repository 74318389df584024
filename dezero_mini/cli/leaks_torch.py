"""``leaks`` on a PyTorch script: what grows at each training step, and what holds it.

Usage::

    python -m dezero_mini leaks train.py --epochs 2          # verdict, exit 1 on a leak
    python -m dezero_mini leaks --steps 50 train.py          # judge 50 training steps
    python -m dezero_mini leaks --plot memory.png train.py   # and draw what was counted

A script that imports ``torch`` (itself or through a module of its own
folder) is run here (``--framework torch`` forces it). At each training step
(an optimizer step; else a round of the loop that calls ``backward``) the
process's tensors with and without a graph, their bytes, the autograd nodes
that outlived their step, and resident memory are counted
(:mod:`dezero_mini.memory.torch_leaks`). A loop whose graphs outlive their
steps at almost every step is a leak, named when the tensors can be
followed back to a holder (a global, an attribute, a buffer, a list, a dict,
a closure, a default argument, a saved traceback), with the line that stores
into it, the bytes kept per step and the fix; a leak without a name is
reported with what grows. Tensors without a graph that grow (a cache of
detached values) are named but are not a leak of graphs.

The verdict comes first; a script that failed has its own error shown
after it. Exit status: the script's own when it failed (1 for an exception,
N for ``sys.exit(N)``), else 1 for a leak and 0 when nothing grows (also
after ``os._exit(0)``); 2 when it cannot be run. With ``--plot FILE`` (``.png``, ``.svg`` or
``.pdf``) the counts are drawn, step by step, into FILE (written whole or
not at all).
"""
import sys
import traceback

from dezero_mini.memory.refgraph import format_bytes

HEADER = "=== dezero_mini leaks (PyTorch)"
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


#: The fix of each holder kind, with the holder's ``{path}`` and, for a
#: cache, its ``{function}``.
FIXES = {
    "cache": "cache numbers (`.item()`) or detached tensors (`.detach()`), or call "
             "`{function}.cache_clear()` once a result is used: an lru_cache keeps every result "
             "it returned, each with its graph",
    "hook": "keep the handle that `register_..._hook` returns and call `handle.remove()` once "
            "the hook has run, or register the hook once, before the loop: every hook stays "
            "in {path}, with whatever it refers to, and runs at every forward or backward",
    "warning": "warn with text (`f\"{{loss.item():.4f}}\"`), not a tensor: a recorded warning "
               "keeps its message and the message its arguments, in {path} until it goes",
    "finalize": "`weakref.finalize(obj, fn, *args)` keeps `args` alive until `obj` dies "
                "(and {path} keeps every finalizer not yet called): pass numbers (`.item()`) "
                "or detached tensors (`.detach()`) as its arguments, or call the finalizer "
                "(or its `.detach()`) once it is no longer needed",
    "atexit": "`atexit.register(fn, *args)` keeps `fn` and `args` until the interpreter "
              "exits: register once, before the loop, with numbers (`.item()`) or detached "
              "tensors (`.detach()`), or `atexit.unregister(fn)` what is no longer needed",
    "signal": "install the handler once, before the loop, and let it read what it shows "
              "from a number kept up to date (`last_loss = loss.item()`), not bind the step's "
              "tensor: {path} lives until it is replaced, and a handler that keeps the one "
              "it replaced keeps every earlier one with its tensors",
    "log": "log numbers (`loss.item()`), not tensors: a LogRecord keeps its arguments until "
           "it is formatted, and {path} keeps its records until it is flushed",
    "node": "keep numbers or detached tensors taken from `ctx`, not `ctx` itself: the ctx of "
            "a custom autograd.Function is the node of its call's graph and keeps what it "
            "saved and the graph behind it",
    "grad": "after `backward(create_graph=True)`, set the gradients to None "
            "(`optimizer.zero_grad(set_to_none=True)`; zeroing `.grad.data` keeps the graph), "
            "or take them with `torch.autograd.grad(..., create_graph=True)`: a `.grad` with a "
            "graph adds every step's graph to {path}",
    "cpp": "look for what keeps it from C++: a hook registered on an autograd node at every "
           "step (keep its handle and call `handle.remove()`), a graph kept with its saved "
           "tensors (`.detach()` what outlives the step)",
    "key": "key {path} by a number (the step, an index) or a string, not by the tensor: a "
           "tensor hashes by its identity, and a key keeps its tensor with its graph",
    "contextvar": "set numbers (`.item()`) or detached tensors into the ContextVar {path}, or "
                  "reset it (`token = {path}.set(value)` ... `{path}.reset(token)`): the "
                  "running context keeps its value",
    "exception": "keep `traceback.format_exc()` (a string), not the exception, its traceback "
                 "or `sys.exc_info()`: their frames keep every local of the step alive",
    "buffer": "update {path} under `torch.no_grad()` (or store `.detach()`ed values): an "
              "update outside it chains every step's graph onto the buffer or parameter",
    "default": "store `.detach()` (or `.item()`) in {path}, not the tensor: a default "
               "argument lives as long as its function",
    "closure": "store `.detach()` (or `.item()`) in {path}, not the tensor: a closure lives "
               "as long as its function",
    "container": "store numbers (`.item()`) or detached tensors (`.detach()`) in {path}, not "
                 "the tensors themselves, or compute what needs no gradient under "
                 "`torch.no_grad()`",
    "scalar": "add up a Python number: `{path} += loss.item()` (or `.item()` of whatever is "
              "added), or `{path} = {path}.detach()`",
    "attribute": "keep `value.detach()` in {path}, or compute it under `torch.no_grad()` if "
                 "no gradient must flow through it",
    "name": "{path} feeds the next step with its whole history: `{path} = {path}.detach()` at "
            "the start of each step (each window of truncated backpropagation), or compute it "
            "under `torch.no_grad()` if no gradient must flow through it",
}


#: What a holder's size counts, by kind (an lru_cache's: results).
SIZE_UNITS = {"hook": "{n} hooks now",
              "finalize": "{n} finalizers of its function not yet called"}


def fix_for(holder):
    """The fix that fits a ``Holder``: its kind's (a 0-d tensor held by a
    name or an attribute is added up: ``.item()``)."""
    kind = holder.kind
    if holder.scalar and kind in ("attribute", "name"):
        kind = "scalar"
    function = holder.path.rpartition(" of ")[2].rstrip("()")  # "the lru_cache of predict()"
    return FIXES.get(kind, FIXES["name"]).format(path=holder.path, function=function)


def _per_step(value, unit=""):
    sign = "+" if value >= 0 else "-"
    if unit == "bytes":
        return f"{sign}{format_bytes(round(abs(value)))}"
    return f"{sign}{round(abs(value), 1):g}"


def _by_device(per_device):
    """``+64 B (cpu)``; ``+1 MiB (cuda:0 1 MiB, cpu 64 B)`` over devices."""
    total = sum(per_device.values())
    if len(per_device) <= 1:
        return f"{_per_step(total, 'bytes')} ({next(iter(per_device), 'cpu')})"
    parts = ", ".join(f"{device} {format_bytes(round(value))}" for device, value in
                      sorted(per_device.items(), key=lambda item: -item[1]))
    return f"{_per_step(total, 'bytes')} ({parts})"


def _held_bytes(finding):
    return f"{_by_device(finding.held_per_step)} of tensors with a graph that the holder keeps"


def _saved_bytes(finding):
    """What the graphs saved for backward besides the tensors held, and why it
    may be nothing: backward frees what a node saved, unless retain_graph."""
    text = f"{_by_device(finding.saved_per_step)} saved for backward by their graphs besides"
    if finding.freed_nodes and not sum(finding.saved_per_step.values()):
        text += (f" (backward freed what {finding.freed_nodes} of their "
                 f"{finding.window_nodes} nodes saved)")
    return text


def _holder_lines(finding, what, fixes=False):
    """A line per holder of ``finding``: its path, root and links, the lines
    that store into it and, with ``fixes``, the fix of its kind."""
    lines = []
    for holder in finding.holders:
        root = holder.root
        if holder.held_by:  # a suspended generator or coroutine: what holds it
            root += f", held by {holder.held_by}"
        if holder.size is not None:  # of a cache, a hook dict, the finalizers
            root += "; " + SIZE_UNITS.get(holder.kind, "{n} results now").format(n=holder.size)
        lines.append(f"{holder.path} ({root}) {what}: {holder.links}")
        for file_name, line, code in holder.lines:
            lines.append(f"  stored at {file_name}:{line}: {code}")
        if fixes:
            lines.append(f"  fix: {fix_for(holder)}")
    return lines


def report_lines(finding, script_name, how):
    """The report of ``finding`` as lines; the verdict is 1 for a leak, else 0."""
    series, growth = finding.series, finding.growth
    if series is None or growth is None:
        made = 0 if series is None else len(series.counts)
        return [f"{HEADER}: {script_name} made {made} training steps; leaks needs at least 5 "
                "(2 of warm-up, 3 to compare) to judge ===",
                "not judged: no optimizer step, and no loop of the script that calls backward() "
                "went round often enough" if made == 0 else
                "not judged: too few steps (run more, or give --steps)"], 0
    last = series.counts[-1]
    # (the first step starts the watch: it is never counted)
    counted = ("" if len(series.counts) >= series.steps - 1 else
               f", {len(series.counts)} counted")
    lines = [f"{HEADER}: {script_name} {how} after {series.steps} of {series.name}{counted} ==="]
    if growth.leaking:
        if finding.holders:
            lines += _holder_lines(finding, "keeps the graphs of earlier steps", fixes=True)
        else:
            lines.append(f"no Python name holds the growing graph: {finding.tensors} tensors "
                         f"with a graph reach {finding.nodes} autograd nodes of earlier steps; "
                         + (finding.unnamed or "the search could not name what holds them"))
        lines.append(
            f"growth per {series.unit}: {_per_step(growth.nodes)} autograd nodes that outlive "
            f"their step ({finding.nodes} kept), {_held_bytes(finding)}, "
            f"{_saved_bytes(finding)}, {_per_step(growth.graph_tensors)} tensors with a graph"
            + (f", {_per_step(growth.rss, 'bytes')} resident memory" if growth.rss is not None
               else ""))
        return lines + _device_line(series), 1
    if growth.hooks_pile_up:
        lines.append(f"no graph outlives its step, but hooks pile up: "
                     f"{_per_step(growth.hooks)} per {series.unit} registered and never removed "
                     f"({last.hooks - series.counts[0].hooks} more at the last count than at the first; "
                     "each one runs at every forward or backward, so every step is slower "
                     "than the last)")
        lines += _holder_lines(finding, "holds them", fixes=True) or [
            "  fix: " + FIXES["hook"].format(path="the hook dicts of the model")]
        return lines + _device_line(series), 1
    if growth.detached_cache:
        lines.append(f"no graph outlives its step; tensors without a graph grow: "
                     f"{_per_step(growth.plain_tensors)} per {series.unit} "
                     f"({_per_step(growth.plain_bytes, 'bytes')}), {last.plain_tensors} now "
                     "(a cache of detached values: fine if it is meant to grow, else bound it)")
        lines += _holder_lines(finding, "holds them")
        return lines + _device_line(series), 0
    lines.append(f"nothing outlives its step: no autograd node or tensor with a graph grows "
                 f"across {series.unit}s (at the last: {last.nodes} nodes reachable, "
                 f"{last.graph_tensors} tensors with a graph, {last.plain_tensors} without)")
    return lines + _device_line(series), 0


def _device_line(series):
    first, last = series.counts[0].device, series.counts[-1].device
    if last is None:
        return []
    return [f"device memory allocated (torch.cuda.memory_allocated; UNTESTED: no GPU has run "
            f"leaks' tests, only a faked torch.cuda): "
            f"{format_bytes(first)} at the first {series.unit}, {format_bytes(last)} at the last"]


def consecutive_within(consecutive, steps, prog):
    """``--consecutive`` for a PyTorch script: at most the steps in a row that
    ``--steps`` leaves to compare; a larger one is taken as those, with a note
    on standard error (the judgement could never compare more). None (not
    given): the default, taken down in silence."""
    from dezero_mini.memory.torch_leaks import DEFAULT_CONSECUTIVE, WARM_UP, most_consecutive

    most = most_consecutive(steps)
    if consecutive is None or consecutive <= most:
        return min(consecutive or DEFAULT_CONSECUTIVE, most)
    print(f"{prog}: note: --consecutive {consecutive} is more than the {most} steps in a row "
          f"that --steps {steps} leaves to compare (the first step starts the watch, {WARM_UP} "
          f"more warm up); comparing {most} (--steps {steps + consecutive - most} would compare "
          f"{consecutive})", file=sys.stderr)
    return most


def run_torch_leaks(args, path, source, out, prog):
    """Run the PyTorch script ``path`` (its ``source`` already read), print
    the verdict, then the script's own error; returns the exit status."""
    from dezero_mini.memory.torch_leaks import DEFAULT_STEPS

    plot = getattr(args, "plot", None)
    steps = getattr(args, "steps", DEFAULT_STEPS)
    consecutive = consecutive_within(args.consecutive, steps, prog)
    try:
        from dezero_mini.memory.torch_leaks import watch_script

        run = watch_script(path, source, args.script_args, steps=steps, consecutive=consecutive,
                           every_step=getattr(args, "every_step", False))
    except ImportError as error:
        if (error.name or "").partition(".")[0] != "torch":
            raise
        print(f"{prog}: error: {path.name} imports torch, which is not installed here. "
              "Install it (pip install torch; `make test-torch` installs a CPU build), then "
              "run leaks again", file=sys.stderr)
        return 2
    except SyntaxError:
        print(f"{prog}: error: {path.name} cannot be run:", file=sys.stderr)
        traceback.print_exc(limit=0, file=sys.stderr)
        return 2
    how = ("stopped by leaks" if run.stopped else
           "failed" if run.error is not None or run.exit_code else "finished")
    if run.cut_off:
        how = f"ended itself with os._exit({run.exit_code})"
    lines, verdict = report_lines(run.finding, path.name, how)
    if run.stopped:
        lines[0] = lines[0].replace(" ===", f" (--steps {args.steps}) ===")
    sys.stdout.flush()
    print("\n".join(lines), file=out, flush=True)
    if plot and run.series is not None and run.series.counts:
        from dezero_mini.memory.torch_plot import write_plot

        write_plot(plot, run.series, path.name)
        print(f"memory plot written to {plot}", file=out, flush=True)
    status = verdict
    if run.error is not None:
        print(f"{prog}: {path.name} stopped with an exception (the steps before it are judged "
              "above):", file=sys.stderr)
        error = run.error
        traceback.print_exception(type(error), error, error.__traceback__.tb_next,
                                  file=sys.stderr)
        status = 1
    elif run.exit_code:
        if run.exit_message:
            print(run.exit_message, file=sys.stderr)
        what = "os._exit" if run.cut_off else "sys.exit"
        print(f"{prog}: {path.name} ended with {what}({run.exit_code}) (the steps before it "
              "are judged above)", file=sys.stderr)
        status = run.exit_code
    elif run.cut_off:
        print(f"{prog}: {path.name} ended itself with os._exit(0); the steps it made are "
              "judged above", file=sys.stderr)
    return status
