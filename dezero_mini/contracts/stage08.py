"""Stage 08, saved_tensors: a Function keeps only what its backward reads.

The graph links Functions (``next_functions``), not the Variables between
them, and each Function keeps the values that its backward reads, named once
(``saves``, which are also its ``__slots__``): shapes for ``Add``, ``Sub``,
``Sum``, ``BroadcastTo``, ``Reshape``; the output for ``Exp``, ``Sigmoid``,
``Tanh``; both inputs for ``Mul`` and ``MatMul``. The check mode
(``Config.check_saved``) is PaddlePaddle's unused-input check ("OP Should
Not Have Unused Input") made to run on any Function, a learner's too.
"""
import gc
import re
import weakref

import numpy as np

from dezero_mini.contracts import Measurement, Stage
from dezero_mini.contracts.bench import KIB, array
from dezero_mini.contracts.stage06 import settled_timeline
from dezero_mini.memory.refgraph import format_bytes
from dezero_mini.memory.stages import load_stage
from dezero_mini.memory.true_types import is_instance

STAGE = Stage(
    number=8,
    name="saved_tensors",
    title="saved_tensors",
    idea=("A Function keeps only what its backward reads, named in one place: Add keeps "
          "two shapes, not two arrays; Exp, Sigmoid and Tanh keep their output, not their "
          "input. A check mode reports a Function that holds an input or a saved value "
          "its backward never reads (PaddlePaddle's unused-input check)."),
    change=("Link the graph by Functions, not by the Variables between them: each "
            "Function keeps next_functions, (creator, output index) per input or "
            "(Variable, None) for a leaf, and backward keeps the gradients of the outputs "
            "of the Functions still to run. Each built-in Function names what its backward "
            "reads in saves (and __slots__), sets those attributes in forward and reads them "
            "in backward; a Function without saves keeps self.inputs, DeZero's way. Add "
            "Config.check_saved (True when the environment variable "
            "DEZERO_MINI_CHECK_SAVED=1): each backward then runs on a stand-in that notes "
            "which saved values and inputs it reads, and a Function holding one it never "
            "read raises RuntimeError naming the class and the value, unless the class "
            "lists it in reads_sometimes."),
    needs=("tanh", "reshape", "broadcast_to", "sub"),
)

#: What the check must name on the careless Functions below, besides the
#: class: the value it holds without reading (a pattern of its message).
_CARELESS = {"CarelessAdd": ("inputs[0]", r"inputs\[0\]"), "CarelessSigmoid": ("x", r"\bx\b")}


def _without_check_mode(module, expected):
    """A failed Measurement if ``module.Config`` has no ``check_saved``, else None."""
    if hasattr(getattr(module, "Config", None), "check_saved"):
        return None
    return Measurement(passed=False, expected=expected,
                       measured="Config has no setting check_saved")


def _error_of(run):
    """None if ``run()`` returns; else the exception."""
    try:
        run()
    except Exception as error:  # the check's error, or a broken framework's
        return error
    return None


def _loss_of(module, op, h):
    return module.sum(op(h))


def _intermediate(module, x):
    """An array that only the Variable returned holds: x * 2 (Mul keeps x and 2)."""
    return module.mul(x, module.Variable(np.array(2.0)))


@STAGE.contract(hint="""
    What does Add's backward read of its inputs? Only their shapes (to undo
    broadcasting). Sum, BroadcastTo and Reshape the same. A Function that keeps
    the input Variable keeps its array too, and the graph links Functions through
    their inputs: can it link them another way?""")
