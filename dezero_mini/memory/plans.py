"""Memory plans of a static graph, measured (stage 09).

A stage module from 09 on has ``trace``, ``plan_memory`` and ``Executor``.
These instruments look at a graph and a plan from the outside, with code of
their own, so that they can judge a learner's planner:

* ``Network``: the computations of the lesson, built from any stage's API:
  ``mlp_network`` (the standard workload, or a deeper one), ``chain_network``
  (a chain of ``tanh`` layers), ``branches_network`` (two branches that
  merge) and ``residual_network`` (a value read twice on one path).
* ``naive_total(graph)``: every buffer that a node writes in an array of
  its own; ``lower_bound(graph)``: the most bytes needed at once in the
  graph's order, a node's inputs and output together (no plan of that order
  can use less).
* ``unordered_sharing(plan)``: the pairs of nodes that use one block of
  storage although the graph does not order them (two nodes that could run
  in parallel, which the plan would serialise); ``written_over(plan)``: the
  nodes that write over a buffer that a later node still reads.
* ``plan_table`` / ``block_timeline`` / ``plot_plan_timelines``: the figures
  of the lesson; ``plot_explored_plan``: the figure of its interactive cell.
"""
from dataclasses import dataclass

import numpy as np

from dezero_mini.memory.refgraph import format_bytes
from dezero_mini.memory.stages import load_stage
from dezero_mini.memory.workload import ResidualStack, Workload, grad_array
from dezero_mini.planning import readers  # a function: a learner's Graph needs no method

KIB = 1024

#: The planners of the lesson's table: (label, keyword arguments of plan_memory). All
#: but the last keep nodes that could run in parallel off each other's blocks.
PLANNERS = (
    ("naive", dict(inplace=False, share=False)),
    ("in-place only", dict(inplace=True, share=False)),
    ("sharing only", dict(inplace=False, share=True)),
    ("both", dict(inplace=True, share=True)),
    ("both, serial", dict(inplace=True, share=True, parallel=False)),  # blind to parallelism
)


@dataclass
class Network:
    """A computation to trace: ``fn(*Variables)`` on the arrays ``feeds``;
    ``params``: the Variables that training differentiates."""

    name: str
    fn: object
    feeds: tuple
    params: list

    def trace(self, module, training):
        """The stage module's static graph of one inference or training step."""
        return module.trace(self.fn, *self.feeds, wrt=self.params if training else ())

    def eager(self, module, training):
        """The same step run eagerly: [result, gradient of each parameter]."""
        for p in self.params:
            p.cleargrad()
        if training:
            result = self.fn(*[module.Variable(a) for a in self.feeds])
            result.backward()
            return [result.data] + [grad_array(p.grad) for p in self.params]
        with module.no_grad():
            return [self.fn(*[module.Variable(a) for a in self.feeds]).data]


def mlp_network(module, hidden_layers=2, **settings):
    """The standard workload's MLP (``Workload``; deeper with ``hidden_layers``)
    and the mean squared error of batch 0."""
    module = load_stage(module)
    workload = Workload(module, hidden_layers=hidden_layers, **settings)
    name = f"MLP, {hidden_layers} hidden layers"
    return Network(name, lambda x, t: module.mean_squared_error(workload.forward(x), t),
                   workload.batch(0), workload.parameters)


def residual_network(module, depth=4, **settings):
    """``ResidualStack``: blocks ``h = tanh(h + b) + h``, where ``h`` is read
    twice on one path (a node may not write over it in place at its first reader)."""
    module = load_stage(module)
    workload = ResidualStack(module, depth=depth, **settings)
    return Network(f"{depth} residual blocks",
                   lambda x, t: module.mean_squared_error(workload.forward(x), t),
                   workload.batch(0), workload.parameters)


def _layers(module, rng, count, width, name):
    return [(module.Variable(rng.randn(width, width) / np.sqrt(width), name=f"W{name}{k}"),
             module.Variable(np.zeros(width), name=f"b{name}{k}")) for k in range(count)]


