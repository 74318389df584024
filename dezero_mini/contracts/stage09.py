"""Stage 09, memory_planning: plan every buffer before allocating any.

The design of MXNet's note on memory (summarised in the CSDN post
"深度学习框架的内存优化机制"): trace a static graph, give each buffer a
lifetime by counting its readers, write in place over an input that no one
reads afterwards, share blocks between buffers whose lifetimes do not
overlap, never between nodes that could run in parallel, and allocate only
once the plan is made. The framework itself is stage 08's (its contracts
hold here too); the planner is new. The graph, the plan and the Executor are
judged from the outside with ``dezero_mini.memory.plans``, which has its own
code for lifetimes, the lower bound and the order of the graph.
"""
import tracemalloc

import numpy as np

from dezero_mini.contracts import Measurement, Stage
from dezero_mini.memory.plans import (PLANNERS, branches_network, chain_network, lower_bound,
                                      mlp_network, naive_total, residual_network,
                                      unordered_sharing)
from dezero_mini.memory.probes import tracing
from dezero_mini.memory.refgraph import format_bytes

STAGE = Stage(
    number=9,
    name="memory_planning",
    title="memory_planning",
    idea=("With a static graph, memory is planned before anything is allocated: each "
          "buffer's lifetime comes from counting its readers, a node writes in place over "
          "an input that no one reads afterwards, buffers whose lifetimes do not overlap "
          "share a block, but never between nodes that could run in parallel; then the "
          "plan runs in preallocated arrays, with the same results as the eager run."),
    change=("Leave stage 08's framework as it is. Add trace(fn, *feeds, wrt=()): run fn "
            "once on Variables of the arrays feeds, with Function.__call__ wrapped to record "
            "each call (and put back after), and return a Graph: buffers (each with shape, "
            "dtype, nbytes), nodes in the order they run (each with kernel(out, *inputs), "
            "inputs and output, buffer numbers, and inplace, the inputs it may write "
            "over), feeds, leaves (buffer -> array bound once) and outputs (the result, "
            "then the gradient of each Variable of wrt: the backward is traced as nodes "
            "too). Add plan_memory(graph, inplace=True, share=True, parallel=True), which "
            "returns a Plan with storage_of (a block number per buffer a node writes, None "
            "for feeds and leaves), sizes (bytes per block) and total; and Executor(plan), "
            "which allocates the blocks once and, called with the feeds, runs every kernel "
            "into them and returns the outputs."),
    needs=("trace", "plan_memory", "Executor"),
)


def _same_bits(planned, eager):
    return len(planned) == len(eager) and all(
        np.asarray(a).shape == np.asarray(b).shape and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(planned, eager))


def _networks(module):
    return [mlp_network(module, hidden_layers=4), branches_network(module),
            chain_network(module, depth=6), residual_network(module, depth=3)]


@STAGE.contract(hint="""
    Each kernel must do the same arithmetic as the Function's forward or backward,
    one numpy operation at a time, in the same order; and no kernel may write over
    an array that a later node still reads. What does a buffer's reference count
    say about when its block may be written again?""")
def planned_equals_eager(module):
    """The planned run gives the eager run's bits: result and gradients, training and inference."""
    problems = []
    for network in _networks(module):
        for training in (True, False):
            kind = "training" if training else "inference"
            graph = network.trace(module, training)
            executor = module.Executor(module.plan_memory(graph))
            planned = [np.array(a) for a in executor(*network.feeds)]
            planned_again = executor(*network.feeds)  # the same blocks, a second time
            eager = network.eager(module, training)
            if not _same_bits(planned, eager):
                problems.append(f"{network.name}, {kind}: differs from eager")
            elif not _same_bits(planned_again, eager):
                problems.append(f"{network.name}, {kind}: the second run differs")
    return Measurement.from_problems(
        problems,
        expected="the same bits as eager for 4 networks, training and inference, run twice",
        otherwise="the same bits")


@STAGE.contract(hint="""
    Two nodes that the graph does not order could run at the same time on two
    workers: if they use one block, one must wait for the other. Which nodes are
    surely ordered? Those on one path of the graph. And a buffer read on several
    paths: when is its last reader done?""")
def never_shares_between_unordered_nodes(module):
    """The plan passes a block from one buffer to the next only between nodes that the graph orders."""
    problems = []
    for network in _networks(module):
        for training in (True, False):
            plan = module.plan_memory(network.trace(module, training))
            pairs = unordered_sharing(plan)
            if pairs:
                graph = plan.graph
                u, w = pairs[0]
                problems.append(
                    f"{network.name}, {'training' if training else 'inference'}: {len(pairs)} "
                    f"pairs, e.g. node {u} ({getattr(graph.nodes[u], 'name', '?')}) and node "
                    f"{w} ({getattr(graph.nodes[w], 'name', '?')})")
    return Measurement.from_problems(
        problems,
        expected="no pair of unordered nodes on one block (4 networks, training and inference)",
        otherwise="none")


