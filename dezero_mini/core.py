"""The core of dezero_mini: Variable, Function, the graph switches, arithmetic.

This is the framework of stage 08 of the course, cleaned up:

* ``Function.outputs`` are weak references, so a graph has no reference
  cycle and is freed by reference counting alone (stage 03);
* ``backward(retain_grad=False)`` drops intermediate gradients as soon as
  they have been used (stage 04);
* ``no_grad()`` / ``using_config`` switch graph building off (stage 05);
* backward frees what each Function kept as soon as its backward has run
  (``retain_graph=False``, stage 06); ``detach()`` and ``item()`` (stage 07);
* the graph links Functions (``next_functions``), not the Variables between
  them, and each Function keeps only what its backward reads, named in
  ``saves`` (its ``__slots__``); ``Config.check_saved`` checks it (stage 08);
* a number or an array written into a formula (``y * 2 + 1``) is a
  constant: it reaches forward as an array, with no Variable around it and
  no edge in the graph, so backward neither computes nor keeps a gradient
  for it (nobody could ever read it), and a Function keeps nothing for a
  gradient that is not needed (``y * 2.0`` keeps the number, not y's
  array). ``Variable.requires_grad = False`` makes a Variable of the user's
  a constant in the same way;
* every Variable of numbers takes part in backward, as in DeZero, and a
  gradient is never truncated or wrapped around: a Variable of integers or
  bools gets a float64 gradient (NumPy's default float), where DeZero gives
  it its integer dtype (255 for ``-x`` on uint8).

The gradients that backward leaves in ``grad`` are Variables, as in DeZero.
While it runs, they are plain numpy arrays, and each Function's gradient
formula runs on arrays; only ``backward(create_graph=True)`` runs the
formulas on Variables, building the graph of the backward pass for
higher-order derivatives. Written once, a formula works both ways (see
``Function``), and an ordinary backward pass makes no Variable or Function
per gradient, which halved the time per operation of this core (measured
with benchmarks/bench_ops.py against its earlier Variable-only version).
"""
import contextlib
import functools
import heapq
import itertools
import math
import re
import sys
import threading
import weakref

import numpy as np

from dezero_mini import arrays, environment  # neither imports anything of dezero_mini
from dezero_mini.validation import expect, expect_flag  # nor does this one

# The one circle of the framework, inherited from DeZero: ``functions`` is made
# of this module's Function and Variable, and Variable's operators and methods
# (``@``, ``x[i]``, ``reshape``, ``sum``, ...) are functions of ``functions``.
# So core imports it lazily, inside those methods, where both are loaded.


# --- Configuration ----------------------------------------------------------------
class _Config(threading.local):
    """Switches read by every Function call.

    A ``threading.local`` subclass: the class attributes are the defaults in
    every thread, and a ``no_grad()`` block in one thread does not change the
    mode of another.
    """

    enable_backprop = True  # build the graph that backward needs
    train = True  # layers such as dropout behave differently at test time
    warn_leaks = environment.warn_leaks_setting()  # N: warn when the graph grows N updates in a row
    # Run every backward on a stand-in that notes what it reads, and raise when
    # a Function holds an input or a saved value that its backward never read
    # (stage 08 of the course; PaddlePaddle's unused-input check).
    check_saved = environment.check_saved_setting()

    def __setattr__(self, name, value):
        threading.local.__setattr__(self, name, value)
        if name == "enable_backprop":
            _note_graph_mode(value)

    def __delattr__(self, name):
        threading.local.__delattr__(self, name)
        if name == "enable_backprop":
            _note_graph_mode(True)  # (back to the class's default)


# The threads (by ``threading.get_ident()``) in which ``Config.enable_backprop``
# may be False now. The built-in Functions ask on every call whether to build
# the graph, and reading an attribute of a ``threading.local`` costs a tenth of
# a small op (it first finds the thread's own values): while this set is
# empty, no thread has switched graph building off, and they need not read
# Config at all (see _unary and _binary). Kept by _Config itself, so that every
# way of setting the switch (no_grad, using_config, an assignment) keeps it.
_THREADS_WITHOUT_GRAPH = set()


def _note_graph_mode(enable_backprop):
    """Note whether the current thread builds graphs (``enable_backprop``)."""
    if enable_backprop:
        _THREADS_WITHOUT_GRAPH.discard(threading.get_ident())
    else:
        _THREADS_WITHOUT_GRAPH.add(threading.get_ident())


Config = _Config()


@contextlib.contextmanager
def using_config(name, value):
    """Set ``Config.<name>`` to ``value`` inside the block; restore it after,
    even when the block raises."""
    expect(name, str, "using_config", "name", "the name of a setting of Config, such as "
           "'enable_backprop'")
    if not hasattr(Config, name):
        raise AttributeError(f"using_config: Config has no setting {name!r}")
    old_value = getattr(Config, name)
    setattr(Config, name, value)
    try:
        yield
    finally:
        setattr(Config, name, old_value)


def no_grad():
    """A block in which Functions build no graph (for inference and updates)."""
    return using_config("enable_backprop", False)


def test_mode():
    """A block in which layers run in inference mode (``Config.train`` False)."""
    return using_config("train", False)


