"""Stage 04, retain_grad: intermediate gradients die as soon as they are passed on."""
from dezero_mini.contracts import Measurement, Stage
from dezero_mini.contracts.stage01 import small_graph
from dezero_mini.contracts.bench import array
from dezero_mini.memory.refgraph import format_bytes
from dezero_mini.memory.stages import load_stage
from dezero_mini.memory.timeline import record_step_timeline

#: How much lower a peak must be to count as a saving: well above the noise
#: of a few KiB between two runs, well below the ~20% that dropping the
#: intermediate gradients saves on the standard workload.
SAVING = 0.9

STAGE = Stage(
    number=4,
    name="retain_grad",
    title="retain_grad",
    idea=("backward(retain_grad=False) drops the gradients of intermediate Variables as "
          "soon as they have been used, so the peak memory within backward falls."),
    change=("Give Variable.backward a parameter retain_grad=False. Unless it is True, "
            "drop the gradient of each intermediate Variable as soon as nobody will "
            "read it again; the leaves (inputs, parameters) keep theirs."),
)


@STAGE.contract(hint="""
    With the default retain_grad=False, an intermediate Variable's gradient is needed
    only until the Function that made the Variable has passed it on to its inputs.
    The leaves keep theirs: the optimizer reads them.""")
def drops_intermediate_gradients(module):
    """After backward(), intermediate Variables (and the loss) have no gradient."""
    x, W, h, s, loss = small_graph(module)
    loss.backward()
    kept = [name for name, v in (("h", h), ("s", s), ("loss", loss)) if v.grad is not None]
    leaves = [name for name, v in (("x", x), ("W", W)) if v.grad is None]
    problems = ([f"still set: {', '.join(kept)}"] if kept else []) + (
        [f"lost by the leaves: {', '.join(leaves)}"] if leaves else [])
    return Measurement.from_problems(
        problems,
        expected="h.grad, s.grad, loss.grad None; x.grad, W.grad set")


@STAGE.contract(hint="""
    backward(retain_grad=True) is for looking inside: it must leave every gradient in
    place, as stage 03 did.""")
def retain_grad_keeps_intermediate(module):
    """backward(retain_grad=True) leaves the intermediate gradients, and they are right."""
    x, W, h, s, loss = small_graph(module)
    loss.backward(retain_grad=True)
    s_grad, h_grad = array(s.grad), array(h.grad)
    right = (s_grad is not None and s_grad.shape == (4, 2) and bool((s_grad == 1).all())
             and h_grad is not None and h_grad.shape == (4, 2))
    shapes = ", ".join(f"{n}.grad {'None' if g is None else g.shape}"
                       for n, g in (("s", s_grad), ("h", h_grad)))
    return Measurement(passed=right, expected="s.grad all ones (4, 2), h.grad (4, 2)",
                       measured=shapes)


@STAGE.contract(hint="""
    The peak within backward should fall below stage 03's: a gradient that nobody
    will read again must not wait for the end of backward to be freed.""")
def backward_peak_below_stage03(module):
    """The traced peak during backward of one batch is at least 10% lower than stage 03's."""
    before = record_step_timeline(load_stage(3), count_objects=False).backward_peak
    after = record_step_timeline(module, count_objects=False).backward_peak
    return Measurement(passed=after < SAVING * before,
                       expected=f"< {format_bytes(int(SAVING * before))} (90% of stage 03's "
                                f"{format_bytes(before)})",
                       measured=format_bytes(after))


@STAGE.contract(until=5, hint="""
    The saving must come from the gradients that are dropped, and only from them: the
    peak with retain_grad=True should be higher than with the default.""")
def retain_grad_true_costs_memory(module):
    """The backward peak with the default is at least 10% lower than with retain_grad=True.

    Stages 04-05 only (``until=5``): from stage 06 on, backward also lets go
    of each Function's inputs as soon as its backward has run, so a gradient
    that retain_grad=True keeps on an intermediate Variable is freed with
    that Variable, as early as the default would have dropped it (the two
    peaks measure within 1% on the standard workload). retain_grad=True costs
    memory from then on only for Variables the user holds, which
    ``drops_intermediate_gradients`` and ``retain_grad_keeps_intermediate``
    still check.
    """
    dropped = record_step_timeline(module, retain_grad=False, count_objects=False).backward_peak
    kept = record_step_timeline(module, retain_grad=True, count_objects=False).backward_peak
    return Measurement(passed=dropped < SAVING * kept,
                       expected=f"< {format_bytes(int(SAVING * kept))} (90% of the "
                                f"{format_bytes(kept)} with retain_grad=True)",
                       measured=format_bytes(dropped))
