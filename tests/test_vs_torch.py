"""dezero_mini against PyTorch: the same computations, the same answers.

Random single operations (every function of ``dezero_mini.functions`` that
PyTorch also has, on drawn shapes, axes and values) and random graphs (3 to
12 operations with fan-out, ``x * x``, broadcasting and reductions),
compared in float64 on their values, their gradients and the gradients of
their gradients, and in float32 on the dtypes. Each case comes from one seed;
a failure names the seeds that disagree, and

    DEZERO_TORCH_SEEDS=1234,1240 .venv/bin/python -m pytest tests/test_vs_torch.py

runs only those. ``-s`` prints how many cases were compared.

PyTorch is optional (``pip install -e '.[torch]'``, a CPU build); without it
this module is skipped. Where dezero_mini differs from PyTorch on purpose
(docs/differences.md, "Differences from PyTorch and DeZero"), the cases stay away: no tied
maxima, and backward always starts from an explicit upstream gradient.
"""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional extra: pip install -e '.[torch]')")

import dezero_mini as dz  # noqa: E402
import dezero_mini.functions as F  # noqa: E402

torch.set_num_threads(1)
TF = torch.nn.functional


def seeds(first, count):
    """The seeds of a family of cases, or only those in DEZERO_TORCH_SEEDS (a replay)."""
    chosen = os.environ.get("DEZERO_TORCH_SEEDS")
    every = range(first, first + count)
    if not chosen:
        return list(every)
    wanted = {int(s) for s in chosen.split(",")}
    return [s for s in every if s in wanted]


# --- running one computation in both frameworks ---------------------------------------------
def run_dezero(fn, arrays, upstream, order=2):
    """Output, gradients, and (order 2) the gradients of <gradients, v>."""
    xs = [dz.Variable(a.copy()) for a in arrays]
    y = fn(*xs)
    y.grad = dz.Variable(upstream.astype(y.dtype))
    y.backward(create_graph=order > 1)
    grads = [None if x.grad is None else x.grad for x in xs]
    result = {"y": y.data, "grads": [None if g is None else g.data for g in grads], "dtypes":
              [str(y.dtype)] + [None if g is None else str(g.dtype) for g in grads]}
    if order > 1:
        total = None
        for i, g in enumerate(grads):
            if g is not None:
                term = F.sum(g * _direction(i, g.shape))
                total = term if total is None else total + term
        for x in xs:
            x.cleargrad()
        if total is not None and total.creator is not None:
            total.backward()
        result["grads2"] = [None if x.grad is None else x.grad.data for x in xs]
    return result


def run_torch(fn, arrays, upstream, order=2):
    xs = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    y = fn(*xs)
    grads = torch.autograd.grad(y, xs, torch.tensor(upstream).to(y.dtype), create_graph=order > 1,
                                allow_unused=True)
    result = {"y": y.detach().numpy(), "grads": [None if g is None else g.detach().numpy() for g in grads],
              "dtypes": [str(y.dtype).replace("torch.", "")] + [None if g is None else str(g.dtype).replace(
                  "torch.", "") for g in grads]}
    if order > 1:
        terms = [(g * torch.tensor(_direction(i, tuple(g.shape)))).sum() for i, g in enumerate(grads)
                 if g is not None and g.requires_grad]
        grads2 = [None] * len(xs)
        if terms:
            grads2 = torch.autograd.grad(sum(terms), xs, allow_unused=True)
        result["grads2"] = [None if g is None else g.detach().numpy() for g in grads2]
    return result


def _direction(i, shape):
    """The fixed random direction v of the second-order check, for input i."""
    return np.asarray(np.random.RandomState(1000 + i).standard_normal(shape))


def differences(ours, theirs, rtol=1e-9, atol=1e-11):
    """A list of what differs (empty when the two agree)."""
    problems = []
    for key in ("y", "grads", "grads2"):
        a, b = ours.get(key), theirs.get(key)
        if key == "y":
            a, b = [a], [b]
        if a is None or b is None:
            continue
        for i, (p, q) in enumerate(zip(a, b)):
            if key == "grads2" and (p is None or q is None):
                # An input that a gradient does not depend on: None in one, zeros in the other.
                p, q = (np.zeros(np.shape(q if p is None else p)) if r is None else r for r in (p, q))
            if (p is None) != (q is None):
                problems.append(f"{key}[{i}]: {p is None and 'none' or 'some'} vs {q is None and 'none' or 'some'}")
            elif p is not None and (np.shape(p) != np.shape(q) or not np.allclose(p, q, rtol, atol, equal_nan=True)):
                problems.append(f"{key}[{i}]: {np.asarray(p).ravel()[:4]} vs {np.asarray(q).ravel()[:4]} "
                                f"(shapes {np.shape(p)}, {np.shape(q)})")
    if "dtypes" in ours and ours["dtypes"] != theirs["dtypes"]:
        problems.append(f"dtypes {ours['dtypes']} vs {theirs['dtypes']}")
    return problems


