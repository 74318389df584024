"""The public API checks what it is given (``dezero_mini.validation``): every
public function of ``dezero_mini`` and ``dezero_mini.memory``, called with the
wrong kind of argument (None, a str, a list, an array where a Variable is
wanted and a Variable where it is not, a negative number, zero, nan),
answers with a TypeError or ValueError (IndexError, KeyError: lookups) that
names the function, not an AttributeError from three calls down; or, for the
kinds it takes (DeZero's functions take arrays and numbers), it works.

``test_every_public_function_is_in_the_sweep`` keeps the table whole: a new
public function must join it (or say why it takes no argument to check).
"""
import inspect
import math

import numpy as np
import pytest

import dezero_mini as dz
import dezero_mini.functions as F
import dezero_mini.memory as M
from dezero_mini import datasets, layers, models, optimizers, utils


def V():
    return dz.Variable(np.ones((2, 2)))


KINDS = {"None": None, "str": "abc", "list": [1, 2], "ndarray": np.ones((2, 2)), "negative": -1,
         "zero": 0, "nan": math.nan, "Variable": dz.Variable(np.ones((2, 2)))}
ALL = set(KINDS)
NUMBERS = {"negative", "zero", "nan"}
ARRAYS = {"ndarray", "Variable"}

#: name -> (the call with one hostile value, the words its errors begin with, the kinds it takes)
SWEEP = {
    "count_live_objects": (M.count_live_objects, "count_live_objects", set()),
    "framework_classes": (M.framework_classes, "framework_classes", set()),
    "stage_label": (M.stage_label, "stage_label", set()),
    "load_stage": (M.load_stage, "unknown stage", set()),
    "plot_training": (M.plot_training, "plot_training", set()),
    "plot_timeline": (M.plot_timeline, "plot_timeline", set()),
    "plan_memory": (dz.plan_memory, "plan_memory", set()),
    "trace": (dz.trace, "trace", set()),
    "Executor": (dz.Executor, "Executor", set()),
    "graph_gradients": (M.graph_gradients, "graph_gradients", {"Variable"}),
    "graph_gradients.held": (lambda v: M.graph_gradients(V().sum(), held=v), "graph_gradients",
                             {"list", "Variable"}),
    "reference_graph": (M.reference_graph, "reference_graph", {"None"}),
    "watch": (M.watch, "watch", ALL),  # anything can be watched (what is not weak-referable is kept)
    "sqrt_segments": (M.sqrt_segments, "sqrt_segments", set()),
    "grad_array": (M.grad_array, "grad_array", ARRAYS),
    "dict_twin": (M.dict_twin, "dict_twin", ALL),  # any object has a twin
    "object_footprint": (M.object_footprint, "object_footprint", set()),
    "span": (lambda v: M.span(v, 2, ".0f"), "span", {"negative", "zero"}),
    "span.spec": (lambda v: M.span(1, 2, v), "span", set()),
    "step_peak": (M.step_peak, "step_peak", set()),
    "traced_left_by": (M.traced_left_by, "traced_left_by", set()),
    "time_runs": (M.time_runs, "time_runs", set()),
    "time_runs.repeats": (lambda v: M.time_runs([(lambda: None, "on")], v), "time_runs", set()),
    "find_leaks": (lambda v: M.find_leaks(v, 2), "find_leaks", {"None"}),  # None: a context manager
    "find_leaks.repeat": (lambda v: M.find_leaks(lambda: None, v), "find_leaks", set()),
    "record_training": (lambda v: M.record_training(v, 2, rss=False), "unknown stage", set()),
    "record_training.batches": (lambda v: M.record_training("dezero_mini", v, rss=False),
                                "record_training", set()),
    "record_step_timeline": (M.record_step_timeline, "unknown stage", set()),
    "measure_inference": (lambda v: M.measure_inference(v, depth=2, width=4, batch=2),
                          "unknown stage", set()),
    "measure_inference.depth": (lambda v: M.measure_inference("dezero_mini", depth=v, width=4,
                                                              batch=2), "measure_inference", set()),
    "Workload": (M.Workload, "unknown stage", set()),
    "Workload.hidden": (lambda v: M.Workload("dezero_mini", hidden=v), "Workload", set()),
    "Workload.lr": (lambda v: M.Workload("dezero_mini", lr=v), "Workload", {"zero"}),
    "ResidualStack.depth": (lambda v: M.ResidualStack("dezero_mini", depth=v), "ResidualStack",
                            {"zero"}),
    "DeepChain": (lambda v: M.DeepChain("dezero_mini", depth=v), "DeepChain", set()),
    "gradient_check": (lambda v: utils.gradient_check(v, np.ones(2)), "gradient_check", set()),
    "gradient_check.x": (lambda v: utils.gradient_check(F.sin, v), "gradient_check",
                         ARRAYS | NUMBERS),
    "numerical_grad": (lambda v: utils.numerical_grad(F.sin, v), "numerical_grad",
                       ARRAYS | NUMBERS),
    "checkpoint": (lambda v: dz.checkpoint(v, V()), "checkpoint", set()),
    "Variable": (dz.Variable, "Variable", {"None", "ndarray"}),
    "exp": (F.exp, "Exp", ARRAYS | NUMBERS),
    "add": (lambda v: F.add(V(), v), "Add", ARRAYS | NUMBERS),
    "matmul": (lambda v: F.matmul(V(), v), "MatMul", ARRAYS),
    "reshape": (lambda v: F.reshape(V(), v), "reshape", {"negative"}),  # -1: the rest
    "broadcast_to": (lambda v: F.broadcast_to(V(), v), "broadcast_to|BroadcastTo", set()),
    "sum_to": (lambda v: F.sum_to(V(), v), "sum_to", {"list"}),
    "transpose": (lambda v: F.transpose(V(), v), "Transpose", {"None"}),
    "sum": (lambda v: F.sum(V(), v), "Sum", {"None", "negative", "zero"}),
    "get_item": (lambda v: F.get_item(V(), v), "GetItem", {"None", "negative", "zero"}),
    "embed_id": (lambda v: F.embed_id(v, V()), "embed_id", {"zero"}),
    "dropout": (lambda v: F.dropout(V(), v), "dropout", {"zero"}),
    "softmax_cross_entropy": (lambda v: F.softmax_cross_entropy(V(), v), "SoftmaxCrossEntropy",
                              set()),
    "using_config": (lambda v: dz.using_config(v, True).__enter__(), "using_config", set()),
    "backward": (lambda v: V().sum().backward(retain_grad=v), "backward", set()),
    "DataLoader": (lambda v: dz.DataLoader(v, 2), "DataLoader", {"list"} | ARRAYS),
    "DataLoader.batch_size": (lambda v: dz.DataLoader(datasets.Spiral(), v), "DataLoader", set()),
    "Linear": (layers.Linear, "Linear", set()),
    "MLP": (models.MLP, "MLP", {"list"}),
    "SGD": (optimizers.SGD, "SGD", {"zero"}),
    "Adam": (lambda v: optimizers.Adam(alpha=v), "Adam", {"zero"}),
    "setup": (lambda v: optimizers.SGD().setup(v), "SGD.setup", set()),
}