def keeps_shapes_not_arrays(module):
    """After y = add/sub(h, h), sum, broadcast_to or reshape of h, the user's del h frees h's array."""
    ops = {
        "add(h, h)": lambda h: module.add(h, h),
        "sub(h, h)": lambda h: module.sub(h, h),
        "sum(h)": lambda h: module.sum(h),
        "broadcast_to(h, (2, 3, 4))": lambda h: module.broadcast_to(h, (2, 3, 4)),
        "reshape(h, (4, 3))": lambda h: module.reshape(h, (4, 3)),
    }
    expected = {"add(h, h)": 4.0, "sub(h, h)": 0.0, "sum(h)": 2.0,
                "broadcast_to(h, (2, 3, 4))": 4.0, "reshape(h, (4, 3))": 2.0}
    problems = []
    for text, op in ops.items():
        x = module.Variable(np.linspace(0.5, 1.5, 12).reshape(3, 4))
        h = _intermediate(module, x)
        array_of_h = weakref.ref(h.data)
        try:
            loss = module.sum(op(h))
        except Exception as error:
            problems.append(f"{text} raised {type(error).__name__}: {error}")
            continue
        del h
        gc.collect()
        if array_of_h() is not None:
            problems.append(f"{text} keeps h's array")
        try:
            loss.backward()
        except Exception as error:
            problems.append(f"{text}: backward raised {type(error).__name__}: {error}")
            continue
        if not np.allclose(array(x.grad), expected[text]):
            problems.append(f"{text}: x.grad is not {expected[text]}")
    return Measurement.from_problems(
        problems,
        expected="h's array freed once the user drops h; x.grad right after backward")


@STAGE.contract(hint="""
    The derivative of exp is exp itself; sigmoid's is y (1 - y), tanh's 1 - y^2:
    their backward reads the output, never the input. Which of the two arrays
    should the Function keep? (The output Variable may be gone by the time
    backward runs: hold its array, not a weak reference.)""")
def exp_sigmoid_tanh_keep_their_output(module):
    """exp, sigmoid and tanh keep their output's array (not their input's) and their gradients stay right."""
    derivatives = {"exp": np.exp,
                   "sigmoid": lambda v: (lambda s: s * (1 - s))(1 / (1 + np.exp(-v))),
                   "tanh": lambda v: 1 - np.tanh(v) ** 2}
    problems = []
    for name, derivative in derivatives.items():
        x = module.Variable(np.linspace(-1.0, 1.0, 12))
        h = _intermediate(module, x)
        y = getattr(module, name)(h)
        array_of_h, array_of_y = weakref.ref(h.data), weakref.ref(y.data)
        loss = module.sum(module.mul(y, module.Variable(np.array(1.0))))
        del h, y
        gc.collect()
        if array_of_h() is not None:
            problems.append(f"{name} keeps its input's array")
        if array_of_y() is None:
            problems.append(f"{name}'s output array is gone before backward")
        try:
            loss.backward()
        except Exception as error:
            problems.append(f"{name}: backward raised {type(error).__name__}: {error}")
            continue
        if not np.allclose(array(x.grad), 2 * derivative(2 * x.data)):
            problems.append(f"{name}: x.grad is wrong")
    return Measurement.from_problems(
        problems,
        expected="the input's array freed, the output's kept, x.grad right, for all three")


def _every_builtin(module):
    """(text, loss) for a small graph through each built-in function of the stage."""
    rng = np.random.RandomState(0)
    a = module.Variable(rng.rand(3, 4) + 0.5)
    b = module.Variable(rng.rand(4) + 0.5)
    W = module.Variable(rng.rand(4, 2))
    m = module
    graphs = {
        "add": lambda: m.add(a, b), "sub": lambda: m.sub(a, b), "mul": lambda: m.mul(a, b),
        "div": lambda: m.div(a, b), "neg": lambda: m.neg(a), "pow": lambda: m.pow(a, 3),
        "square": lambda: m.square(a), "exp": lambda: m.exp(a),
        "sigmoid": lambda: m.sigmoid(a), "tanh": lambda: m.tanh(a),
        "reshape": lambda: m.reshape(a, (4, 3)), "transpose": lambda: m.transpose(a),
        "sum": lambda: m.sum(a, axis=0), "sum_to": lambda: m.sum_to(a, (1, 4)),
        "broadcast_to": lambda: m.broadcast_to(b, (3, 4)), "matmul": lambda: m.matmul(a, W),
        "mean_squared_error": lambda: m.mean_squared_error(a, m.Variable(np.zeros((3, 4)))),
    }
    return {name: (lambda make=make: m.sum(make()).backward()) for name, make in graphs.items()}