# --- Variable ---------------------------------------------------------------------
class Variable:
    """A node of the graph that holds an array (``data``) and its gradient."""

    # A graph has many Variables, and every op reads and writes their
    # attributes: ``__slots__`` stores them in the object itself rather than in
    # a per-object dict, which makes each Variable smaller and each attribute
    # access faster. ``__weakref__`` keeps weak references possible: a
    # Function holds its outputs through them, and so do the course's
    # instruments. (A subclass without ``__slots__``, such as Parameter, gets
    # a ``__dict__`` back, so it can still take any attribute.)
    __slots__ = ("data", "name", "grad", "creator", "generation", "made_without_graph",
                 "_requires_grad", "__weakref__")
    __array_priority__ = 200  # so that ndarray * Variable calls Variable.__rmul__

    def __init__(self, data, name=None):
        if data is not None and not isinstance(data, np.ndarray):
            raise TypeError(
                f"Variable: data must be a numpy.ndarray or None, got {type(data).__name__}"
            )
        if data is not None and type(data.dtype) not in _NUMBER_DTYPES:
            # Strings, objects, dates: no operation of the framework computes
            # on them, so they are refused here rather than at the first one.
            # (The outputs that Functions make do not come through here.)
            raise TypeError(
                f"Variable: data must be numbers (bool, int, float or complex), got an array of "
                f"{data.dtype}; convert it first, for example Variable(x.astype(np.float64))")
        self.data = data
        self.name = name
        self.grad = None
        self.creator = None
        self.generation = 0
        # True for the output of a Function called under no_grad(): it has no
        # creator, like a leaf, but backward() on it is a mistake to report.
        self.made_without_graph = False
        # Whether backward gives this Variable a gradient (see requires_grad):
        # True for every Variable of numbers, as in DeZero.
        self._requires_grad = True

    @property
    def requires_grad(self):
        """Whether backward gives this Variable a gradient and passes one on
        to what it was computed from.

        True for every Variable of numbers you make (bool, integer,
        floating point, complex), as in DeZero. Set it to False yourself, as
        in PyTorch, for an input that needs no gradient: it becomes a
        constant, like a number or an array written into a formula (``y *
        2``, ``x + np.ones(3)``), whose gradient nobody could ever read.

        The gradient of an integer or bool Variable is float64 (NumPy's
        default float): a rate of change, which integers cannot hold. So
        ``x + x`` on bools gives 2 (DeZero: True) and ``-x`` on uint8 gives -1
        (DeZero: 255). PyTorch instead refuses gradients for integers.
        """
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if value and self.data is not None and type(self.data.dtype) not in _NUMBER_DTYPES:
            raise RuntimeError(
                f"requires_grad: only Variables of numbers (bool, integer, floating point, "
                f"complex) can require gradients; this one holds {self.data.dtype}. Make it "
                f"numbers first: Variable(x.astype(np.float64))")
        self._requires_grad = bool(value)

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self.data.size

    @property
    def dtype(self):
        return self.data.dtype

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        if self.data is None:
            return "variable(None)"
        body = str(self.data).replace("\n", "\n" + " " * 9)
        return f"variable({body})"

    def set_creator(self, func):
        self.creator = func
        self.generation = func.generation + 1

    def cleargrad(self):
        self.grad = None

    def unchain(self):
        """Forget the creator: this Variable becomes a leaf of any later graph."""
        self.creator = None

    def detach(self):
        """A new Variable with the same array (shared, not copied) and no
        creator, as PyTorch's ``detach()``: the value without the graph, for
        keeping it (a log, a cache) without keeping every batch's graph."""
        return Variable(self.data, name=self.name)

    def item(self):
        """The value of a one-element Variable as a Python number (``float``
        or ``int``, as numpy's ``item()``), as PyTorch's ``item()``: what to
        add to a running total, rather than the Variable and its graph."""
        if self.data is None or self.data.size != 1:
            shape = None if self.data is None else self.data.shape
            raise ValueError(f"item: only a Variable of one element has a single value; "
                             f"this one has shape {shape}")
        return self.data.item()

    def __float__(self):
        # float(loss), as in PyTorch: the same number as item(), never a graph.
        return float(self.item())

    def unchain_backward(self):
        """Cut the graph behind this Variable: every Function behind it lets go
        of the Functions before it, and the Variables still alive that those
        made become leaves (as DeZero's, for truncated backpropagation)."""
        # After a backward that freed the graph (retain_graph=False) there
        # are no links left to walk: the Variables still alive that it freed
        # the creators of (an RNN's hidden state) are made leaves from the
        # list that backward left, so that DeZero's ``loss.backward();
        # loss.unchain_backward()`` cuts the next graph off from this one.
        for ref in _FREED_BEHIND.pop(self, ()):
            x = ref()
            if x is not None and x is not self:
                x.unchain()
        funcs = [self.creator] if self.creator is not None else []
        seen = set()
        while funcs:
            f = funcs.pop()
            edges = f.next_functions
            if f in seen or edges is None:
                continue
            seen.add(f)
            for i, edge in enumerate(edges):
                if edge is not None and edge[1] is not None:  # a Function: cut it off
                    creator, index = edge
                    funcs.append(creator)
                    x = creator.outputs[index]()
                    edge = None if x is None else (x, None)  # the Variable, a leaf now
                    if x is not None:
                        x.unchain()
                elif edge is not None and edge[0].creator is not None:
                    funcs.append(edge[0].creator)  # (made by a Function written DeZero's way)
                    edge[0].unchain()
                edges[i] = edge
            _link(f, edges)
        if self.creator is not None and self.creator.next_functions is None:
            # Its own creator was freed by that backward too: there is nothing
            # to go back through, so this Variable becomes a leaf as well, and
            # the next window's graph (DeZero's ``loss += ...`` after
            # ``loss.unchain_backward()``) starts from its value.
            self.unchain()

    def backward(self, retain_grad=False, create_graph=False, retain_graph=None):
        """Compute the gradient of this Variable with respect to every
        Variable that it was computed from.

        retain_grad: keep the gradients of intermediate Variables in their
            ``grad`` (by default each is dropped once its Function has passed
            it on, and this Variable's own ``grad`` is None afterwards). A
            gradient kept this way stays until you clear it or the graph dies;
            a later backward without retain_grad leaves it as it is.
        create_graph: build the graph of the backward pass, so that the
            gradients can be differentiated again.
        retain_graph: keep the graph for another backward. By default (False)
            each Function lets go of its inputs as soon as its own backward
            has run (stage 06 of the course), so the activations are freed
            while backward is still running, and a second backward through
            the same graph raises RuntimeError. None means "the same as
            create_graph", as in PyTorch: double backprop (``y.backward(
            create_graph=True)`` and then ``x.grad.backward()``) goes through
            the first graph again, since the gradient's graph refers to its
            Variables, so create_graph=True keeps the graph unless you pass
            ``retain_graph=False`` yourself.

        Calling backward twice on a kept graph (or on two graphs that share
        leaves) adds up the gradients in the leaves, as in DeZero and
        PyTorch: call ``cleargrad()`` on them in between to start from zero.
        With ``retain_grad=False`` the intermediate gradients are gone, so
        the second call starts again from this Variable's gradient: ``1``
        unless you set ``grad`` yourself.
        """
        for flag, value in (("retain_grad", retain_grad), ("create_graph", create_graph),
                            ("retain_graph", retain_graph)):
            if not (value is None and flag == "retain_graph"):
                expect_flag(value, "backward", flag)
        if retain_graph is None:
            retain_graph = create_graph
        if self.data is not None and type(self.data.dtype) not in _NUMBER_DTYPES:
            raise RuntimeError(
                f"backward: this Variable holds {self.data.dtype} values; only numbers (bool, "
                "integer, floating point, complex) have gradients. Compute it from Variables of "
                "numbers")
        if self.made_without_graph:
            raise RuntimeError(
                "backward: this Variable was computed under no_grad(), so it has no graph to "
                "differentiate; compute it with Config.enable_backprop True, outside no_grad() "
                "(a gradient is such a Variable too, unless backward ran with create_graph=True)"
            )
        if self.grad is None:
            self.grad = Variable(np.ones(self.data.shape, _gradient_dtype(self.data.dtype)))
        else:
            self.grad = _check_gradient(self.grad, self, Variable, "backward: the grad that you set")
        if self.creator is None:
            return  # a leaf: its gradient is its own grad, nothing to propagate

        # The gradients on their way through the graph. In an ordinary pass
        # they are plain numpy arrays: nothing will ever differentiate them,
        # so wrapping each in a Variable, and each product of a backward
        # formula in a Function, would be work for nothing. With create_graph
        # they are Variables, so that every step of the backward pass becomes
        # a node of a new graph. The leaves get Variables either way, at the
        # end (DeZero's ``x.grad.data``).
        kind = Variable if create_graph else np.ndarray
        # The graph links Functions (``next_functions``), not the Variables
        # between them, which may be gone: the gradients wait by Function,
        # one per output, until the Function runs; the leaves' by Variable.
        # A heap ordered by generation (newest first) runs each Function
        # once, after every Function that uses its outputs: O(log n) a push.
        # The counter breaks ties between Functions of the same generation in
        # the order they were reached, so that the gradients are summed in
        # the same order on every run (floating-point sums depend on it).
        # ``ready``: a Function reached while the heap was empty, held out of
        # it until a second one is reached. In a chain (each Function's
        # output used once) the next Function is always alone: the heap's
        # pushes and pops would give it back at once, in the same order.
        # The gradients wait in ``grads``: for a Function of one output (the
        # common case) the gradient itself, else a list, one per output.
        order = itertools.count()
        creator, index = _edge_to_creator(self)
        seed = self.grad if create_graph else self.grad.data
        if creator.outputs.__class__ is _OneOutput:
            grads = {creator: seed}
        else:
            grads = {creator: [None] * len(creator.outputs)}
            grads[creator][index] = seed
        leaf_grads, outputs_read = {}, {}
        leaf_sums = set()  # the leaves whose gradient in leaf_grads is a sum made here
        held_outputs = []  # outputs of freed Functions that something else holds (see unchain_backward)
        pending, ready = [], creator
        heappush, heappop = heapq.heappush, heapq.heappop  # local names: looked up once
        check_saved = Config.check_saved
        ordinary = not (retain_grad or create_graph or check_saved)

        # The backward pass builds a graph only when asked to (create_graph).
        # One switch for the whole pass, restored even if a backward raises,
        # rather than a ``with using_config(...)`` block for every Function.
        enable_backprop = Config.enable_backprop
        Config.enable_backprop = create_graph
        f = None
        try:
            while ready is not None or pending:
                if ready is not None:
                    f, ready = ready, None
                else:
                    f = heappop(pending)[2]
                edge_count = f._edge_count
                if edge_count is None:
                    raise RuntimeError(
                        f"backward: {type(f).__name__} has already let go of its inputs and of "
                        "what its backward reads: an earlier backward() went through this graph and freed it, to "
                        "save memory. Call backward(retain_graph=True) the first time if you "
                        "need to go through the graph a second time (or to read a Function's "
                        "saved values after backward)."
                    )
                # The outputs' gradients leave ``grads`` as they are used: with
                # retain_grad=False nothing else holds them, so each is freed
                # as soon as the loop moves on.
                gys = grads.pop(f)
                one_output = f.outputs.__class__ is _OneOutput
                if ordinary and f.array_backward:  # the common case: arrays in, arrays out
                    gxs = f.backward(gys) if one_output else f.backward(*gys)
                    lifted = None
                else:
                    gxs, lifted = _run_backward(f, (gys,) if one_output else gys, retain_grad,
                                                create_graph, check_saved)
                if gxs.__class__ is not tuple:
                    gxs = (gxs,)
                if len(gxs) > edge_count:
                    raise _too_many_gradients(f, len(gxs), edge_count)
                # A backward may return fewer gradients than inputs (a loss
                # returns none for its labels), as in DeZero; never more.
                # (f.inputs: the Variables of a Function written DeZero's way)
                inputs = f.inputs
                for i, gx in enumerate(gxs):
                    # The edge of input i, from f's slots (see Function).
                    if i == 0:
                        node = f._node0
                        index = f._index0
                    elif i == 1:
                        node = f._node1
                        index = f._index1
                    else:
                        node = f._more_edges[2 * i - 4]
                        index = f._more_edges[2 * i - 3]
                    if gx is None or node is None:
                        continue  # this input gets no gradient (a constant, a loss's labels)
                    x = None if inputs is None else inputs[i]
                    # The Variable that receives it, when it is still there: its
                    # array gives the shape and dtype the gradient must have.
                    if x is None:
                        if index is None:
                            x = node
                        else:
                            x = node.outputs
                            x = (x if x.__class__ is _OneOutput else x[index])()
                    if x is not None:
                        data = x.data
                        # (an integer Variable's float64 gradient takes the slow test)
                        if gx.__class__ is not kind or gx.shape != data.shape or gx.dtype is not data.dtype:
                            gx = _check_gradient(gx, x, kind, f"{type(f).__name__}.backward")
                    elif gx.__class__ is not kind:
                        gx = _as_gradient(gx, kind, f"{type(f).__name__}.backward")
                    if index is None:
                        if node.creator is None:  # a leaf keeps its gradient (given at the end)
                            held = leaf_grads.get(node)
                            if held is None:
                                leaf_grads[node] = gx
                            elif held.__class__ is np.ndarray and node in leaf_sums:
                                # A sum that this pass made and nothing else holds,
                                # of the leaf's shape and dtype (both checked above):
                                # added to in place, without a new array each time.
                                held += gx
                            else:
                                leaf_grads[node] = held + gx
                                leaf_sums.add(node)
                            continue
                        # Made by a Function written DeZero's way, whose backward may
                        # read its outputs (``self.outputs[0]()``): alive until it runs.
                        outputs_read.setdefault(node.creator, []).append(node)
                        node, index = _edge_to_creator(node)
                    held = grads.get(node)
                    if node.outputs.__class__ is _OneOutput:
                        if held is None:  # the first gradient for this Function: it is reached
                            grads[node] = gx
                            if ready is None and not pending:
                                ready = node  # alone: no heap needed (yet)
                                continue
                            if ready is not None:  # not alone any more: both in the heap, in order
                                heappush(pending, (-ready.generation, next(order), ready))
                                ready = None
                            heappush(pending, (-node.generation, next(order), node))
                        else:
                            grads[node] = held + gx
                        continue
                    if held is None:
                        held = grads[node] = [None] * len(node.outputs)
                        if ready is not None:  # (see above)
                            heappush(pending, (-ready.generation, next(order), ready))
                            ready = None
                        heappush(pending, (-node.generation, next(order), node))
                    held[index] = gx if held[index] is None else held[index] + gx
                if not retain_graph:
                    # Its backward has run: what it saved for it can go. When
                    # only this loop holds f, reference counting (stage 03)
                    # frees it, and all it saved, as soon as the loop moves
                    # on; clearing it field by field first was a tenth of
                    # backward's time. Someone else may hold it: a Variable
                    # it made that the user kept, or another graph (stage 07).
                    if sys.getrefcount(f) > _HELD_BY_ONE_NAME:
                        f.release()
                        held_outputs += f.outputs  # (weak references)
                elif lifted:
                    _restore_saved(f, lifted)
                if outputs_read:
                    outputs_read.pop(f, None)
                gys = gxs = lifted = inputs = None  # would keep the last arrays alive while the next Function runs
            if held_outputs:
                _FREED_BEHIND[self] = held_outputs
            f = node = None  # the last Function: freed now, like the others (errors from here on are not its)
            # The leaves add their gradients to those they may already have, as
            # in DeZero and PyTorch.
            if not retain_grad:
                self.grad = None  # the seed was used like any other output gradient
            # One lock for every leaf of every backward: two threads adding
            # into one Parameter would otherwise both read its old grad, and
            # one sum would be lost (PyTorch's engine guarantees the same).
            # Taken once per backward, so its cost does not grow with the graph.
            with _LEAF_GRAD_LOCK:
                for x, g in leaf_grads.items():
                    if kind is np.ndarray:
                        g = Variable(as_array(g))  # (0-d arithmetic gives numpy scalars)
                    x.grad = g if x.grad is None else x.grad + g
        except _NAMED_ERRORS as e:
            if f is None:
                raise
            _raise_named(e, type(f).__name__, f"{type(f).__name__}.backward")
        finally:
            Config.enable_backprop = enable_backprop

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        from dezero_mini import functions

        return functions.reshape(self, tuple(shape))

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)) or axes == (None,):
            axes = axes[0]
        from dezero_mini import functions

        return functions.transpose(self, axes or None)

    @property
    def T(self):
        from dezero_mini import functions

        return functions.transpose(self)

    def sum(self, axis=None, keepdims=False):
        from dezero_mini import functions

        return functions.sum(self, axis, keepdims)