def replay_hint(mismatches):
    """The first mismatches, and the command that replays them alone."""
    failed = sorted({int(m.split()[1].rstrip(",")) for m in mismatches})
    return ("\n".join(mismatches[:20]) + f"\n{len(mismatches)} mismatched; replay with\n"
            f"DEZERO_TORCH_SEEDS={','.join(map(str, failed[:20]))} .venv/bin/python -m pytest {__file__} -s")


# --- single operations ----------------------------------------------------------------------
def _shape(rng, min_dims=0, max_dims=3):
    return tuple(int(n) for n in rng.randint(1, 4, size=rng.randint(min_dims, max_dims + 1)))


def _axis_case(rng, shape):
    """An axis (None, an int, a NumPy int, a negative, a tuple) for ``shape``."""
    ndim = len(shape)
    pick = rng.randint(4) if ndim else rng.randint(2)
    if pick == 0:
        return None
    if pick == 1:
        return np.int64(rng.randint(-max(ndim, 1), max(ndim, 1)))
    if pick == 2:
        return int(rng.randint(-ndim, ndim))
    k = rng.randint(1, ndim + 1)
    return tuple(int(a) - ndim * rng.randint(2) for a in rng.permutation(ndim)[:k])


def _torch_axis(axis, x):
    if axis is None:
        return tuple(range(x.dim()))
    return tuple(int(a) for a in axis) if isinstance(axis, tuple) else int(axis)