def chain_network(module, depth=100, batch=256, width=32, seed=0):
    """``depth`` layers ``h = tanh(h @ W + b)`` one after another, then the
    mean squared error to a random target."""
    module = load_stage(module)
    rng = np.random.RandomState(seed)
    layers = _layers(module, rng, depth, width, "")

    def fn(x, t):
        for W, b in layers:
            x = module.tanh(module.add(module.matmul(x, W), b))
        return module.mean_squared_error(x, t)

    return Network(f"chain of {depth} layers", fn,
                   (rng.randn(batch, width), rng.randn(batch, width)),
                   [p for layer in layers for p in layer])


def branches_network(module, depth=4, batch=256, width=32, seed=0):
    """Two branches of ``depth`` layers from the same input, one of tanh and
    one of sigmoid layers, added together: nothing orders a node of one
    branch with a node of the other, so they could run in parallel."""
    module = load_stage(module)
    rng = np.random.RandomState(seed)
    left, right = _layers(module, rng, depth, width, "a"), _layers(module, rng, depth, width, "b")

    def fn(x, t):
        a = b = x
        for (Wa, ba), (Wb, bb) in zip(left, right):
            a = module.tanh(module.add(module.matmul(a, Wa), ba))
            b = module.sigmoid(module.add(module.matmul(b, Wb), bb))
        return module.mean_squared_error(module.add(a, b), t)

    return Network(f"two branches of {depth} layers", fn,
                   (rng.randn(batch, width), rng.randn(batch, width)),
                   [p for layer in left + right for p in layer])


# --- what a graph needs, whatever the plan ----------------------------------------------
def _producers(graph):
    return {node.output: n for n, node in enumerate(graph.nodes)}


def _lifetimes(graph):
    """For each buffer that a node writes: (first step, end) with the buffer
    live from its node up to its last reader, and to the end of the run for
    an output. A buffer is needed after ``first`` and up to ``end - 1``."""
    last = {}
    for n, node in enumerate(graph.nodes):
        for b in node.inputs:
            last[b] = n
    ends = len(graph.nodes) + 1
    return {node.output: (n, ends if node.output in graph.outputs else max(last.get(node.output, n), n + 1))
            for n, node in enumerate(graph.nodes)}


def naive_total(graph):
    """Bytes when every buffer that a node writes has an array of its own."""
    return int(sum(graph.buffers[node.output].nbytes for node in graph.nodes))


def live_bytes(graph):
    """For each step n, the bytes of the buffers needed both at and after n:
    written at n or before, read after n (or returned)."""
    live = np.zeros(len(graph.nodes), dtype=np.int64)
    for b, (first, end) in _lifetimes(graph).items():
        live[first:min(end, len(graph.nodes))] += graph.buffers[b].nbytes
    return live


def needed_bytes(graph):
    """For each step n, the bytes that must exist at once while node n runs:
    what is live after it (``live_bytes``) and the inputs that it reads for the
    last time, which it still reads while it writes its output. A node that may
    write over such an input (``node.inplace``) can put its output there, so
    that input's place counts once (the smaller of the two)."""
    lifetimes = _lifetimes(graph)
    needed = live_bytes(graph)
    for n, node in enumerate(graph.nodes):
        dying = {b for b in node.inputs if b in lifetimes and lifetimes[b][1] == n}
        needed[n] += sum(graph.buffers[b].nbytes for b in dying)
        overwritable = [graph.buffers[node.inputs[i]].nbytes for i in getattr(node, "inplace", ())
                        if node.inputs[i] in dying]
        if overwritable:
            needed[n] -= min(graph.buffers[node.output].nbytes, max(overwritable))
    return needed


def lower_bound(graph):
    """The most bytes needed at once (``needed_bytes``): while a node runs, its
    inputs, its output (unless it writes over an input that dies there) and
    every buffer written so far and still to be read each need a place of
    their own, so no plan that runs the nodes in this order can use fewer."""
    return int(needed_bytes(graph).max()) if graph.nodes else 0


def ancestors(graph):
    """For each node, a bit set (an int) of the nodes that must run before it."""
    producer = _producers(graph)
    before = []
    for node in graph.nodes:
        bits = 0
        for b in node.inputs:
            if b in producer:
                bits |= before[producer[b]] | (1 << producer[b])
        before.append(bits)
    return before


def _buffers_by_block(plan):
    blocks = {}
    for b, block in enumerate(plan.storage_of):
        if block is not None:
            blocks.setdefault(block, []).append(b)
    return blocks


