"""Stage 06, free_graph: backward lets go of the graph as it goes.

Every contract here measures a property of backward, so each one holds on
every later stage and on ``dezero_mini`` too (which is held to its own
numbers rather than stage 05's: its formulas are not the snapshots').
"""
import inspect
import weakref

import numpy as np

from dezero_mini.contracts import Measurement, Stage
from dezero_mini.contracts.bench import KIB, array
from dezero_mini.memory.probes import collector
from dezero_mini.memory.refgraph import _attributes, format_bytes, watch
from dezero_mini.memory.stages import load_stage
from dezero_mini.memory.timeline import record_step_timeline
from dezero_mini.memory.true_types import is_instance
from dezero_mini.memory.workload import Workload

STAGE = Stage(
    number=6,
    name="free_graph",
    title="free_graph",
    idea=("backward(retain_graph=False), the default as in PyTorch: each Function lets go "
          "of what it saved for its backward as soon as its own backward has run, so the "
          "activations are freed while backward still runs. A second backward through a "
          "freed graph is a clear error."),
    change=("Give Variable.backward a parameter retain_graph=False. Unless it is True, "
            "each Function forgets its inputs once its backward has passed the gradients "
            "on. Parameters and the inputs the user holds keep their data and gradients. "
            "A backward that reaches a Function which has forgotten its inputs raises "
            "RuntimeError saying that the graph was freed and how to keep it "
            "(retain_graph=True)."),
    needs=("square",),
)

#: The activations of one batch of the standard workload (its input, two
#: hidden layers of two arrays each, the output and the target) come to
#: well over this; a framework that frees them during backward saves at least it.
ACTIVATIONS = 400 * KIB
#: From stage 08 on a Function keeps only what its backward reads: the same
#: batch's graph holds about 200 KiB, well over this.
KEPT_ACTIVATIONS = 150 * KIB


def activations_floor(module):
    """The bytes that one batch's graph of the standard workload holds at
    least, on ``module``'s stage (less from stage 08 on)."""
    from dezero_mini.contracts import stage_number_of

    return ACTIVATIONS if stage_number_of(module) < 8 else KEPT_ACTIVATIONS


def settled_timeline(module, **backward_kwargs):
    """``record_step_timeline`` of one batch, after a first run that is thrown
    away: the first run on a module allocates a few KiB once (first-time
    caches) that stay, and would make that module look better than a
    module measured after it."""
    record_step_timeline(module, count_objects=False, **backward_kwargs)
    return record_step_timeline(module, count_objects=False, **backward_kwargs)


def _probe_class(module, seen):
    """A Function that passes its input through and, when its backward runs,
    appends to ``seen`` which of the Variables watched in ``seen[0]`` are
    still alive."""

    class Probe(module.Function):
        def forward(self, x):
            return x.copy()

        def backward(self, gy):
            seen.append({name: ref() is not None for name, ref in seen[0].items()})
            return gy

    return Probe


def intermediates_alive_at_the_last_backward(module):
    """``loss = sum(square(exp(probe(x))))``, holding only ``x`` and the loss:
    which of exp's and square's outputs are alive when the probe's backward
    (the last one) runs, and whether ``x`` got its gradient. Stage 05 keeps
    both alive; a framework that frees during backward, neither."""
    seen = [{}]
    with collector(False):
        x = module.Variable(np.linspace(-1.0, 1.0, 1000))
        h = module.exp(_probe_class(module, seen)()(x))
        s = module.square(h)
        seen[0].update(h=weakref.ref(h), s=weakref.ref(s))
        loss = module.sum(s)
        del h, s  # the user holds only x and the loss
        loss.backward()
        has_grad = x.grad is not None
        del loss
    alive = seen[1] if len(seen) > 1 else None
    return alive, has_grad


@STAGE.contract(hint="""
    Once a Function's backward has run, nothing will read what it kept for it again
    (unless the user asked to keep the graph). Whatever it still holds keeps those
    activations alive until the user drops the loss.""")
def frees_saved_inputs_during_backward(module):
    """When the first Function's backward runs, the later activations are already freed."""
    alive, has_grad = intermediates_alive_at_the_last_backward(module)
    still = [name for name, is_alive in (alive or {}).items() if is_alive]
    problems = (["the probe's backward never ran"] if alive is None else
                [f"still alive: {', '.join(still)}"] if still else [])
    if not has_grad:
        problems.append("x.grad is None")
    return Measurement.from_problems(
        problems,
        expected="exp's and square's outputs freed before the first op's backward; x.grad set")


def freed_during_backward(module):
    """Bytes of the arrays that backward frees on the standard workload: every
    Variable of one batch's graph but the parameters (which the model holds),
    and the arrays that its Functions saved for backward (stage 08), each
    array counted once."""
    workload = Workload(module)
    parameters = {id(p.data) for p in workload.parameters}
    loss = workload.loss(0)  # held while we look
    held = {}
    for obj in watch(loss).alive():
        if hasattr(obj, "creator"):
            arrays = [obj.data]
        else:  # a Function: the arrays among its attributes (none before stage 08)
            arrays = [value for _, value in _attributes(obj) if is_instance(value, np.ndarray)]
        held.update((id(a), a.nbytes) for a in arrays if id(a) not in parameters)
    return sum(held.values())


