"""The memory instruments of the course: where does an autograd framework's memory go?

Every stage of the course (``steps/stepNN_<name>.py``, and ``dezero_mini``
itself) is measured the same way, on the same training run:

* ``load_stage(3)`` / ``STAGES``: one module object per stage, shared by the
  tests, the notebooks and these instruments.
* ``Workload``: the standard run, a small MLP regression built only from
  the API that every stage has; ``ResidualStack``, the same with a deep
  stack of residual blocks (additions and tanh only); ``DeepChain``, a
  chain of residual layers as deep as you like, plain or cut into
  checkpointed segments, and ``step_peak``, the traced peak of one of its
  training steps.
* Three signals, from the most to the least deterministic:

  - live objects, ``count_live_objects(module)``: the Variables and
    Functions alive (numpy arrays are invisible to ``gc``; the framework's
    own objects are not);
  - traced bytes: ``tracemalloc``'s current and peak (numpy reports its
    buffers to it);
  - process memory: RSS, what the operating system and memory_profiler see
    (noisy: allocator arenas, memory not given back to the OS).

* ``record_training(stage, batches)``: the three signals after every batch,
  the cyclic collector's work, and a final ``gc.collect()``.
* ``record_step_timeline(stage)``: one batch op by op (forward, then
  backward), with its forward and backward peaks.
* ``measure_inference(stage, no_grad=...)``: the peak of one inference pass
  in units of one activation.
* ``plot_training`` / ``plot_timeline``: the figures of the lessons.
* ``reference_graph(names, watched)`` / ``watch(*objects)``: a picture of
  the objects and the references that keep them alive.
* ``time_runs([(fn, "on"), (fn, "off"), (fn, "frozen")])``: the time of
  a call with the cyclic collector on, off, and on after ``gc.freeze()``,
  and the share of it that the collections took.
* ``graph_gradients(y, held=[x])``: the gradients that the graph behind
  ``y`` holds, and those of Variables that nobody holds a name for (the
  constants of a formula, up to stage 07); ``traced_left_by(call)``: the
  traced bytes that a call leaves allocated.
* ``disable_output_cache()``: stop IPython's ``Out``/``_`` from keeping
  cell results alive.
* ``find_leaks()``: around some iterations of the learner's own loop (or
  ``find_leaks(fn, repeat)``): what survived them, its bytes, and the chain
  of references from a name of their code that keeps it alive.

Measure with the collector disabled (the recorder's default) unless the
lesson is about the collector: a reference cycle then shows as growth
instead of as a delay.
"""
from dezero_mini.memory.counting import count_live_objects, framework_classes
from dezero_mini.memory.depth import DeepChain, sqrt_segments, step_peak
from dezero_mini.memory.footprint import Footprint, dict_twin, object_footprint
from dezero_mini.memory.leaks import LeakFinder, LeakReport, find_leaks
from dezero_mini.memory.notebook import disable_output_cache
from dezero_mini.memory.plotting import plot_timeline, plot_training
from dezero_mini.memory.gctime import COLLECTOR_MODES, CollectorTiming, time_runs
from dezero_mini.memory.gradients import GraphGradients, graph_gradients
from dezero_mini.memory.inference import measure_inference
from dezero_mini.memory.probes import traced_left_by, trim_heap
from dezero_mini.memory.recorder import SIGNALS, TrainingRecord, record_training
from dezero_mini.memory.refgraph import GraphvizNotFound, ReferenceGraph, reference_graph, watch
from dezero_mini.memory.stages import STAGES, load_stage, stage_label
from dezero_mini.memory.timeline import Timeline, TimelineEvent, record_step_timeline
from dezero_mini.memory.workload import ResidualStack, Workload, grad_array
from dezero_mini.memory.wording import span

__all__ = [
    "COLLECTOR_MODES",
    "CollectorTiming",
    "DeepChain",
    "Footprint",
    "dict_twin",
    "object_footprint",
    "GraphGradients",
    "GraphvizNotFound",
    "LeakFinder",
    "LeakReport",
    "ReferenceGraph",
    "SIGNALS",
    "STAGES",
    "Timeline",
    "TimelineEvent",
    "TrainingRecord",
    "ResidualStack",
    "Workload",
    "count_live_objects",
    "disable_output_cache",
    "span",
    "find_leaks",
    "framework_classes",
    "grad_array",
    "graph_gradients",
    "load_stage",
    "measure_inference",
    "plot_timeline",
    "plot_training",
    "record_step_timeline",
    "record_training",
    "reference_graph",
    "sqrt_segments",
    "stage_label",
    "step_peak",
    "time_runs",
    "traced_left_by",
    "trim_heap",
    "watch",
]

# In the browser preview (Pyodide) the lessons' byte figures differ from the ones in the
# book: say so once, when a lesson first imports the instruments.
from dezero_mini.browser import print_bytes_note_once  # noqa: E402

print_bytes_note_once()