def unordered_sharing(plan):
    """Pairs (u, w) of nodes where w writes a block after u used it for
    another buffer, but the graph does not make u run before w (nor is u the
    node w itself, reading the buffer that it writes over in place). Empty for
    a plan that adds no order to the graph."""
    graph = plan.graph
    producer, before = _producers(graph), ancestors(graph)
    read_by = readers(graph)
    pairs = []
    for buffers in _buffers_by_block(plan).values():
        buffers.sort(key=lambda b: producer[b])
        for earlier, later in zip(buffers, buffers[1:]):
            w = producer[later]
            for u in [producer[earlier], *read_by[earlier]]:
                if u != w and not before[w] >> u & 1:
                    pairs.append((u, w))
    return sorted(set(pairs))


def written_over(plan):
    """Pairs (w, r): node w writes a block whose previous buffer node r still
    reads at or after w's step (in-place at r == w is allowed)."""
    graph = plan.graph
    producer, read_by = _producers(graph), readers(graph)
    found = []
    for buffers in _buffers_by_block(plan).values():
        buffers.sort(key=lambda b: producer[b])
        for earlier, later in zip(buffers, buffers[1:]):
            w = producer[later]
            found += [(w, r) for r in read_by[earlier] if r > w]
    return sorted(set(found))


def block_timeline(plan):
    """For each step n, the bytes of storage that the plan has used by then
    (a block counts with the largest buffer placed in it so far): what an
    allocator following the plan would have allocated by step n."""
    graph = plan.graph
    size = {}
    used = np.zeros(len(graph.nodes), dtype=np.int64)
    for n, node in enumerate(graph.nodes):
        block = plan.storage_of[node.output]
        size[block] = max(size.get(block, 0), graph.buffers[node.output].nbytes)
        used[n] = sum(size.values())
    return used


# --- the lesson's figures -----------------------------------------------------------------
def plan_row(module, graph):
    """The bytes of each planner of ``PLANNERS`` and the lower bound, for one graph."""
    row = {label: module.plan_memory(graph, **kwargs).total for label, kwargs in PLANNERS}
    row["lower bound"] = lower_bound(graph)
    return row


def plan_table(module, networks):
    """``{(network name, "training"/"inference"): row}`` (see ``plan_row``)."""
    table = {}
    for network in networks:
        for training in (True, False):
            graph = network.trace(module, training)
            table[network.name, "training" if training else "inference"] = plan_row(module, graph)
    return table


def table_markdown(table):
    """The table as Markdown: KiB per planner, and naive / both."""
    columns = [label for label, _ in PLANNERS] + ["lower bound"]
    lines = ["| graph | " + " | ".join(f"{c} (KiB)" for c in columns) + " | naive / both |",
             "|---|" + "---:|" * (len(columns) + 1)]
    for (name, kind), row in table.items():
        cells = " | ".join(f"{row[c] / KIB:,.0f}" for c in columns)
        lines.append(f"| {name}, {kind} | {cells} | {row['naive'] / row['both']:.1f}x |")
    return "\n".join(lines)