@STAGE.contract(hint="""
    When backward returns, the user still holds the loss, and through it the graph.
    What must be left of a batch then is the parameters and their gradients: are the
    activations still reachable from the loss?""")
def holds_less_than_stage05_after_backward(module):
    """When backward returns, at least the activations' bytes less are held than on stage 05."""
    before = settled_timeline(load_stage(5)).after_backward
    after = settled_timeline(module).after_backward
    freed = freed_during_backward(module)
    floor = activations_floor(module)
    return Measurement(
        passed=freed > floor and after <= before - freed,
        expected=f"<= {format_bytes(before - freed)} (stage 05's {format_bytes(before)} "
                 f"less the {format_bytes(freed)} of the batch's graph, > "
                 f"{format_bytes(floor)})",
        measured=format_bytes(after))


@STAGE.contract(hint="""
    The peak falls only if an activation goes while backward is still running: as
    soon as the last Function that reads it has run its backward, not at the end.""")
def backward_peak_below_stage05(module):
    """The backward peak is below stage 05's, and from the third op of backward on every sample is.

    The samples from the third op on must also add up to at least 400 KiB
    less than stage 05's: a run of the same stage measures a fraction of a
    KiB lower each time it is repeated (first-time allocations that stay),
    which "lower" alone would count as a saving.
    """
    before, after = settled_timeline(load_stage(5)), settled_timeline(module)
    b05 = [e.traced for e in before.events if e.phase == "backward"]
    b06 = [e.traced for e in after.events if e.phase == "backward"]
    higher = sum(late >= early for early, late in zip(b05[3:], b06[3:]))
    saved = sum(early - late for early, late in zip(b05[3:], b06[3:]))
    problems = []
    if after.backward_peak >= before.backward_peak:
        problems.append(f"peak {format_bytes(after.backward_peak)}")
    if len(b05) != len(b06):
        problems.append(f"{len(b06)} samples in backward, stage 05 has {len(b05)}")
    else:
        if higher:
            problems.append(f"{higher} of {len(b05) - 3} samples from the third op on not lower")
        if saved < ACTIVATIONS:
            problems.append(f"together {format_bytes(saved)} lower")
    return Measurement.from_problems(
        problems,
        expected=f"peak < stage 05's {format_bytes(before.backward_peak)}; lower at every "
                 f"sample from the third op of backward on, by >= {format_bytes(ACTIVATIONS)} "
                 "together",
        otherwise=f"peak {format_bytes(after.backward_peak)}, lower at every sample, by "
                  f"{format_bytes(saved)} together")


def _second_backward_error(loss, again):
    """Run ``again()`` (a second backward through ``loss``'s freed graph) and
    say what was wrong with what it did, or None when it raised as it must."""
    try:
        again()
    except RuntimeError as error:
        message = str(error)
        missing = [word for word in ("retain_graph=True", "backward", "freed")
                   if word not in message]
        if missing:
            return f"RuntimeError without {', '.join(repr(w) for w in missing)}: {message!r}"
        return None
    except Exception as error:  # any other exception is not the clear error asked for
        return f"{type(error).__name__}: {error}"
    return "no error"


@STAGE.contract(hint="""
    Going through a freed graph again cannot give the right gradients. Fail loudly,
    at the first Function that has let go of what its backward needs, and say what
    happened and how to keep the graph.""")
def second_backward_is_a_clear_error(module):
    """A second backward through a freed graph raises RuntimeError saying it was freed and naming retain_graph=True."""
    x = module.Variable(np.array([1.0, 2.0]))
    loss = module.sum(module.mul(module.exp(x), x))
    loss.backward()
    same_loss = _second_backward_error(loss, loss.backward)

    x = module.Variable(np.array([0.5, 1.5]))
    h = module.exp(x)
    a, b = module.sum(module.mul(h, 2.0)), module.sum(module.mul(h, 3.0))
    a.backward()
    shared = _second_backward_error(b, b.backward)  # it reaches exp, which a's backward freed
    problems = ([f"loss.backward() twice: {same_loss}"] if same_loss else []) + (
        [f"b.backward() after a.backward() through a shared exp: {shared}"] if shared else [])
    return Measurement.from_problems(
        problems,
        expected="RuntimeError whose message says the graph was 'freed' by an earlier "
                 "'backward' and names 'retain_graph=True', for both")


@STAGE.contract(hint="""
    retain_graph=True is the way to go through a graph more than once: then no
    Function may let go of anything, and the graph can be freed by the last backward
    that runs without it.""")