@STAGE.contract(hint="""
    The check runs each backward and compares what the Function holds with what the
    backward read. A built-in Function that fails it keeps something it does not
    need: keep the shape instead of an array whose shape alone is read, the output
    instead of the input, or nothing.""")
def builtins_pass_the_check(module):
    """With Config.check_saved on, every built-in function's backward (and a training step) runs without error."""
    expected = "no error from any of the 17 functions nor from a training step"
    missing = _without_check_mode(module, expected)
    if missing:
        return missing
    failed = []
    with module.using_config("check_saved", True):
        for name, run in _every_builtin(module).items():
            error = _error_of(run)
            if error is not None:
                failed.append(f"{name}: {type(error).__name__}: {error}")
        from dezero_mini.memory.workload import Workload

        error = _error_of(lambda: Workload(module).train_step(0))
        if error is not None:
            failed.append(f"a training step: {type(error).__name__}: {error}")
    return Measurement(
        passed=not failed,
        expected=expected,
        measured="; ".join(failed) or "no error")


def _careless_functions(module):
    """Two careless Functions, as a learner would write them: DeZero's way (its
    backward never reads self.inputs), and one that saves its input too."""

    class CarelessAdd(module.Function):
        def forward(self, x0, x1):
            return x0 + x1

        def backward(self, gy):
            return gy, gy

    class CarelessSigmoid(module.Function):
        saves = ("x", "y")

        def forward(self, x):
            self.x = x
            self.y = 1 / (1 + np.exp(-x))
            return self.y

        def backward(self, gy):
            return gy * self.y * (1 - self.y)

    return CarelessAdd, CarelessSigmoid


@STAGE.contract(hint="""
    The check must see what a backward reads, whatever the Function: a learner's
    backward reads self.inputs, DeZero's way, or the attributes it named in saves.
    Stand in for the Function while its backward runs and note every read; then
    compare with what it holds, and name the class and what it never read.""")
def check_names_what_is_never_read(module):
    """The check raises RuntimeError naming a careless Function's class and the input or saved value it never reads; off, no error."""
    expected = ("check off: no error; on: RuntimeError naming CarelessAdd and inputs[0], "
                "CarelessSigmoid and x")
    missing = _without_check_mode(module, expected)
    if missing:
        return missing
    problems = []
    x = module.Variable(np.array([0.5, 1.0]))
    for cls in _careless_functions(module):
        value, pattern = _CARELESS[cls.__name__]
        if cls.__name__ == "CarelessAdd":
            run = lambda: module.sum(cls()(module.exp(x), x)).backward()  # noqa: E731
        else:
            run = lambda: module.sum(cls()(module.exp(x))).backward()  # noqa: E731
        error = _error_of(run)
        if error is not None:
            problems.append(f"{cls.__name__} with the check off: {type(error).__name__}: {error}")
        with module.using_config("check_saved", True):
            error = _error_of(run)
        if error is None:
            problems.append(f"{cls.__name__}: the check raised nothing")
        elif not is_instance(error, RuntimeError):
            problems.append(f"{cls.__name__}: {type(error).__name__}, not RuntimeError: {error}")
        elif cls.__name__ not in str(error) or not re.search(pattern, str(error)):
            problems.append(f"{cls.__name__}: the message {str(error)!r} does not name the "
                            f"class and {value}")
    return Measurement.from_problems(
        problems,
        expected=expected)


def _elu_class(module, sometimes):
    """ELU (alpha 1): y = x where x > 0, else e^x - 1. Its backward reads its
    output only when some x <= 0: a value read on some paths."""

    class ELU(module.Function):
        saves = ("positive", "y")
        reads_sometimes = ("y",) if sometimes else ()

        def forward(self, x):
            self.positive = x > 0
            self.y = np.where(self.positive, x, np.expm1(np.minimum(x, 0)))
            return self.y

        def backward(self, gy):
            if self.positive.all():
                return gy
            return np.where(self.positive, gy, gy * (self.y + 1))

    return ELU