def plot_plan_timelines(module, graph, title, *, highlight=None, ax=None):
    """Storage used step by step by each planner of ``PLANNERS``, and the
    bytes needed at each step (``needed_bytes``: the lower bound is its highest point).
    highlight: the label of one planner, drawn bold over the others, faint.
    ax: the axes to draw on (default: a figure of its own). Returns the figure."""
    from dezero_mini.memory.plotting import _pyplot

    if ax is None:
        _, ax = _pyplot().subplots(figsize=(9.0, 3.8), constrained_layout=True)
    for label, kwargs in PLANNERS:
        used = block_timeline(module.plan_memory(graph, **kwargs))
        faint = highlight is not None and label != highlight
        ax.plot(used / KIB, label=f"{label}: {used[-1] / KIB:,.0f} KiB",
                linewidth=1.0 if faint else (3.0 if highlight else 1.5), alpha=0.4 if faint else 1.0)
    needed = needed_bytes(graph)
    ax.plot(needed / KIB, "k:", label=f"needed at once (lower bound {needed.max() / KIB:,.0f} KiB)")
    ax.set_xlabel("node, in the order they run")
    ax.set_ylabel("storage used so far (KiB)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax.figure


def block_rows(plan):
    """How many blocks of storage the plan uses: the rows of ``plot_blocks``."""
    return len(_buffers_by_block(plan))


def plot_blocks(plan, title, max_nodes=60, *, ax=None):
    """Each buffer as a bar from the node that writes it to its last reader,
    one row per block of storage: what the plan put where, and when.
    ax: the axes to draw on (default: a figure of its own). Returns the figure."""
    from dezero_mini.memory.plotting import _colors, _pyplot

    graph = plan.graph
    spans = _lifetimes(graph)
    blocks = _buffers_by_block(plan)
    if ax is None:
        _, ax = _pyplot().subplots(figsize=(9.0, 0.35 * len(blocks) + 1.5), constrained_layout=True)
    colors = _colors(10)
    for row, (block, buffers) in enumerate(sorted(blocks.items())):
        for k, b in enumerate(buffers):
            first, end = spans[b]
            end = min(end, len(graph.nodes))
            ax.barh(row, max(end - first, 0.6), left=first - 0.3, height=0.6,
                    color=colors[k % len(colors)], edgecolor="black", linewidth=0.5)
            ax.text(first, row, graph.nodes[first].name, fontsize=6, va="center")
    ax.set_yticks(range(len(blocks)))
    ax.set_yticklabels([f"block {b} ({format_bytes(plan.sizes[b])})" for b in sorted(blocks)],
                       fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(-1, min(len(graph.nodes), max_nodes))
    ax.set_xlabel("node, in the order they run (a bar: one buffer, from its node to its last reader)")
    ax.set_title(title)
    return ax.figure


# --- the interactive cell of the lesson (dezero_mini/memory/explorations/stage09.py) ---------
#: The networks a reader may choose, built with ``layers`` (hidden layers of the MLP,
#: layers of the chain, layers of each branch) and a batch size.
EXPLORED_NETWORKS = {
    "MLP": lambda module, layers, batch: mlp_network(module, hidden_layers=layers, batch_size=batch),
    "chain": lambda module, layers, batch: chain_network(module, depth=layers, batch=batch),
    "two branches": lambda module, layers, batch: branches_network(module, depth=layers, batch=batch),
}


def small_network(module):
    """The small computation of the lessons, ``sum(sigmoid(x @ W + b))``, with
    ``x`` of shape (4, 3): a graph whose every block fits in one picture."""
    module = load_stage(module)
    rng = np.random.RandomState(1)
    x = rng.randn(4, 3)
    W = module.Variable(rng.randn(3, 2), name="W")
    b = module.Variable(np.zeros(2), name="b")
    return Network("sum(sigmoid(x @ W + b))",
                   lambda x: module.sum(module.sigmoid(module.matmul(x, W) + b)), (x,), [W, b])


def plot_explored_plan(values):
    """The figure of ``explore(9)``: above, the chosen network's storage node
    by node under every planner, the chosen ``plan`` bold; below, where that
    plan puts each buffer of the small computation. Values used: stage,
    network (a key of ``EXPLORED_NETWORKS``), layers, batch_size, step
    ("training" or "inference"), plan (a label of ``PLANNERS``)."""
    from dezero_mini.memory.plotting import _pyplot

    module = load_stage(values["stage"])
    training = values["step"] == "training"
    planner = dict(PLANNERS)[values["plan"]]
    network = EXPLORED_NETWORKS[values["network"]](module, values["layers"], values["batch_size"])
    small = small_network(module)
    small_plan = module.plan_memory(small.trace(module, training), **planner)
    rows = block_rows(small_plan)
    fig, (top, bottom) = _pyplot().subplots(
        2, 1, figsize=(9.0, 5.3 + 0.35 * rows), constrained_layout=True,
        gridspec_kw={"height_ratios": [3.8, 0.35 * rows + 1.5]})
    plot_plan_timelines(module, network.trace(module, training),
                        f"{network.name}, {values['step']}, batch {values['batch_size']}: "
                        "storage used, node by node", highlight=values["plan"], ax=top)
    plot_blocks(small_plan, f"The plan \"{values['plan']}\" of {small.name}, {values['step']}: "
                            f"{rows} blocks, {format_bytes(small_plan.total)}", ax=bottom)
    return fig