def single_op_cases(rng):
    """(name, dezero fn, torch fn, input arrays) for one draw of every operation."""
    def data(shape, low=-2.0, high=2.0):
        return np.asarray(rng.uniform(low, high, shape))

    s = _shape(rng)
    pair = [_shape(rng), None]
    pair[1] = tuple(n if rng.rand() < 0.5 else 1 for n in pair[0][rng.randint(len(pair[0]) + 1):])
    if rng.rand() < 0.5:
        pair.reverse()
    axis = _axis_case(rng, s)
    keep = bool(rng.randint(2))
    m, k, n = (int(v) for v in rng.randint(1, 4, size=3))
    batch = _shape(rng, 0, 2)
    left, right = [  # NumPy's rules: 1-D operands, batches, batch axes that broadcast
        [(k,), (k, n)], [(m, k), (k,)], [(k,), (k,)], [(k,), batch + (k, n)], [batch + (m, k), (k,)],
        [batch + (m, k), (k, n)], [batch + (m, k), batch + (k, n)],
        [(2, 1) + (m, k), (3, k, n)], [(m, k), batch + (k, n)],
    ][rng.randint(9)]
    soft_axis = int(rng.randint(-len(s), len(s))) if s else 0
    labels = rng.randint(0, n, size=m)
    index = [-1, np.s_[1:], np.s_[:, None], [0, 0, -1], np.s_[..., 0]][rng.randint(5)]
    s2 = _shape(rng, 1, 3)
    perm = tuple(int(a) for a in rng.permutation(len(s)))
    unique = data(s) + np.arange(int(np.prod(s)), dtype=float).reshape(s) * 5  # no ties (max, min)
    yield from [
        ("exp", F.exp, torch.exp, [data(s)]),
        ("log", F.log, torch.log, [data(s, 0.3, 3)]),
        ("sin", F.sin, torch.sin, [data(s)]),
        ("cos", F.cos, torch.cos, [data(s)]),
        ("tanh", F.tanh, torch.tanh, [data(s)]),
        ("sigmoid", F.sigmoid, torch.sigmoid, [data(s, -40, 40)]),
        ("log-sigmoid", lambda x: F.log(F.sigmoid(x)), lambda x: torch.log(torch.sigmoid(x)), [data(s, -40, 5)]),
        ("relu", F.relu, torch.relu, [data(s)]),
        ("leaky_relu", lambda x: F.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1), [data(s)]),
        ("clip", lambda x: F.clip(x, -0.5, 0.7), lambda x: torch.clamp(x, -0.5, 0.7), [data(s)]),
        ("square", F.square, torch.square, [data(s)]),
        ("pow", lambda x: x**3, lambda x: x**3, [data(s)]),
        ("pow-0", lambda x: x**0, lambda x: x**0, [np.where(data(s) < 0, 0.0, data(s))]),
        ("pow-variable", lambda x, y: x**y, lambda x, y: x**y, [data(pair[0], 0.3, 2), data(pair[1])]),
        ("rpow", lambda x: 2.0**x, lambda x: 2.0**x, [data(s)]),
        ("add", lambda x, y: x + y, lambda x, y: x + y, [data(pair[0]), data(pair[1])]),
        ("sub", lambda x, y: x - y, lambda x, y: x - y, [data(pair[0]), data(pair[1])]),
        ("mul", lambda x, y: x * y, lambda x, y: x * y, [data(pair[0]), data(pair[1])]),
        ("div", lambda x, y: x / y, lambda x, y: x / y, [data(pair[0]), data(pair[1], 0.5, 2)]),
        ("rsub-scalar", lambda x: 1.5 - x, lambda x: 1.5 - x, [data(s)]),
        ("rdiv-scalar", lambda x: 2.0 / x, lambda x: 2.0 / x, [data(s, 0.5, 2)]),
        ("matmul", F.matmul, torch.matmul, [data(left), data(right)]),
        ("linear", F.linear, lambda x, W, b: x @ W + b, [data(batch + (m, k)), data((k, n)), data((n,))]),
        ("sum", lambda x: F.sum(x, axis, keep), lambda x: x.sum(_torch_axis(axis, x), keep), [data(s)]),
        ("mean", lambda x: F.mean(x, axis, keep), lambda x: x.mean(_torch_axis(axis, x), keep), [data(s)]),
        ("max", lambda x: F.max(x, axis, keep), lambda x: x.amax(_torch_axis(axis, x), keep), [unique]),
        ("min", lambda x: F.min(x, axis, keep), lambda x: x.amin(_torch_axis(axis, x), keep), [unique]),
        ("softmax", lambda x: F.softmax(x, soft_axis), lambda x: torch.softmax(x, soft_axis), [data(s, -5, 5)]),
        ("log_softmax", lambda x: F.log_softmax(x, soft_axis), lambda x: torch.log_softmax(x, soft_axis),
         [data(s, -5, 5)]),
        ("reshape", lambda x: F.reshape(x, (-1,)), lambda x: x.reshape(-1), [data(s)]),
        ("transpose", lambda x: F.transpose(x, perm), lambda x: x.permute(perm), [data(s)]),
        ("broadcast_to", lambda x: F.broadcast_to(x, np.broadcast_shapes(*pair)),
         lambda x: x.broadcast_to(np.broadcast_shapes(*pair)), [data(pair[0])]),
        ("sum_to", lambda x: F.sum_to(x, pair[1]), lambda x: x.sum_to_size(pair[1]) if pair[1] else x.sum(),
         [data(np.broadcast_shapes(*pair))]),
        ("get_item", lambda x: x[index], lambda x: x[torch.tensor(index) if isinstance(index, list) else index],
         [data(s2)]),
        ("expand_dims", lambda x: F.expand_dims(x, -1), lambda x: x.unsqueeze(-1), [data(s)]),
        ("flatten", F.flatten, lambda x: torch.flatten(x, 1), [data(s2 + (2,))]),
        ("concat", lambda x, y: F.concat([x, y, x], axis=-1), lambda x, y: torch.cat([x, y, x], -1),
         [data(s2), data(s2[:-1] + (2,))]),
        ("stack", lambda x, y: F.stack([x, y], axis=1), lambda x, y: torch.stack([x, y], 1), [data(s2), data(s2)]),
        ("mean_squared_error", F.mean_squared_error, TF.mse_loss, [data((m, n)), data((m, n))]),
        ("softmax_cross_entropy", lambda x: F.softmax_cross_entropy(x, labels),
         lambda x: TF.cross_entropy(x, torch.tensor(labels)), [data((m, n), -5, 5)]),
    ]


OP_SEEDS = seeds(0, 50)


def test_single_operations_agree_with_torch():
    checked, mismatches = 0, []
    for seed in OP_SEEDS:
        for name, ours, theirs, arrays in single_op_cases(np.random.RandomState(seed)):
            arrays = [np.asarray(a) for a in arrays]  # (0-d arithmetic gives numpy scalars)
            rng = np.random.RandomState(seed + 1)
            try:
                with np.errstate(all="ignore"):
                    with dz.no_grad():
                        out_shape = ours(*[dz.Variable(a) for a in arrays]).shape
                    upstream = np.asarray(rng.standard_normal(out_shape))
                    problems = differences(run_dezero(ours, arrays, upstream),
                                           run_torch(theirs, arrays, upstream))
                    # float32: the dtypes of the output and the gradients (values to float32 precision)
                    arrays32 = [a.astype(np.float32) for a in arrays]
                    a32, b32 = run_dezero(ours, arrays32, upstream, 1), run_torch(theirs, arrays32, upstream, 1)
                    problems += [f"float32 {p}" for p in differences(a32, b32, rtol=2e-4, atol=1e-5)]
            except Exception as e:  # noqa: BLE001 (a crash is a mismatch too, reported with its seed)
                problems = [f"raised {type(e).__name__}: {e}"]
            checked += 2
            if problems:
                mismatches.append(f"seed {seed}, {name}: {'; '.join(problems)}")
    print(f"\nsingle operations: {checked} cases (float64 and float32) compared with PyTorch, "
          f"{len(mismatches)} mismatched")
    assert not mismatches, replay_hint(mismatches)