# The dtypes whose gradients have their own dtype: floating point and
# complex. Tested by the dtype's class, the cheapest test (it runs for every
# result of every op).
_INEXACT_DTYPES = frozenset(type(np.dtype(t)) for t in np.typecodes["AllFloat"])
# The dtypes that take part in backward: those and the integers and bools,
# whose gradients are float64 (``_gradient_dtype``).
_NUMBER_DTYPES = _INEXACT_DTYPES | frozenset(
    type(np.dtype(t)) for t in np.typecodes["AllInteger"] + "?")
_FLOAT64 = np.dtype(np.float64)


def _gradient_dtype(dtype):
    """The dtype of the gradient of a Variable of ``dtype`` (a number's):
    its own for floating point and complex, float64 for integers and bools,
    so that a gradient is never truncated or wrapped around."""
    return dtype if type(dtype) in _INEXACT_DTYPES else _FLOAT64


def _in_gradient_dtype(x):
    """``x`` (an array or a Variable of the graph) in its gradient's dtype:
    itself when it is floating point; integers and bools as float64, so
    that a backward formula that multiplies or raises them (``x1 ** 2``,
    ``x ** (c - 1)``) cannot wrap around (a Variable goes through ``Cast``,
    which keeps it in the graph that create_graph builds)."""
    if type(x.dtype) in _INEXACT_DTYPES:
        return x
    return Cast(_FLOAT64)(x) if isinstance(x, Variable) else x.astype(_FLOAT64)


# Variable -> the outputs (weak references) of the Functions that its last
# backward freed while something else held them (see unchain_backward).
_FREED_BEHIND = weakref.WeakKeyDictionary()
# Taken while backward adds the leaves' gradients to their ``grad``.
_LEAF_GRAD_LOCK = threading.Lock()


class Parameter(Variable):
    """A Variable that a Layer owns and an optimizer updates.

    ``ndim``: the number of dimensions its data must have, when the layer
    knows it before the data exists (``Linear``'s lazy ``W`` is 2-D): data
    of another number of dimensions is refused whenever it is set
    (``load_weights``, ``W.data = ...``), since NumPy would broadcast a 1-D
    weight through ``x @ W`` without a word. None: any."""

    def __init__(self, data, name=None, ndim=None):
        self.ndim_expected = ndim
        super().__init__(data, name)

    @property
    def data(self):
        return _VARIABLE_DATA.__get__(self)

    @data.setter
    def data(self, value):
        self.check_data(value)
        _VARIABLE_DATA.__set__(self, value)

    def check_data(self, value):
        """Raise ValueError when ``value`` cannot be this Parameter's data:
        its number of dimensions is not ``ndim_expected``."""
        expected = getattr(self, "ndim_expected", None)
        if expected is not None and value is not None and getattr(value, "ndim", expected) != expected:
            raise ValueError(
                f"Parameter{' ' + repr(self.name) if self.name else ''}: its data must have "
                f"{expected} dimension{'s' if expected != 1 else ''}, got an array of shape "
                f"{value.shape}")


_VARIABLE_DATA = Variable.__dict__["data"]  # the slot that Parameter's property stands in front of


def as_array(x, array_module=np):
    """Turn a Python or NumPy scalar into a 0-d array; leave arrays alone."""
    if isinstance(x, np.ndarray):  # the common case, tested first: np.isscalar is slow on arrays
        return x
    return array_module.array(x) if np.isscalar(x) else x


def as_variable(obj):
    """Wrap an array or a scalar in a Variable; leave Variables alone."""
    if isinstance(obj, Variable):
        return obj
    if isinstance(obj, _WatchedInput):  # the check mode's stand-in for an input
        return obj._read()
    return Variable(as_array(obj))