@STAGE.contract(hint="""
    A value that backward reads only on some paths (a where-style branch) is needed
    all the same: the Function's class must be able to say so, and the check must
    then leave it alone on the paths that do not read it, and only there.""")
def reads_sometimes_is_honoured(module):
    """A value listed in reads_sometimes is not reported when its branch is not taken; unlisted, it is."""
    expected = "an error only when y is unlisted and all of x > 0; x.grad right otherwise"
    missing = _without_check_mode(module, expected)
    if missing:
        return missing
    problems = []
    with module.using_config("check_saved", True):
        for sometimes in (True, False):
            for values in ([0.5, 2.0], [-0.5, 2.0]):
                x = module.Variable(np.array(values))
                run = lambda: module.sum(_elu_class(module, sometimes)()(x)).backward()  # noqa
                error = _error_of(run)
                should_raise = not sometimes and min(values) > 0
                case = f"reads_sometimes={'(y,)' if sometimes else '()'}, x={values}"
                if should_raise and error is None:
                    problems.append(f"{case}: no error for y, never read")
                elif should_raise and not re.search(r"\by\b", str(error)):
                    problems.append(f"{case}: the message {str(error)!r} does not name y")
                elif not should_raise and error is not None:
                    problems.append(f"{case}: {type(error).__name__}: {error}")
                elif not should_raise and not np.allclose(
                        array(x.grad), np.where(x.data > 0, 1.0, np.exp(x.data))):
                    problems.append(f"{case}: x.grad is wrong")
    return Measurement.from_problems(
        problems,
        expected=expected)


#: The standard workload's graph holds, on stage 07, the pre-activation of each
#: hidden layer (kept by sigmoid) and the output of each matmul (kept by add):
#: five arrays of up to 64 KiB. Keeping only what backward reads saves at least this.
SAVED = 200 * KIB


@STAGE.contract(hint="""
    Count the arrays that the graph holds when backward starts: which of them does
    no backward read? Each one that only a careless Function keeps is memory held
    for the whole of backward.""")
def holds_less_than_stage07_at_backward_start(module):
    """When backward starts, the standard workload's graph holds at least 200 KiB less than on stage 07."""
    before = settled_timeline(load_stage(7)).at_backward_start
    after = settled_timeline(module).at_backward_start
    return Measurement(
        passed=after <= before - SAVED,
        expected=f"<= {format_bytes(before - SAVED)} (stage 07's {format_bytes(before)} less "
                 f"{format_bytes(SAVED)})",
        measured=format_bytes(after))


@STAGE.contract(hint="""
    Every object of a class without __slots__ carries a dictionary for its
    attributes, a few hundred bytes per graph node. The built-in Functions know
    every attribute they will ever have.""")
def builtin_functions_have_slots(module):
    """Instances of the built-in Functions have no __dict__."""
    made = {"Add": (), "Sub": (), "Mul": (), "Exp": (), "Sigmoid": (), "Tanh": (),
            "Sum": (), "BroadcastTo": ((1,),), "Reshape": ((1,),), "MatMul": ()}
    with_dict = []
    # A stage file defines them at the top; a package (dezero_mini) in its
    # core and functions modules, as DeZero does.
    places = [module, getattr(module, "core", None), getattr(module, "functions", None)]
    for name, args in made.items():
        cls = next((getattr(p, name) for p in places if hasattr(p, name)), None)
        if cls is None:
            with_dict.append(f"{name} (missing)")
        elif hasattr(cls(*args), "__dict__"):
            with_dict.append(name)
    return Measurement(
        passed=not with_dict,
        expected="no __dict__ on Add, Sub, Mul, Exp, Sigmoid, Tanh, Sum, BroadcastTo, "
                 "Reshape, MatMul",
        measured=f"a __dict__ on {', '.join(with_dict)}" if with_dict else "no __dict__")