@STAGE.contract(hint="""
    While a node runs, its inputs, its output (unless it writes over an input
    that dies there) and every buffer written so far that a later node will read
    each need a place of their own: no plan can go below that. A plan that does
    is freeing a buffer before its last reader has run.""")
def never_below_the_lower_bound(module):
    """Every planner setting stays between the lower bound and the naive total, and the default one gives each buffer the bytes it needs."""
    problems = []
    for network in _networks(module):
        for training in (True, False):
            graph = network.trace(module, training)
            low, naive = lower_bound(graph), naive_total(graph)
            for label, kwargs in PLANNERS:
                plan = module.plan_memory(graph, **kwargs)
                if not low <= plan.total <= naive:
                    problems.append(f"{network.name}, {'training' if training else 'inference'}, "
                                    f"{label}: {format_bytes(plan.total)} outside "
                                    f"[{format_bytes(low)}, {format_bytes(naive)}]")
            plan = module.plan_memory(graph)
            short = [b for b, block in enumerate(plan.storage_of) if block is not None
                     and plan.sizes[block] < graph.buffers[b].nbytes]
            if short:
                problems.append(f"{network.name}: buffer {short[0]} is larger than its block")
    return Measurement(
        passed=not problems,
        expected="lower bound <= planned <= naive total, every buffer fits its block",
        measured="; ".join(problems[:3]) or "as expected")


@STAGE.contract(hint="""
    In-place needs the input's last reader to be the node that writes over it;
    sharing needs a block whose buffer is dead by the time a node writes. Each of
    the two alone must save memory on a chain of layers; together, MXNet's note
    reports about half the memory for training and a quarter for prediction.""")
def halves_training_quarters_inference(module):
    """On an MLP with four hidden layers the plan is at most half the naive total for training and a quarter for inference; in-place alone and sharing alone each save."""
    network = mlp_network(module, hidden_layers=4)
    measured, problems = [], []
    for training, most in ((True, 2), (False, 4)):
        kind = "training" if training else "inference"
        graph = network.trace(module, training)
        naive = naive_total(graph)
        ratio = naive / module.plan_memory(graph).total
        measured.append(f"{kind} {ratio:.2f}x less")
        if ratio < most:
            problems.append(f"{kind}: only {ratio:.2f}x less than the naive total")
        for label, kwargs in PLANNERS[1:3]:
            if module.plan_memory(graph, **kwargs).total >= naive:
                problems.append(f"{kind}: {label} saves nothing")
    return Measurement.from_problems(
        problems,
        expected="naive / planned >= 2 for training, >= 4 for inference; in-place only and "
                 "sharing only each below naive",
        otherwise=", ".join(measured))


@STAGE.contract(hint="""
    The point of planning first is that the run allocates nothing: every array it
    writes is a view of a block allocated when the Executor was made, and the
    kernels write into them (numpy's out=).""")
def executor_allocates_before_running(module):
    """Making the Executor allocates the plan's blocks; a run then allocates less than a quarter of that."""
    network = mlp_network(module, hidden_layers=4)
    plan = module.plan_memory(network.trace(module, True))
    with tracing():
        start = tracemalloc.get_traced_memory()[0]
        executor = module.Executor(plan)
        made = tracemalloc.get_traced_memory()[0] - start
        executor(*network.feeds)  # the first run may fill caches of numpy's
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        executor(*network.feeds)
        run_peak = tracemalloc.get_traced_memory()[1] - before
        held = tracemalloc.get_traced_memory()[0] - start
    # A correct run still sees numpy's own scratch: a ufunc that broadcasts
    # (the bias add) iterates through a buffer of up to 8,192 elements (64 KiB);
    # and the Executor's views of its blocks are small objects of their own.
    most = plan.total + plan.total / 8
    passed = plan.total <= made <= most and held <= most and run_peak < plan.total / 4
    return Measurement(
        passed=passed,
        expected=f"the Executor allocates {format_bytes(plan.total)} (the plan's total) to "
                 f"{format_bytes(most)}, and holds no more after two runs; a run's peak < "
                 f"{format_bytes(plan.total / 4)} (numpy's scratch only)",
        measured=f"the Executor {format_bytes(made)}, after two runs {format_bytes(held)}, "
                 f"a run's peak {format_bytes(run_peak)}")