_PYTHON_NUMBERS = (bool, int, float, complex)


def _constant_array(func, x, inputs):
    """``x``, an input of a call of ``func`` that is neither a Variable nor
    the check mode's stand-in for one, as the array of a constant.

    The one rule for a Python number that meets Variables (the other
    ``inputs``): it takes the dtype that NumPy gives the same expression on
    arrays, where a Python number is "weak" (NEP 50): ``float32 * 2.0`` is
    float32, ``int64 * 2.5`` is float64. Made into an array on its own,
    ``2.0`` would be a float64 array, which is "strong" and would turn every
    float32 result (and its gradients) into float64. NumPy scalars
    (``np.float64(2)``) and arrays keep their own dtype, as in NumPy. (The
    arithmetic Functions, ``takes_numbers``, get the number itself while the
    graph is built, and NumPy applies the same rule.)
    """
    if isinstance(x, np.ndarray):
        return x
    if type(x) in _PYTHON_NUMBERS:
        dtypes = ()  # (a loop: a list comprehension costs a quarter of a small op here)
        for v in inputs:
            if isinstance(v, Variable):
                dtypes += (v.data.dtype,)
        if len(dtypes) == 1:
            array = _number_array(x, dtypes[0])
            if array is not None:
                return array
        return np.array(x, dtype=_weak_result_type(type(x), *dtypes) if dtypes else None)
    array = as_array(x)  # a NumPy scalar
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{type(func).__name__}: an input must be a Variable, a numpy array or a "
                        f"number, got {type(x).__name__}")
    return array


# A Python number in a formula (``y * 0.5``) as the 0-d array that NumPy would
# make of it next to float64 or float32 arrays, made once per number and
# dtype: NumPy takes a 0-d array of the right dtype for less than it spends
# turning the number into one on every call (nearly as much as the product of
# two small arrays), and the Functions that keep the number (Mul, Div) keep
# the array, for their backward's product too. Read-only, since every
# formula that writes the number shares it.
_NUMBER_ARRAYS = {_FLOAT64: {}, np.dtype(np.float32): {}}
_NUMBER_ARRAYS_KEPT = 1024  # per dtype; then the cache starts again (numbers computed in a loop)
_EXACT_INTEGERS = 2**53  # larger integers would round twice on their way to float32


def _number_array(number, dtype):
    """``number`` (a bool, int or float) as a read-only 0-d array of ``dtype``,
    the dtype NumPy gives it next to an array of ``dtype`` (NEP 50: a Python
    number is "weak"), from the cache; None when that is not ``dtype`` (a
    complex number, an array that is not float64 or float32), for -0.0
    (which the cache would take for 0.0) and when the number does not fit
    ``dtype``, so that the caller leaves it to NumPy, whose result or error
    it then is."""
    arrays = _NUMBER_ARRAYS.get(dtype)
    if arrays is None or number.__class__ is complex or (
            not number and math.copysign(1.0, number) < 0):
        return None
    array = arrays.get(number)
    if array is None:
        if number.__class__ is int and abs(number) > _EXACT_INTEGERS:
            return None
        try:
            with np.errstate(all="raise"):  # out of float32's range: NumPy's own result or error
                array = np.array(number, dtype=dtype)
        except (ArithmeticError, ValueError):
            return None
        array.flags.writeable = False
        if len(arrays) >= _NUMBER_ARRAYS_KEPT:
            arrays.clear()
        arrays[number] = array
    return array


def _number_of(number, dtype):
    """What forward gets for the Python ``number`` that meets an array of
    ``dtype``: its array of _number_array, else the number itself."""
    arrays = _NUMBER_ARRAYS.get(dtype)
    array = None if arrays is None or not number else arrays.get(number)  # (the fast way)
    if array is None:
        array = _number_array(number, dtype)
    return number if array is None else array


def _constant_variable(array):
    """A constant as a Variable (for a Function that keeps its inputs
    DeZero's way): one that needs no gradient."""
    constant = _output_variable(array)
    constant._requires_grad = False
    return constant


def _output_variable(array):
    """A Variable that the framework makes for an array that a Function
    computed (or a constant): through ``Variable.__init__``, so that an
    instrument that wraps it sees it born, but of any dtype (a forward may
    compute strings or dates, which then get no gradient), where a Variable
    that the user makes must hold numbers."""
    output = Variable(None)
    output.data = array
    output._requires_grad = type(array.dtype) in _NUMBER_DTYPES
    return output


@functools.lru_cache(maxsize=256)
def _weak_result_type(number_type, *dtypes):
    """The dtype of ``dtypes`` meeting a Python number of ``number_type``.
    Under NEP 50 it depends on the number's type, never on its value, so it
    is computed once per combination (``np.result_type`` costs more than the
    rest of a small op)."""
    return np.result_type(*dtypes, number_type(0))


# The errors that a Function's forward or backward may raise on bad input
# (numpy's AxisError is a ValueError and an IndexError).
_NAMED_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError)


def _raise_named(error, name, where):
    """Raise ``error`` again with a message that starts with ``where`` (the
    Function's ``name`` and what it was doing), unless its message already
    names the Function: the one place that makes every error of a Function,
    forward or backward, say which one it was. The original error stays
    attached as the cause."""
    message = str(error)
    if message.startswith((name + ":", name + ".")):
        raise error
    message = f"{where}: {message}"
    try:
        named = type(error)(message)
    except Exception:  # an exception class whose constructor wants other arguments
        named = None
    if named is None or str(named) != message:
        named = next(cls for cls in _NAMED_ERRORS if isinstance(error, cls))(message)
    raise named from error


def _output_array(func, y):
    """The array of an output that ``func.forward`` returned as something
    other than an ndarray: a number becomes a 0-d array, anything else is an
    error that names the Function."""
    if isinstance(y, np.ndarray):  # a subclass of ndarray
        return y
    if np.isscalar(y):
        return np.array(y)
    raise TypeError(
        f"{type(func).__name__}.forward must return numpy arrays (or a tuple of them), "
        f"got {type(y).__name__}"
    )


def _as_gradient(gx, kind, where):
    """``gx`` in ``kind`` (``np.ndarray`` or ``Variable``), when the Variable
    it is for is gone, so that only its type can be checked."""
    if isinstance(gx, Variable):
        return gx if kind is Variable else gx.data
    if isinstance(gx, (np.ndarray, np.generic)):
        array = np.asarray(gx)
        return array if kind is np.ndarray else Variable(array)
    raise TypeError(f"{where}: a gradient must be a Variable or a numpy array, got {type(gx).__name__}")


def _check_gradient(gx, x, kind, where):
    """The gradient ``gx`` for the Variable ``x``, checked and given in
    ``kind`` (``np.ndarray`` or ``Variable``): an array is wrapped, a Variable
    unwrapped, anything else, or a wrong shape or dtype, is an error. Called
    only when the fast test in backward fails, or on a grad that the user set,
    so it can afford a clear message saying where the bad gradient came from."""
    if isinstance(gx, Variable):
        array = gx.data
    elif isinstance(gx, np.ndarray):
        array = gx
    elif isinstance(gx, np.generic):
        array = np.asarray(gx)  # numpy gives scalars, not 0-d arrays, for 0-d arithmetic
    else:
        raise TypeError(f"{where}: a gradient must be a Variable or a numpy array, got {type(gx).__name__}")
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{where}: the gradient holds {type(array).__name__}, not a numpy array")
    if array.shape != x.data.shape:
        raise ValueError(
            f"{where}: gradient of shape {array.shape} for a Variable of shape {x.data.shape}"
            + (f" ({x.name})" if x.name else "")
        )
    if type(x.data.dtype) not in _NUMBER_DTYPES:
        # Only numbers get an edge in the graph; this one held numbers
        # when the graph was built, replaced since.
        raise RuntimeError(f"{where}: a gradient for a Variable that now holds {x.data.dtype}; "
                           "only Variables of numbers have gradients (was its data "
                           "replaced after the graph was built?)")
    dtype = _gradient_dtype(x.data.dtype)
    if array.dtype != dtype:
        # Mixed precision (float32 weights, float64 data): as in PyTorch, each
        # gradient takes its input's dtype; an integer input's is float64.
        if kind is np.ndarray:
            return array.astype(dtype)
        return Cast(dtype)(gx if isinstance(gx, Variable) else Variable(array))
    if kind is np.ndarray:
        return array
    return gx if isinstance(gx, Variable) else Variable(array)