def retain_graph_allows_a_second_backward(module):
    """backward(retain_graph=True) twice gives the same gradients; a last backward() frees the graph."""
    x = module.Variable(np.array([0.3, -1.2, 2.0]))
    loss = module.sum(module.mul(module.sigmoid(module.mul(x, x)), x))
    grads, problems = [], []
    try:
        for keep in (True, True, False):
            x.cleargrad()
            loss.backward(retain_graph=keep)
            grads.append(array(x.grad).copy())
    except Exception as error:
        problems.append(f"backward number {len(grads) + 1} raised {type(error).__name__}: {error}")
    if len(grads) == 3 and not all(np.array_equal(grads[0], g) for g in grads[1:]):
        problems.append(f"x.grad differs: {[g.tolist() for g in grads]}")
    if not problems:
        try:
            loss.backward()
            problems.append("a fourth backward, after backward() without retain_graph, "
                            "did not raise RuntimeError")
        except RuntimeError:
            pass
    return Measurement.from_problems(
        problems,
        expected="three equal x.grad (retain_graph=True, True, then the default), then "
                 "RuntimeError")


@STAGE.contract(hint="""
    Only what a Function saved for its backward may go: the Variables themselves, and
    above all the parameters that the optimizer is about to read, keep their data.""")
def parameters_keep_data_and_gradients(module):
    """After backward, the parameters keep their data, get their gradients and stay leaves."""
    workload = Workload(module)
    before = [p.data.copy() for p in workload.parameters]
    workload.cleargrads()
    loss = workload.loss(0)
    loss.backward()
    problems = []
    for i, (p, data) in enumerate(zip(workload.parameters, before)):
        if p.data is None:
            problems.append(f"parameter {i}: data is None")
        elif not np.array_equal(p.data, data):
            problems.append(f"parameter {i}: data changed")
        grad = array(p.grad)
        if grad is None or grad.shape != data.shape:
            problems.append(f"parameter {i}: grad {'None' if grad is None else grad.shape}")
        if p.creator is not None:
            problems.append(f"parameter {i}: has a creator")
    return Measurement.from_problems(
        problems,
        expected="every parameter: the same data, a gradient of its shape, no creator")


#: Batches that ``gradients_bit_identical_to_stage05`` compares, bit for bit. Every
#: batch runs the same operations on new numbers: an arithmetic that freeing changes
#: differs in the first batch's loss or gradients already; ten (it was thirty) also
#: carry each difference through nine updates of the parameters.
IDENTICAL_BATCHES = 10


@STAGE.contract(hint="""
    Freeing changes when memory is released, never what is computed: the same
    operations in the same order must give the same numbers as stage 05, and as
    the same file with retain_graph=True.""")
def gradients_bit_identical_to_stage05(module):
    """Ten training batches give the losses, parameters and gradients of the
    same framework with ``retain_graph=True`` (where backward takes it) and,
    for a stage file, of stage 05, to the last bit. dezero_mini is compared with itself only: its formulas are
    not stage 05's (its sigmoid, for one, keeps the far left tail)."""
    references = []
    if "retain_graph" in inspect.signature(module.Variable.backward).parameters:
        references.append(("retain_graph=True", Workload(module), {"retain_graph": True}))
    if getattr(module, "STAGE", None) != "dezero_mini":
        references.append(("stage 05", Workload(load_stage(5)), {}))
    differ = []
    for label, reference, kwargs in references:
        freeing = Workload(module)
        differ += [f"batch {i} against {label}" for i in range(IDENTICAL_BATCHES)
                   if reference.train_step(i, **kwargs) != freeing.train_step(i)]
        for name, pairs in (("data", [(p.data, q.data) for p, q in zip(reference.parameters,
                                                                         freeing.parameters)]),
                            ("grad", [(array(p.grad), array(q.grad)) for p, q in
                                      zip(reference.parameters, freeing.parameters)])):
            if not all(q is not None and np.array_equal(p, q) for p, q in pairs):
                differ.append(f"parameters' {name} against {label}")
    return Measurement(
        passed=not differ,
        expected=f"equal losses in {IDENTICAL_BATCHES} batches, then equal parameters and "
                 "gradients, against "
                 + " and ".join(label for label, _, _ in references),
        measured="equal" if not differ else f"differ: {', '.join(differ[:5])}")


@STAGE.contract(hint="""
    The saving must come from letting go during backward, and only from it: with
    retain_graph=True every Function keeps what it saved, as on stage 05.""")
def retain_graph_true_keeps_the_activations(module):
    """With retain_graph=True, backward returns holding the batch's activations (> 400 KiB more; 150 KiB from stage 08)."""
    kept = settled_timeline(module, retain_graph=True).after_backward
    freed = settled_timeline(module).after_backward
    floor = activations_floor(module)
    return Measurement(
        passed=freed < kept - floor,
        expected=f"< {format_bytes(kept - floor)} (the {format_bytes(kept)} held with "
                 f"retain_graph=True, less {format_bytes(floor)})",
        measured=format_bytes(freed))