#: Public names with no argument of theirs to check, and why.
NOT_SWEPT = {
    "disable_output_cache": "takes no argument", "trim_heap": "takes no argument",
    "no_grad": "takes no argument", "test_mode": "takes no argument",
    "setup_variable": "takes no argument",
    "as_variable": "DeZero's: wraps whatever it is given, as DeZero does",
    "as_array": "DeZero's: leaves what is not a scalar as it is",
    "SeqDataLoader": "DataLoader's arguments (swept there)",
    "Function": "a base class", "Layer": "a base class", "Model": "a base class",
    "Parameter": "Variable's arguments (swept there)",
    "COLLECTOR_MODES": "a constant", "SIGNALS": "a constant", "STAGES": "a constant",
    "CollectorTiming": "a result", "Footprint": "a result", "GraphGradients": "a result",
    "GraphvizNotFound": "an error", "LeakFinder": "made by find_leaks", "LeakReport": "a result",
    "ReferenceGraph": "made by reference_graph", "Timeline": "a result",
    "TimelineEvent": "a result", "TrainingRecord": "a result",
}
ELEMENTARY = {"add", "sub", "mul", "div", "neg", "pow", "exp", "square", "sigmoid", "tanh",
              "matmul", "reshape", "transpose", "sum", "sum_to", "broadcast_to",
              "mean_squared_error"}  # the arithmetic of Variables: add and exp stand for them


def _public_names():
    names = set(M.__all__)
    names |= {name for name in dir(dz) if not name.startswith("_")
              and callable(getattr(dz, name)) and not inspect.ismodule(getattr(dz, name))}
    return names


def test_every_public_function_is_in_the_sweep():
    swept = {name.split(".")[0] for name in SWEEP}
    missing = sorted(_public_names() - swept - set(NOT_SWEPT) - ELEMENTARY)
    assert missing == []


CASES = [(name, kind) for name in SWEEP for kind in KINDS]


@pytest.mark.parametrize("name, kind", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_the_wrong_kind_of_argument_is_named_by_the_function(name, kind):
    call, words, takes = SWEEP[name]
    value = KINDS[kind]
    try:
        call(value)
    except (TypeError, ValueError, LookupError, AttributeError) as error:
        assert kind not in takes, f"{name} takes {kind}, but: {error!r}"
        message = str(error)
        assert any(word in message for word in words.split("|")), \
            f"{name}({kind}): {type(error).__name__}: {message}"
        assert "has no attribute" not in message and "object is not" not in message, message
    else:
        assert kind in takes, f"{name} accepted {kind} ({value!r}) without a word"