# --- Function ---------------------------------------------------------------------
class Function:
    """An operation of the graph. Subclasses define ``forward`` on arrays and
    ``backward``, which turns the gradients of the outputs into those of the
    inputs.

    The graph links Functions, not the Variables between them: each Function
    keeps ``next_functions``, where each input's gradient goes: ``(creator,
    output index)`` for a computed Variable, ``(variable, None)`` for a leaf
    (which keeps its gradient), None for an input that needs no gradient (a
    constant). So a Variable that the user lets go of is freed at once, even
    while the graph it belongs to lives (stage 08 of the course).

    What a Function keeps for its backward is named in one place, as in
    PyTorch's ``save_for_backward``:

    * ``saves``: the attributes that ``forward`` sets and ``backward`` reads,
      also the class's ``__slots__`` (so the object has no ``__dict__``).
      Such a Function keeps no input Variable, and its ``backward`` receives
      plain numpy arrays in an ordinary pass (``array_backward``). With
      ``backward(create_graph=True)`` it receives Variables, and the saved
      arrays named in ``saved_from`` (``{"x": "inputs[0]", "y":
      "outputs[0]"}``) are given back as the Variables of the graph they came
      from, so that the formula, written once, builds a graph too.
    * ``saves = None`` (the default): DeZero's way. The Function keeps its
      input Variables in ``self.inputs``, and its backward receives Variables
      (unless its class sets ``array_backward = True``).

    ``Config.check_saved`` (or ``DEZERO_MINI_CHECK_SAVED=1``) runs each
    backward on a stand-in that notes what it reads, and raises when a
    Function holds an input or a saved value that its backward never read;
    ``reads_sometimes`` lists the values read on some paths only.
    """

    # The attributes that the graph needs, in slots (see Variable). A subclass
    # that declares no ``__slots__`` (one written DeZero's way) gets a
    # ``__dict__`` back, so it can keep any attribute.
    #
    # The edges are kept flat, in the Function's own slots: the first two
    # inputs' (``_node0``, ``_index0``, ``_node1``, ``_index1``; the node is
    # the creator or the leaf, None for a constant) and one tuple
    # ``(node, index, node, index, ...)`` for the inputs after them.
    # ``next_functions`` gives them as a list of edges when it is read. A
    # list of tuples, kept, would be three objects more per operation that
    # the cyclic collector tracks and every full collection traverses: in a
    # graph of 100,000 operations they were half its time
    # (benchmarks/bench_ops.py counts the objects).
    # ``_edge_count``: how many inputs; None when the Function is not linked
    # into a graph (no_grad) or has let go of it (release).
    __slots__ = ("generation", "_edge_count", "_node0", "_index0", "_node1", "_index1",
                 "_more_edges", "outputs", "__weakref__")
    # The course's instruments (dezero_mini.memory: the reference graph, the
    # leak finder) show these slots as what they stand for: next_functions.
    _slots_shown_as = dict.fromkeys(
        ("_edge_count", "_node0", "_index0", "_node1", "_index1", "_more_edges"), "next_functions")

    saves = None  # None: DeZero's way, keep self.inputs (every input Variable)
    saved_from = {}  # saved array -> "inputs[i]" / "outputs[i]", for create_graph
    reads_sometimes = ()  # saved values (or "inputs[i]") that backward reads on some paths only
    inputs = None  # set on a Function written DeZero's way
    array_backward = False  # DeZero's contract: backward gets Variables
    takes_numbers = False  # True: forward gets a Python number as it is, not as a 0-d array

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "array_backward" not in vars(cls) and cls.saves is not None:
            cls.array_backward = True  # it names what it saves: its backward reads arrays
        # saved_from, parsed once per class: (attribute, True for an output, index)
        cls._lift = tuple((name, source.startswith("outputs"), int(re.search(r"\d+", source)[0]))
                          for name, source in cls.saved_from.items())

    def __call__(self, *inputs):
        build = Config.enable_backprop
        keep_inputs = build and self.saves is None  # DeZero's way: keep the input Variables
        variables = [] if keep_inputs else None
        # One loop over the inputs gives forward their arrays and, when the
        # graph is built, where each one's gradient goes (_edge_of) and the
        # generation. An edge is known before forward runs, so that forward
        # can keep only what the gradients that are needed read. (The
        # built-in Functions of one and two inputs take a shorter way for
        # the common cases: _unary and _binary.)
        xs, edges, generation = [], [], 0
        for x in inputs:
            if x.__class__ is not Variable and not isinstance(x, Variable):
                if isinstance(x, _WatchedInput):  # the check mode's stand-in for a Variable
                    x = x._read()
                else:
                    # A number or an array: a constant. Nothing will read a
                    # gradient for it, so it needs no edge, and no Variable
                    # either (making one cost about 8 % of such an op's time),
                    # unless the Function keeps its inputs DeZero's way. While
                    # the graph is built (so that forward knows the number
                    # needs no gradient, and reads nothing of it but its
                    # value), the arithmetic Functions take a Python number
                    # as it is: NumPy gives it its weak dtype (NEP 50) itself.
                    if build and self.takes_numbers and type(x) in _PYTHON_NUMBERS:
                        xs.append(x)
                    else:
                        x = _constant_array(self, x, inputs)
                        xs.append(x)
                        if keep_inputs:
                            variables.append(_constant_variable(x))
                    if build:
                        edges.append(None)
                    continue
            xs.append(x.data)
            if not build:
                continue
            if keep_inputs:
                variables.append(x)
            if x.generation > generation:
                generation = x.generation
            edges.append(_edge_of(x))
        if build:
            _link(self, edges)
            self.generation = generation
        else:
            self._edge_count = None
        try:
            ys = self.forward(*xs)
        except _NAMED_ERRORS as e:
            _raise_forward_error(self, e, xs)
        if build:
            if keep_inputs:
                self.inputs = variables  # DeZero's way: keep them all, read or not
            return _graph_outputs(self, ys, generation)
        if ys.__class__ is not tuple:
            output = _output_variable(ys if ys.__class__ is np.ndarray else _output_array(self, ys))
            output.made_without_graph = True  # so that backward() can explain
            return output
        outputs = [_output_variable(y if type(y) is np.ndarray else _output_array(self, y)) for y in ys]
        for output in outputs:
            output.made_without_graph = True
        return outputs

    @property
    def next_functions(self):
        """Where each input's gradient goes, one edge per input, as PyTorch's
        ``grad_fn.next_functions``: ``(creator, output index)`` for a computed
        Variable, ``(variable, None)`` for a leaf, None for an input that
        needs no gradient (a constant). None when the Function is not part of
        a graph: called under no_grad(), or freed by backward. A new list at
        each read (the Function keeps the edges flat: see ``__slots__``)."""
        count = getattr(self, "_edge_count", None)
        if count is None:
            return None
        flat = ((self._node0, self._index0) if count == 1 else
                (self._node0, self._index0, self._node1, self._index1)
                + (getattr(self, "_more_edges", None) or ()))  # (only Functions of 3 inputs or more set it)
        return [None if flat[i] is None else (flat[i], flat[i + 1]) for i in range(0, 2 * count, 2)]

    def release(self):
        """Let go of everything backward needed: the saved values, the input
        Variables of a Function written DeZero's way, and the Functions
        behind (backward calls it once this Function's backward has run,
        unless retain_graph)."""
        _unlink(self)
        if self.saves is None:
            self.inputs = None
        else:
            for name in self.saves:
                setattr(self, name, None)

    def inputs_like(self, gy):
        """The input Variables of a Function written DeZero's way, in the kind
        of the gradient ``gy``: their arrays in an ordinary backward pass,
        the Variables themselves when the pass builds a graph."""
        if isinstance(gy, Variable):
            return self.inputs
        return [x.data for x in self.inputs]

    def output_like(self, gy):
        """The (first) output, in the kind of ``gy`` (see inputs_like), while
        a Variable holds it (a Function written DeZero's way keeps the
        Variables it reads, so its inputs are alive)."""
        y = self.outputs[0]()
        return y if isinstance(gy, Variable) else y.data

    def forward(self, *xs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, *gys):
        raise NotImplementedError(f"{type(self).__name__}.backward")



# --- The graph as Functions link it ---------------------------------------------------------
_NO_EDGE = (None, None)  # a constant's edge, flat: no node, no index


def _link(f, edges):
    """Give ``f`` the edges ``edges`` (a list as ``next_functions`` gives it),
    kept flat in its slots (see Function)."""
    flat = ()
    for edge in edges:
        flat += _NO_EDGE if edge is None else edge
    f._node0, f._index0, f._node1, f._index1 = (flat + _NO_EDGE * 2)[:4]
    f._more_edges = flat[4:] or None
    f._edge_count = len(edges)


