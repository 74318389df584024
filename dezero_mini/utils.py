"""DeZero's ``utils``: numerical gradient checking, drawing the computational
graph (get_dot_graph, plot_dot_graph), comparing arrays, and the array
helpers of backward passes and convolutions under DeZero's names (they live
in ``dezero_mini.arrays``, below ``core``, which needs them)."""
import numbers
import shutil
import subprocess

import numpy as np

from dezero_mini.arrays import (  # noqa: F401 (DeZero's names in utils)
    get_conv_outsize,
    get_deconv_outsize,
    inverse_count,
    logsumexp,
    max_backward_shape,
    normalize_axes,
    pair,
    reshape_sum_backward,
    sum_to,
)
from dezero_mini.core import Variable, as_variable
from dezero_mini.cuda import as_numpy
from dezero_mini.validation import describe, expect_callable, expect_variable, number


def _array_argument(x, function):
    """``x`` as numbers to differentiate at: a Variable, or an array or a
    number made an array; a TypeError for anything else (None, a str, a list
    of lists of strings) before it reaches NumPy."""
    if isinstance(x, Variable):
        return x
    if isinstance(x, (np.ndarray, numbers.Number)) and not isinstance(x, bool):
        array = np.asarray(x)
        if array.dtype.kind in "biuf":
            return array
    raise TypeError(f"{function}: x must be a Variable, a numpy array or a number, "
                    f"got {describe(x)}")


def numerical_grad(f, x, *args, eps=1e-4, **kwargs):
    """Central-difference gradient of ``sum(f(x, ...))`` with respect to the
    Variable or array ``x`` (the reference a backward pass is checked against)."""
    expect_callable(f, "numerical_grad", "f", "a function of Variables")
    number(eps, "numerical_grad", "eps", above=0)
    data = x.data if isinstance(x, Variable) else _array_argument(x, "numerical_grad")
    data = data.astype(np.float64)
    grad = np.zeros_like(data)
    for index in np.ndindex(*data.shape):
        saved = data[index]
        data[index] = saved + eps
        plus = as_variable(f(Variable(data.copy()), *args, **kwargs)).data.sum()
        data[index] = saved - eps
        minus = as_variable(f(Variable(data.copy()), *args, **kwargs)).data.sum()
        data[index] = saved
        grad[index] = (plus - minus) / (2 * eps)
    return grad


def gradient_check(f, x, *args, rtol=1e-4, atol=1e-5, **kwargs):
    """True when backward's gradient of ``sum(f(x, ...))`` matches the
    numerical one; prints where they differ otherwise."""
    expect_callable(f, "gradient_check", "f", "a function of Variables")
    x = _array_argument(x, "gradient_check")
    if isinstance(x, Variable):
        x.data = x.data.astype(np.float64)
    else:  # float from the start: a Variable made of integers would take no gradient
        x = Variable(x.astype(np.float64))
    x.cleargrad()
    y = f(x, *args, **kwargs)
    y.backward(retain_grad=True)
    analytic = x.grad.data
    numeric = numerical_grad(f, x, *args, **kwargs)
    ok = analytic.shape == numeric.shape and np.allclose(analytic, numeric, rtol, atol)
    if not ok:
        worst = np.abs(analytic - numeric).max() if analytic.shape == numeric.shape else "n/a"
        print(f"gradient_check: shapes {analytic.shape} vs {numeric.shape}, max |diff| {worst}")
    return bool(ok)