# --- random graphs ------------------------------------------------------------------------------
UNARY = {
    "sin": (F.sin, torch.sin), "cos": (F.cos, torch.cos), "tanh": (F.tanh, torch.tanh),
    "sigmoid": (F.sigmoid, torch.sigmoid), "exp-scaled": (lambda x: F.exp(x * 0.3), lambda x: torch.exp(x * 0.3)),
    "square": (lambda x: x**2, lambda x: x**2), "neg": (lambda x: -x, lambda x: -x),
    "affine": (lambda x: 0.5 * x + 1.0, lambda x: 0.5 * x + 1.0),
    "softplus-ish": (lambda x: F.log(1.0 + F.exp(x * 0.5)), lambda x: torch.log(1.0 + torch.exp(x * 0.5))),
    "sum-last-keepdims": (lambda x: F.sum(x, axis=-1, keepdims=True) if x.ndim else x,
                          lambda x: x.sum(-1, keepdim=True) if x.dim() else x),
    "softmax-last": (lambda x: F.softmax(x, axis=-1) if x.ndim else x,
                     lambda x: torch.softmax(x, -1) if x.dim() else x),
}
BINARY = {
    "add": (lambda x, y: x + y, lambda x, y: x + y),
    "sub": (lambda x, y: x - y, lambda x, y: x - y),
    "mul": (lambda x, y: x * y, lambda x, y: x * y),
    "div-safe": (lambda x, y: x / (1.0 + y * y), lambda x, y: x / (1.0 + y * y)),
    "pow-safe": (lambda x, y: (1.0 + x * x) ** F.tanh(y), lambda x, y: (1.0 + x * x) ** torch.tanh(y)),
}


def random_graph(seed):
    """The leaves (arrays) and a program of 3 to 12 operations over them:
    operands are drawn from every value made so far (fan-out), sometimes the
    same one twice (``x * x``), of shapes that broadcast."""
    rng = np.random.RandomState(seed)
    base = _shape(rng, 1, 3)
    leaves = []
    for _ in range(rng.randint(1, 4)):
        lead = rng.randint(len(base) + 1)
        leaves.append(np.asarray(rng.uniform(-1.5, 1.5, tuple(n if rng.rand() < 0.6 else 1 for n in base[lead:]))))
    program = []
    for _ in range(rng.randint(3, 13)):
        available = len(leaves) + len(program)
        if rng.rand() < 0.45:
            program.append((str(rng.choice(sorted(UNARY))), (rng.randint(available),)))
        else:
            first = rng.randint(available)
            second = first if rng.rand() < 0.2 else rng.randint(available)
            program.append((str(rng.choice(sorted(BINARY))), (first, second)))
    return leaves, program


def run_program(program, framework):
    """A function of the leaves that runs ``program`` (0: dezero_mini, 1: torch)
    and returns the sum of every value that nothing used, with weights."""
    def fn(*leaves):
        values = list(leaves)
        used = set()
        for name, operands in program:
            table = UNARY if name in UNARY else BINARY
            values.append(table[name][framework](*[values[i] for i in operands]))
            used.update(operands)
        unused = [v for i, v in enumerate(values) if i not in used and i >= len(leaves)]
        total = None
        for j, v in enumerate(unused):
            w = np.asarray(np.random.RandomState(j).uniform(0.5, 1.5, tuple(v.shape)))
            term = F.sum(v * w) if framework == 0 else (v * torch.tensor(w)).sum()
            total = term if total is None else total + term
        return total
    return fn


GRAPH_SEEDS = seeds(10_000, 1500)


def test_random_graphs_agree_with_torch():
    checked, mismatches = 0, []
    for seed in GRAPH_SEEDS:
        leaves, program = random_graph(seed)
        upstream = np.asarray(1.0)
        try:
            problems = differences(run_dezero(run_program(program, 0), leaves, upstream),
                                   run_torch(run_program(program, 1), leaves, upstream), rtol=1e-8, atol=1e-10)
        except Exception as e:  # noqa: BLE001 (a crash is a mismatch too, reported with its seed)
            problems = [f"raised {type(e).__name__}: {e}"]
        checked += 1
        if problems:
            mismatches.append(f"seed {seed} ({[p[0] for p in program]}): {'; '.join(problems)}")
    print(f"\nrandom graphs: {checked} graphs of 3-12 operations (values, gradients, second order) compared "
          f"with PyTorch, {len(mismatches)} mismatched")
    assert not mismatches, replay_hint(mismatches)