def _unlink(f):
    """``f`` lets go of its edges: it is no longer part of a graph."""
    f._edge_count = f._node0 = f._node1 = f._more_edges = None


def _gradient_targets(f):
    """Where the gradients of the first two inputs of ``f`` go (a node of
    its edges), None for an input that needs no gradient: a binary
    Function's ``forward`` keeps only what the needed gradients read. Both
    True when ``forward`` runs on its own, without a graph: keep everything."""
    try:
        return f._node0, f._node1
    except AttributeError:
        return _BOTH


def _edge_of(x):
    """Where the gradient of the input Variable ``x`` goes, as an edge of
    ``next_functions``: None when it needs none (``requires_grad`` False);
    ``(x, None)`` for a leaf, and for a Variable made by a Function written
    DeZero's way (whose backward may read its outputs, as in DeZero: the
    Function that uses them keeps them); else ``(creator, output index)``,
    without the Variable, which may go."""
    if not x._requires_grad:
        return None
    creator = x.creator
    if creator is None or creator.saves is None:
        return (x, None)
    outputs = creator.outputs
    if outputs.__class__ is _OneOutput:
        return (creator, 0)
    return (creator, outputs.index(weakref.ref(x)))


def _graph_outputs(f, ys, generation):
    """The output Variables of ``f`` (a Variable, or a list of them when
    ``forward`` returned a tuple), made from the arrays ``ys`` and linked
    into the graph: ``f`` is their creator and holds them weakly (stage 03).
    ``generation``: the highest of ``f``'s inputs."""
    if ys.__class__ is not tuple:
        # One output, the common case, written out without the lists and
        # loops of the general case below, and without Variable's __init__,
        # whose checks an output does not need: it is the framework's own
        # overhead on every operation. (Unless an instrument wraps __init__
        # to see every Variable born: dezero_mini.memory's leak finder.)
        ys = ys if ys.__class__ is np.ndarray else _output_array(f, ys)
        output = _new_object(Variable) if Variable.__init__ is _VARIABLE_INIT else _output_variable(ys)
        output.data = ys
        output.name = output.grad = None
        output.creator, output.generation, output.made_without_graph = f, generation + 1, False
        output._requires_grad = output.data.dtype.__class__ in _NUMBER_DTYPES
        f.outputs = _OneOutput(output)  # weak: no cycle (stage 03)
        return output
    outputs = [_output_variable(y if type(y) is np.ndarray else _output_array(f, y)) for y in ys]
    for output in outputs:
        output.creator = f
        output.generation = generation + 1
    f.outputs = [weakref.ref(output) for output in outputs]
    return outputs


def _raise_forward_error(f, error, xs):
    """Raise ``error``, which ``f.forward`` raised on the arrays ``xs``, named
    after ``f`` and the shapes of its inputs."""
    shapes = ", ".join(str(np.shape(x)) for x in xs)
    _raise_named(error, type(f).__name__, f"{type(f).__name__}: inputs of shapes {shapes}")


# A Function call is the framework's own cost on every operation: Function.__call__
# serves every kind of input (constants, DeZero's Functions, no_grad, the
# check mode's stand-ins) in a loop. The built-in Functions of one and two
# inputs (``F.sin``, ``+``, ``*``) are made by the two below, which write out
# the common case in one frame, a graph built from Variables (and numbers,
# for arithmetic), and leave every other case to __call__: together they
# cost a third less per operation. (Every call goes through __call__ while an
# instrument wraps it: dezero_mini.memory's timeline.)
_CALL = Function.__call__


def _edge_to(x):
    """The edge of the input Variable ``x``, flat: ``(node, index)``, or
    _NO_EDGE for one that needs no gradient (see _edge_of)."""
    return _edge_of(x) or _NO_EDGE


def _unary(function_class, name):
    """The function ``name(x)`` of the built-in Function ``function_class`` of
    one input (``F.sin``, ``neg``)."""

    def call(x):
        if (x.__class__ is not Variable or Function.__call__ is not _CALL
                or _THREADS_WITHOUT_GRAPH and not Config.enable_backprop):
            return function_class()(x)
        f = function_class()
        creator = x.creator
        # The common edge, written out (a computed Variable, the only output
        # of a built-in Function); every other one from _edge_of.
        if (creator is not None and creator.outputs.__class__ is _OneOutput
                and x._requires_grad and creator.saves is not None):
            f._node0 = creator
            f._index0 = 0
        else:
            f._node0, f._index0 = _edge_to(x)
        f._edge_count = 1
        f.generation = generation = x.generation
        x = x.data
        try:
            y = f.forward(x)
        except _NAMED_ERRORS as e:
            _raise_forward_error(f, e, (x,))
        return _graph_outputs(f, y, generation)

    return _named(call, name, f"``{name}(x)``: the Function {function_class.__name__} of x.")


def _binary(function_class, name):
    """The function ``name(x0, x1)`` of an arithmetic Function
    (``takes_numbers``), for a Variable ``x0`` and a Variable or a Python
    number ``x1`` (``y * a``, ``y * 0.5``). A number reaches forward as the
    read-only 0-d array that NumPy would make of it (_number_of)."""

    def call(x0, x1):
        if (x0.__class__ is not Variable or Function.__call__ is not _CALL
                or _THREADS_WITHOUT_GRAPH and not Config.enable_backprop):
            return function_class()(x0, x1)
        generation, data0 = x0.generation, x0.data
        if x1.__class__ is Variable:
            f = function_class()
            f._node1, f._index1 = _edge_to(x1)
            data1 = x1.data
            if x1.generation > generation:
                generation = x1.generation
        elif x1.__class__ is float or x1.__class__ is int:
            f = function_class()
            f._node1 = f._index1 = None
            arrays = _NUMBER_ARRAYS.get(data0.dtype)  # (_number_of's fast way, written out)
            data1 = arrays.get(x1) if arrays is not None and x1 else None
            if data1 is None:
                data1 = _number_of(x1, data0.dtype)
        else:
            return function_class()(x0, x1)
        creator = x0.creator
        if (creator is not None and creator.outputs.__class__ is _OneOutput
                and x0._requires_grad and creator.saves is not None):
            f._node0 = creator  # the common edge, as in _unary
            f._index0 = 0
        else:
            f._node0, f._index0 = _edge_to(x0)
        f._edge_count = 2
        f.generation = generation
        try:
            y = f.forward(data0, data1)
        except _NAMED_ERRORS as e:
            _raise_forward_error(f, e, (data0, data1))
        return _graph_outputs(f, y, generation)

    return _named(call, name, f"``{name}(x0, x1)``: the Function {function_class.__name__} of x0 and x1.")


def _named(function, name, doc):
    """``function``, named ``name`` of the module that called _unary or
    _binary (for tracebacks, help() and pickle), with the docstring ``doc``."""
    function.__name__ = function.__qualname__ = name
    function.__module__ = sys._getframe(2).f_globals["__name__"]
    function.__doc__ = doc
    return function


def _run_backward(f, gys, retain_grad, create_graph, check_saved):
    """``f``'s backward on the gradients ``gys`` of its outputs (a list or
    tuple, None for an output that got none), when the pass keeps the
    gradients of the outputs (retain_grad), builds a graph (create_graph),
    checks what Functions keep (check_saved) or ``f`` is written DeZero's
    way (Variables in, Variables out). Returns the gradients of its inputs
    and the saved arrays that create_graph replaced (see _lift_saved)."""
    if retain_grad:
        for ref, gy in zip(f.outputs, gys):
            y = ref()
            if y is not None and gy is not None:
                y.grad = gy if create_graph else Variable(as_array(gy))
    if not (create_graph or f.array_backward):  # written for DeZero: Variables
        gys = [None if g is None else Variable(as_array(g)) for g in gys]
    lifted = _lift_saved(f) if create_graph and f._lift else None
    return (_backward_checked(f, gys) if check_saved else f.backward(*gys)), lifted


def _too_many_gradients(f, returned, inputs):
    """The error of a backward that returns more gradients than its Function
    has inputs: zip would have dropped the extra ones without a word, and
    most often they are the right gradients in the wrong order."""
    name = type(f).__name__
    return ValueError(
        f"{name}.backward returned {returned} gradients, but {name} has {inputs} "
        f"input{'s' if inputs != 1 else ''}: return one gradient per input of forward, in "
        "the same order (None for an input that gets no gradient)")