# --- Drawing the computational graph --------------------------------------------------
def _dot_text(text):
    """A DOT string literal."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_variable(v, verbose):
    label = v.name or ""
    if verbose and v.data is not None:
        label += (": " if label else "") + f"{v.shape} {v.dtype}"
    return f"  {id(v)} [label={_dot_text(label)}, color=orange, style=filled]"


def _dot_function(f):
    label = type(f).__name__ + (" (freed by backward)" if f.next_functions is None else "")
    return (f"  {id(f)} [label={_dot_text(label)}, "
            f"color=lightblue, style=filled, shape=box]")


def get_dot_graph(output, verbose=True):
    """The DOT text of the computational graph that produced ``output``:
    Variables are orange ellipses (name, and shape and dtype when ``verbose``),
    Functions are blue boxes, and edges go input -> function -> output.

    Only what the graph still holds is drawn. The graph links Functions
    (``next_functions``), not the Variables between them: a Variable that
    nobody keeps any more is left out, and its creator's edge goes straight
    to the Function that used it. A Function that ``backward()`` has freed is
    drawn without what came before it (``backward(retain_graph=True)`` keeps
    it, to draw the whole graph)."""
    expect_variable(output, "get_dot_graph", "output")
    lines, seen_vars, seen_funcs, funcs = [], set(), set(), []

    def add_variable(v):
        if id(v) not in seen_vars:
            seen_vars.add(id(v))
            lines.append(_dot_variable(v, verbose))

    def add_function(f):
        if f is not None and id(f) not in seen_funcs:
            seen_funcs.add(id(f))
            funcs.append(f)

    add_variable(output)
    add_function(output.creator)
    while funcs:
        f = funcs.pop()
        lines.append(_dot_function(f))
        for edge in f.next_functions or ():
            if edge is None:
                continue  # a constant: nothing of it is kept
            node, index = edge
            if index is None:  # a Variable: a leaf (or made by a Function written DeZero's way)
                add_variable(node)
                lines.append(f"  {id(node)} -> {id(f)}")
                add_function(node.creator)
                continue
            add_function(node)
            x = node.outputs[index]()
            if x is None:  # the Variable in between is gone
                lines.append(f"  {id(node)} -> {id(f)}")
            else:
                add_variable(x)
                lines.append(f"  {id(x)} -> {id(f)}")
        for ref in f.outputs:
            y = ref()
            if y is not None:
                add_variable(y)
                lines.append(f"  {id(f)} -> {id(y)}")
    return "digraph g {\n" + "\n".join(lines) + "\n}\n"


def plot_dot_graph(output, verbose=True, to_file="graph.png"):
    """Draw the computational graph of ``output`` into ``to_file`` (.png, .svg,
    .pdf, ...: the extension is the format) with Graphviz's ``dot`` program.

    Raises ``GraphvizNotFound`` (with how to install it) when ``dot`` is
    missing; ``get_dot_graph(output)`` gives the DOT text without it. In a
    notebook, the returned object shows the picture."""
    from pathlib import Path

    from dezero_mini.memory.refgraph import INSTALL_HINT, GraphvizNotFound

    dot_source = get_dot_graph(output, verbose)
    path = Path(to_file)
    fmt = path.suffix.lower().lstrip(".")
    if not fmt:
        raise ValueError(f"plot_dot_graph: to_file {str(to_file)!r} needs an extension "
                         "that names the format, such as .png or .svg")
    dot = shutil.which("dot")
    if dot is None:
        hint = INSTALL_HINT.rsplit("; ", 1)[0]  # the hint's last clause is about .source
        raise GraphvizNotFound(f"plot_dot_graph: {hint}; the DOT text is still available "
                               "from dezero_mini.utils.get_dot_graph(output)")
    result = subprocess.run([dot, "-T" + fmt, "-o", str(path)], input=dot_source.encode("utf-8"),
                            capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"plot_dot_graph: dot -T{fmt} failed: "
                           f"{result.stderr.decode('utf-8', 'replace').strip()}")
    try:
        from IPython import display
    except ImportError:
        return None
    if fmt == "svg":
        return display.SVG(filename=str(path))
    if fmt in ("png", "jpg", "jpeg"):
        return display.Image(filename=str(path))
    return None


# --- The rest of DeZero's helpers ------------------------------------------------------
def array_equal(a, b):
    """True when the arrays (or Variables) ``a`` and ``b`` have the same shape and elements."""
    return bool(np.array_equal(as_numpy(a), as_numpy(b)))


def _same_but_size_one_axes(shape_a, shape_b):
    """Whether two shapes differ only in axes of size 1: (1,) and (), (3, 1)
    and (3,); not (3,) and (3, 3), nor (2, 3) and (3, 2)."""
    return [n for n in shape_a if n != 1] == [n for n in shape_b if n != 1]


def array_allclose(a, b, rtol=1e-4, atol=1e-5):
    """True when ``a`` and ``b`` (arrays or Variables) hold the same elements,
    in the same order, within ``atol + rtol * |b|`` of each other.

    As DeZero's, shapes that differ only in axes of size 1 ((1,) against a
    0-d array, (3, 1) against (3,)) compare their values. A pair that NumPy
    would broadcast into more elements than either holds ((3,) against
    (3, 3)) is a ValueError naming both shapes, not a comparison of each
    row: a result of the wrong shape would otherwise pass."""
    a, b = as_numpy(a), as_numpy(b)
    if a.shape != b.shape:
        if a.size != b.size or not _same_but_size_one_axes(a.shape, b.shape):
            raise ValueError(
                f"utils.array_allclose: shapes {a.shape} and {b.shape} hold different "
                f"elements ({a.size} and {b.size}, or in another order); NumPy would "
                "broadcast one against the other and compare what a shape bug made. "
                "Compare arrays of one shape (reshape one on purpose if that is meant)")
        a = a.reshape(b.shape)
    return bool(np.allclose(a, b, rtol=rtol, atol=atol))


def get_file(url, file_name=None):
    """The path (a string) of the cached copy of ``url``, downloaded once into
    ``dezero_mini.datasets.cache_dir()``. DeZero's name for
    ``dezero_mini.datasets.get_file``, which also checks checksums and never
    leaves half a file."""
    from dezero_mini import datasets

    return str(datasets.get_file(url, file_name))