class _OneOutput(weakref.ref):
    """The weak reference to the only output of a Function, which is also the
    list of its outputs: ``f.outputs[0]()``, ``len(f.outputs)`` and ``for ref
    in f.outputs`` work as on a list of one weak reference.

    One object instead of a list and the reference in it: the collector
    tracks both, and every full collection traverses each one that a graph
    holds (about a microsecond per object and operation in a graph of
    100,000 operations, benchmarks/bench_ops.py). A Function of several
    outputs keeps a list."""

    __slots__ = ()

    def __len__(self):
        return 1

    def __getitem__(self, index):
        if index == 0 or index == -1:
            return self
        if isinstance(index, slice):
            return [self][index]
        raise IndexError(f"outputs: index {index} out of range for a Function of one output")

    def __iter__(self):
        return iter((self,))

    def index(self, ref):
        """0 when ``ref`` refers to the output (as ``list.index``)."""
        if ref == self:
            return 0
        raise ValueError("outputs.index: not an output of this Function")

    def __deepcopy__(self, memo):
        return self  # as copy.deepcopy treats weakref.ref: the same reference

    def __repr__(self):
        return f"[{weakref.ref.__repr__(self)}]"


_new_object = object.__new__  # an output Variable, whose slots _graph_outputs fills itself
_VARIABLE_INIT = Variable.__init__



def _references_to_a_local():
    """What ``sys.getrefcount`` says of an object that one local name holds:
    2 on CPython up to 3.13 (the name and the call's argument); measured,
    not assumed, since interpreters may borrow the argument's reference."""
    only_here = object()
    return sys.getrefcount(only_here)


_HELD_BY_ONE_NAME = _references_to_a_local()


def _edge_to_creator(x):
    """``(creator, output index)`` of a Variable that has a creator."""
    outputs = x.creator.outputs
    return x.creator, 0 if outputs.__class__ is _OneOutput else outputs.index(weakref.ref(x))


# --- create_graph: the saved arrays back in the graph, as Variables -------------------
def _lift_saved(f):
    """Before a backward that builds a graph: replace each saved array of
    ``f`` named in ``saved_from`` by a Variable of the graph it came from (the
    input's or output's Variable if someone still holds it, else a new one
    with the same array and creator, as PyTorch unpacks its saved tensors).
    Returns the arrays, to put back after (see _restore_saved)."""
    lifted = {}
    for name, is_output, index in f._lift:
        array = getattr(f, name, None)
        if array is None or isinstance(array, Variable) or type(array) in _PYTHON_NUMBERS:
            continue  # nothing saved, a Variable already, or a Python number (see takes_numbers)
        lifted[name] = array
        if is_output:
            variable = _variable_of(f, index, array)
        else:
            edge = f.next_functions[index]  # (built for the read: create_graph is not the common case)
            if edge is None:  # a constant
                variable = _constant_variable(as_array(array))
            elif edge[1] is None:  # a leaf (or a Variable made DeZero's way)
                variable = edge[0]
            else:
                variable = _variable_of(edge[0], edge[1], array)
        setattr(f, name, variable)
    return lifted


def _variable_of(creator, index, array):
    """Output ``index`` of ``creator``: the Variable if it is alive, else a
    new one (same array, same creator), which takes the dead one's place."""
    variable = creator.outputs[index]()
    if variable is None:
        # as_array: a forward on 0-d arrays saves what NumPy gives, a NumPy
        # scalar (``np.exp`` of a 0-d array is an np.float64).
        variable = Variable(as_array(array))
        variable.creator, variable.generation = creator, creator.generation + 1
        if creator.outputs.__class__ is _OneOutput:
            creator.outputs = _OneOutput(variable)
        else:
            creator.outputs[index] = weakref.ref(variable)
    return variable


def _restore_saved(f, lifted):
    """The saved arrays back in place of the Variables of _lift_saved (the
    graph is kept for another backward, which may not build a graph)."""
    for name, array in lifted.items():
        setattr(f, name, array)


# --- The check mode: does each Function hold only what its backward reads? ----------------
class _WatchedInput:
    """Stands for an input Variable during a checked backward; notes what is
    read (only its shape, or more). Used in a formula (``gy * x``,
    ``F.exp(x)``), it is the Variable itself."""

    __array_ufunc__ = None  # ndarray * stand-in: numpy leaves it to __rmul__

    def __init__(self, variable, name, reads):
        self._variable, self._name, self._reads = variable, name, reads

    def __getattr__(self, attribute):
        only_shape = attribute in ("shape", "ndim", "size", "dtype")
        self._reads[self._name] = self._reads.get(self._name, True) and only_shape
        return getattr(self._variable, attribute)

    def _read(self):
        self._reads[self._name] = False
        return self._variable

    # Arithmetic on the stand-in reads the Variable itself (``gy * x``).
    def __mul__(self, other):
        return self._read() * other

    def __rmul__(self, other):
        return other * self._read()

    def __add__(self, other):
        return self._read() + other

    def __radd__(self, other):
        return other + self._read()

    def __sub__(self, other):
        return self._read() - other

    def __rsub__(self, other):
        return other - self._read()

    def __truediv__(self, other):
        return self._read() / other

    def __rtruediv__(self, other):
        return other / self._read()

    def __pow__(self, other):
        return self._read() ** other

    def __neg__(self):
        return -self._read()

    def __matmul__(self, other):
        return self._read() @ other

    def __rmatmul__(self, other):
        return other @ self._read()


class _WatchedFunction:
    """Stands for a Function during its backward and notes which saved values
    (attributes named in ``saves``) and which inputs it reads."""

    def __init__(self, function, reads):
        object.__setattr__(self, "_function", function)
        object.__setattr__(self, "_reads", reads)

    def __getattr__(self, name):
        value = getattr(self._function, name)
        if name == "inputs" and value is not None:
            return [_WatchedInput(x, f"inputs[{i}]", self._reads) for i, x in enumerate(value)]
        if name in (self._function.saves or ()):
            self._reads[name] = False  # read, and not just for its shape
        if callable(value) and getattr(value, "__self__", None) is self._function:
            return value.__func__.__get__(self)  # its own methods read through the stand-in
        return value


def _held_values(f):
    """What ``f`` keeps for its backward: the names of its non-empty saved
    values, or inputs[i] for each input of a Function written DeZero's way."""
    if f.saves is None:
        return [f"inputs[{i}]" for i in range(len(f.inputs or ()))]
    return [name for name in f.saves if getattr(f, name, None) is not None]


def _backward_checked(f, gys):
    """``f.backward(*gys)``, run on a stand-in that notes what it reads; raises
    RuntimeError naming the Function and what it holds without reading."""
    reads = {}  # name -> True when only the shape was read
    gxs = type(f).backward(_WatchedFunction(f, reads), *gys)
    held = [name for name in _held_values(f) if name not in f.reads_sometimes]
    unread = [name for name in held if name not in reads]
    shape_only = [name for name in held if reads.get(name) is True]
    if unread or shape_only:
        problems = ([f"holds {', '.join(unread)} that its backward never reads"] if unread
                    else []) + ([f"holds the arrays of {', '.join(shape_only)} but its "
                                 "backward reads only their shapes"] if shape_only else [])
        raise RuntimeError(
            f"check_saved: {type(f).__name__} {'; '.join(problems)}. Keep only what "
            "backward reads (name it in saves and set it in forward); if a value is read "
            "only on some paths, list it in reads_sometimes."
        )
    return gxs


def _apply(function, *xs):
    """``function`` applied in the kind of ``xs``: its ``forward`` alone on
    arrays (there is no graph to build), the whole Function on Variables.
    For backward formulas, which run on both kinds (see Function)."""
    if isinstance(xs[0], Variable):
        return function(*xs)
    # No graph: nothing to link; forward keeps everything (_gradient_targets).
    return function.forward(*xs)


# --- Arithmetic, with broadcasting ------------------------------------------------------
def _sum_to(gx, shape):
    """Bring a gradient (an array or a Variable) back to the shape of a
    broadcast input."""
    if gx.shape == shape:
        return gx
    if isinstance(gx, Variable):
        from dezero_mini import functions

        return functions.sum_to(gx, shape)
    return arrays.sum_to(gx, shape)


# A binary Function keeps, for each input that needs a gradient, only what
# that gradient reads (in PyTorch, ``needs_input_grad``): ``y * 2.0`` keeps the
# number, not y's array. Its edge is None for an input that needs none
# (``_node0``, ``_node1``: see Function); unset when forward is called on its
# own (keep everything then: _gradient_targets).
_BOTH = (True, True)


class Add(Function):
    __slots__ = saves = ("x0_shape", "x1_shape")  # shapes, not arrays: to undo broadcasting
    takes_numbers = True

    def forward(self, x0, x1):
        to_x0, to_x1 = _gradient_targets(self)
        if to_x0 is not None:
            self.x0_shape = x0.shape
        if to_x1 is not None:
            self.x1_shape = x1.shape
        return np.add(x0, x1)  # (the ufunc itself: the operator adds a call of its own)

    def backward(self, gy):
        # A constant operand (``y + 1.0``) needs no gradient: not computing
        # it saves the sum that brings it back to the constant's shape.
        # (The shapes are compared here: most often they match, and then the
        # gradient is gy itself, without a call of _sum_to.)
        shape, gx0, gx1 = gy.shape, None, None
        if self._node0 is not None:
            gx0 = gy if shape == self.x0_shape else _sum_to(gy, self.x0_shape)
        if self._node1 is not None:
            gx1 = gy if shape == self.x1_shape else _sum_to(gy, self.x1_shape)
        return gx0, gx1


class Mul(Function):
    __slots__ = saves = ("x0", "x1", "x0_shape", "x1_shape")
    saved_from = {"x0": "inputs[0]", "x1": "inputs[1]"}
    takes_numbers = True

    def forward(self, x0, x1):
        to_x0, to_x1 = _gradient_targets(self)
        if to_x0 is not None:  # x0's gradient is gy * x1
            self.x1, self.x0_shape = x1, x0.shape
        if to_x1 is not None:  # x1's gradient is gy * x0
            self.x0, self.x1_shape = x0, x1.shape
        return np.multiply(x0, x1)

    def backward(self, gy):
        gx0 = gx1 = None  # (shapes compared here, as in Add)
        if self._node0 is not None:
            gx0 = gy * self.x1
            if gx0.shape != self.x0_shape:
                gx0 = _sum_to(gx0, self.x0_shape)
        if self._node1 is not None:
            gx1 = gy * self.x0
            if gx1.shape != self.x1_shape:
                gx1 = _sum_to(gx1, self.x1_shape)
        return gx0, gx1


class Neg(Function):
    __slots__ = saves = ()  # nothing: -gy needs no input

    def forward(self, x):
        return np.negative(x)

    def backward(self, gy):
        return -gy


class Sub(Function):
    __slots__ = saves = ("x0_shape", "x1_shape")
    takes_numbers = True

    def forward(self, x0, x1):
        to_x0, to_x1 = _gradient_targets(self)
        if to_x0 is not None:
            self.x0_shape = x0.shape
        if to_x1 is not None:
            self.x1_shape = x1.shape
        return np.subtract(x0, x1)

    def backward(self, gy):
        to_x0, to_x1 = self._node0, self._node1  # (see Add)
        return (_sum_to(gy, self.x0_shape) if to_x0 is not None else None,
                _sum_to(-gy, self.x1_shape) if to_x1 is not None else None)


class Div(Function):
    __slots__ = saves = ("x0", "x1", "x0_shape", "x1_shape")
    saved_from = {"x0": "inputs[0]", "x1": "inputs[1]"}
    takes_numbers = True

    def forward(self, x0, x1):
        to_x0, to_x1 = _gradient_targets(self)
        self.x1 = x1  # both gradients read it
        if to_x0 is not None:  # gy / x1
            self.x0_shape = x0.shape
        if to_x1 is not None:  # -gy x0 / x1^2
            self.x0, self.x1_shape = x0, x1.shape
        return np.true_divide(x0, x1)

    def backward(self, gy):
        to_x0, to_x1 = self._node0, self._node1
        x1 = self.x1
        # -(x0 / x1^2), not -x0 / x1^2: the same bits, and x0 may be bools,
        # which NumPy refuses to negate; x1^2 in floats (int8 would wrap).
        return (_sum_to(gy / x1, self.x0_shape) if to_x0 is not None else None,
                _sum_to(gy * -(self.x0 / _in_gradient_dtype(x1)**2), self.x1_shape)
                if to_x1 is not None else None)


class Pow(Function):
    """``x ** c`` for a constant exponent ``c`` (a number), as in DeZero."""

    __slots__ = ("c", "x")
    saves = ("x",)
    saved_from = {"x": "inputs[0]"}

    def __init__(self, c):
        self.c = c

    def forward(self, x):
        if np.any(self.c):  # x ** 0 is 1 everywhere: its gradient reads nothing
            self.x = x
        return x**self.c

    def backward(self, gy):
        if not np.any(self.c):  # the formula below would give 0 * inf at x = 0
            return _zeros_like(gy)
        return self.c * _in_gradient_dtype(self.x) ** (self.c - 1) * gy  # (integers would wrap)


class Power(Function):
    """``x ** c`` where the exponent is a Variable or an array (``x ** y``,
    ``2.0 ** x``): both the base and the exponent get a gradient."""

    __slots__ = saves = ("x", "c", "y")
    saved_from = {"x": "inputs[0]", "c": "inputs[1]", "y": "outputs[0]"}

    def forward(self, x, c):
        self.x, self.c = x, c
        self.y = x**c
        return self.y

    def backward(self, gy):
        # In floats: integers would wrap around (c - 1 on uint8 0 is 255).
        x, c = _in_gradient_dtype(self.x), _in_gradient_dtype(self.c)
        x_data, c_data = _data(x), _data(c)
        # Where the formulas give 0 * inf, the derivative is 0 (as in
        # PyTorch): d/dx where c == 0, d/dc where x == 0 and c >= 0.
        with np.errstate(divide="ignore", invalid="ignore"):  # log of x < 0 is nan, as in PyTorch
            gx = gy * c * _replace(x, c_data == 0, 1) ** (c - 1)
            gc = gy * self.y * _log(_replace(x, (x_data == 0) & (c_data >= 0), 1))
        return _sum_to(gx, x_data.shape), _sum_to(gc, c_data.shape)


def _data(x):
    """The array behind a Variable, or the array itself."""
    return x.data if isinstance(x, Variable) else x


def _replace(x, mask, value):
    """``x`` (an array or a Variable) with ``value`` where ``mask`` is True;
    ``x`` itself when the mask is all False (the common case)."""
    if not mask.any():
        return x
    if not isinstance(x, Variable):
        return np.where(mask, np.asarray(value, dtype=x.dtype), x)
    keep = (~mask).astype(x.dtype)
    return x * keep + (mask * value).astype(x.dtype)


def _log(x):
    if isinstance(x, Variable):
        from dezero_mini import functions

        return functions.log(x)
    return np.log(x)


def _zeros_like(gy):
    """A gradient of zeros in the kind of ``gy`` (an array or a Variable)."""
    if isinstance(gy, Variable):
        return Variable(np.zeros_like(gy.data))
    return np.zeros_like(gy)


class Cast(Function):
    """``x`` in another dtype; its gradient comes back in the dtype of
    ``x``'s gradients (float64 for integers and bools). Backward uses it to
    give a gradient its input's dtype when the pass builds a graph
    (create_graph=True)."""

    __slots__ = ("dtype", "x_dtype")
    saves = ("x_dtype",)

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def forward(self, x):
        self.x_dtype = x.dtype
        return x.astype(self.dtype)

    def backward(self, gy):
        dtype = _gradient_dtype(self.x_dtype)
        if isinstance(gy, Variable):
            return Cast(dtype)(gy)
        return gy.astype(dtype)


add = _binary(Add, "add")
mul = _binary(Mul, "mul")
neg = _unary(Neg, "neg")
sub = _binary(Sub, "sub")


def rsub(x0, x1):
    return Sub()(x1, x0)


div = _binary(Div, "div")


def rdiv(x0, x1):
    return Div()(x1, x0)


def pow(x, c):
    """``x ** c``: a constant exponent (a number) gets no node of its own; a
    Variable or array exponent is an input of the graph, with a gradient."""
    if isinstance(c, (Variable, np.ndarray)):
        return Power()(x, c)
    return Pow(c)(x)


def rpow(x, c):
    """``c ** x`` (``Variable.__rpow__``: the Variable ``x`` is the exponent)."""
    return Power()(c, x)


def setup_variable():
    """Give Variable its operators (called once when the package is imported)."""
    from dezero_mini import functions

    Variable.__add__ = Variable.__radd__ = add
    Variable.__mul__ = Variable.__rmul__ = mul
    Variable.__neg__ = neg
    Variable.__sub__, Variable.__rsub__ = sub, rsub
    Variable.__truediv__, Variable.__rtruediv__ = div, rdiv
    Variable.__pow__, Variable.__rpow__ = pow, rpow
    Variable.__matmul__ = functions.matmul
    Variable.__rmatmul__ = lambda self, other: functions.matmul(other, self)
    Variable.__getitem__ = functions.get_item
    Variable.matmul = Variable.dot = functions.matmul
    Variable.max = functions.max
    Variable.min = functions.min
