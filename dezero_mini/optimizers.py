"""Optimizers: update a model's Parameters from their gradients.

Usage, as in DeZero::

    optimizer = optimizers.SGD(lr=0.1).setup(model)
    ...
    model.cleargrads()
    loss.backward()
    optimizer.update()

Every update works on the arrays in place (``param.data -= ...``), outside
any graph: an update builds no Function and no Variable, so it adds nothing
to memory whatever ``Config.enable_backprop`` says. And it works on blocks
of rows (``blocks``), so that the temporaries of a formula such as
``lr * grad`` are the size of a block, not of the whole weight.
"""
import math
import weakref

import numpy as np

from dezero_mini import leak_warning
from dezero_mini.core import Config, Variable
from dezero_mini.validation import Number, expect_callable


#: How many elements the temporaries of an update hold at most (512 KiB of
#: float64). ``W -= lr * grad`` on a whole 4096x4096 float32 weight first
#: makes ``lr * grad``, 64 MiB, next to the gradients that backward has just
#: made: the peak of a training step. Block by block, the same arithmetic
#: (element-wise, so the results are the same to the bit) needs a block.
BLOCK_ELEMENTS = 1 << 16


def blocks(*arrays):
    """Views of ``arrays`` (all of one shape), a block of rows at a time;
    writing into a view writes into its array. One block when they are small."""
    first = arrays[0]
    if first.ndim == 0 or first.size <= BLOCK_ELEMENTS:
        yield arrays
        return
    rows = max(1, BLOCK_ELEMENTS * first.shape[0] // first.size)
    for start in range(0, first.shape[0], rows):
        yield tuple(array[start:start + rows] for array in arrays)


class Optimizer:
    """Base class: ``update()`` runs the hooks, then ``update_one`` on every
    parameter of the target that has a gradient (the others are skipped)."""

    def __init__(self):
        self.target = None
        self.hooks = []
        self._state = {}

    def setup(self, target):
        """Optimise the parameters of ``target`` (a Layer or Model). Returns
        the optimizer, so that ``opt = SGD().setup(model)`` works."""
        if not callable(getattr(target, "params", None)):
            raise TypeError(
                f"{type(self).__name__}.setup: the target must be a Layer or Model "
                f"(something with params()), got {type(target).__name__}"
            )
        self.target = target
        return self

    def update(self):
        if self.target is None:
            raise RuntimeError(f"{type(self).__name__}.update: call setup(model) first")
        params = [p for p in self.target.params() if p.grad is not None]
        for hook in self.hooks:
            hook(params)
        for param in params:
            self.update_one(param)
        self._forget_dead_params()
        if Config.warn_leaks:  # off by default: then this test is all it costs
            leak_warning.after_update(Config.warn_leaks)

    def update_one(self, param):
        raise NotImplementedError(f"{type(self).__name__}.update_one")

    def add_hook(self, f):
        """Add ``f(params)``, called with the list of parameters that have a
        gradient before each update (see WeightDecay, ClipGrad)."""
        self.hooks.append(expect_callable(f, f"{type(self).__name__}.add_hook", "f",
                                          "a function of the list of parameters"))

    # --- Per-parameter state (momentum, running averages) ----------------------------
    def _slot(self, param, name):
        """The state array ``name`` of ``param``, created as zeros.

        Why this does not leak: the state is keyed by ``id(param)`` next to a
        *weak* reference to the parameter. The optimizer never keeps a
        parameter alive by itself; when a parameter dies (a layer replaced,
        another model set up), its entry is dropped at the end of the next
        update. The weak reference also protects against ``id`` reuse: a new
        parameter that happens to get a dead one's id does not inherit its
        momentum, because the stored reference no longer points to it.
        (Keying by the id rather than by the Parameter itself keeps this
        independent of how Variable defines ``==`` and hashing.)
        """
        entry = self._state.get(id(param))
        if entry is None or entry[0]() is not param:
            entry = (weakref.ref(param), {})
            self._state[id(param)] = entry
        slots = entry[1]
        if name not in slots:
            slots[name] = np.zeros_like(param.data)
        return slots[name]

    def _forget_dead_params(self):
        dead = [key for key, (ref, _) in self._state.items() if ref() is None]
        for key in dead:
            del self._state[key]


#: The settings of the optimizers and hooks: finite numbers in their range,
#: checked whenever they are set (a learning rate of nan trained nothing, silently).
RATE = dict(at_least=0)  # lr, alpha, eps, weight decay: 0 is allowed, as in PyTorch
DECAY = dict(at_least=0, at_most=1)  # momentum, rho
BETA = dict(at_least=0, below=1)  # Adam's beta1, beta2: 1 would divide by zero


class SGD(Optimizer):
    """Plain gradient descent: ``W -= lr * grad``."""

    lr = Number(**RATE)

    def __init__(self, lr=0.01):
        super().__init__()
        self.lr = lr

    def update_one(self, param):
        for w, grad in blocks(param.data, param.grad.data):
            w -= self.lr * grad


class MomentumSGD(Optimizer):
    """Gradient descent with momentum: ``v = momentum * v - lr * grad``,
    ``W += v``."""

    lr = Number(**RATE)
    momentum = Number(**DECAY)

    def __init__(self, lr=0.01, momentum=0.9):
        super().__init__()
        self.lr = lr
        self.momentum = momentum

    def update_one(self, param):
        for w, grad, v in blocks(param.data, param.grad.data, self._slot(param, "v")):
            v *= self.momentum
            v -= self.lr * grad
            w += v


class AdaGrad(Optimizer):
    """Per-element learning rates that shrink with the sum of the squared
    gradients seen so far."""

    lr = Number(**RATE)
    eps = Number(**RATE)

    def __init__(self, lr=0.001, eps=1e-8):
        super().__init__()
        self.lr = lr
        self.eps = eps

    def update_one(self, param):
        for w, grad, h in blocks(param.data, param.grad.data, self._slot(param, "h")):
            h += grad * grad
            w -= self.lr * grad / (np.sqrt(h) + self.eps)


class Adam(Optimizer):
    """Adam: running averages of the gradient and of its square, with the
    bias correction folded into the step size ``lr`` (a property of ``t``,
    the number of updates so far)."""

    alpha = Number(**RATE)
    beta1 = Number(**BETA)
    beta2 = Number(**BETA)
    eps = Number(**RATE)

    def __init__(self, alpha=0.001, beta1=0.9, beta2=0.999, eps=1e-8):
        super().__init__()
        self.t = 0
        self.alpha = alpha
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps

    def update(self, *args, **kwargs):
        self.t += 1
        super().update(*args, **kwargs)

    @property
    def lr(self):
        correction1 = 1.0 - math.pow(self.beta1, self.t)
        correction2 = 1.0 - math.pow(self.beta2, self.t)
        return self.alpha * math.sqrt(correction2) / correction1

    def update_one(self, param):
        lr = self.lr  # a property: computed once per parameter, not per block
        arrays = param.data, param.grad.data, self._slot(param, "m"), self._slot(param, "v")
        for w, grad, m, v in blocks(*arrays):
            m += (1 - self.beta1) * (grad - m)
            v += (1 - self.beta2) * (grad * grad - v)
            w -= lr * m / (np.sqrt(v) + self.eps)


# --- Hooks --------------------------------------------------------------------------------
# A hook gives each parameter a NEW gradient Variable instead of changing the
# old one's array in place: backward may hand the very same gradient array to
# two inputs (``W + b`` passes its output gradient on unchanged to both), and
# an in-place change would then reach both parameters, or one twice.


class WeightDecay:
    """L2 regularisation: adds ``rate * W`` to the gradient of every ``W``."""

    rate = Number(**RATE)

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, params):
        for param in params:
            param.grad = Variable(param.grad.data + self.rate * param.data)


class ClipGrad:
    """Scales all gradients down together when their global L2 norm is above
    ``max_norm``, so that it becomes ``max_norm``."""

    max_norm = Number(**RATE)

    def __init__(self, max_norm):
        self.max_norm = max_norm

    def __call__(self, params):
        total = 0.0
        for param in params:
            total += float((param.grad.data.astype(np.float64) ** 2).sum())
        total_norm = math.sqrt(total)
        rate = self.max_norm / (total_norm + 1e-6)
        if rate < 1:
            for param in params:
                param.grad = Variable(param.grad.data * rate)


# --- The rest of DeZero's optimizers and hooks ---------------------------------------------
class AdaDelta(Optimizer):
    """AdaDelta: no learning rate; each step is scaled by the ratio of the
    running averages of squared steps and of squared gradients (decay ``rho``)."""

    rho = Number(**DECAY)
    eps = Number(**RATE)

    def __init__(self, rho=0.95, eps=1e-6):
        super().__init__()
        self.rho = rho
        self.eps = eps

    def update_one(self, param):
        arrays = (param.data, param.grad.data, self._slot(param, "msg"),
                  self._slot(param, "msdx"))
        for w, grad, msg, msdx in blocks(*arrays):
            msg *= self.rho
            msg += (1 - self.rho) * grad * grad
            dx = np.sqrt((msdx + self.eps) / (msg + self.eps)) * grad
            msdx *= self.rho
            msdx += (1 - self.rho) * dx * dx
            w -= dx


class RMSProp(Optimizer):
    """RMSProp: the gradient divided by the root of a running average (decay
    ``rho``) of its square."""

    lr = Number(**RATE)
    rho = Number(**DECAY)
    eps = Number(**RATE)

    def __init__(self, lr=0.001, rho=0.9, eps=1e-8):
        super().__init__()
        self.lr = lr
        self.rho = rho
        self.eps = eps

    def update_one(self, param):
        for w, grad, ms in blocks(param.data, param.grad.data, self._slot(param, "ms")):
            ms *= self.rho
            ms += (1 - self.rho) * grad * grad
            w -= self.lr * grad / (np.sqrt(ms) + self.eps)


class FreezeParam:
    """A hook that keeps the given layers (or single Parameters) as they are:
    they are taken out of the update's list of parameters and their gradients
    are dropped. (DeZero's version only drops the gradients, after the list
    was made, so its update then fails on them.) The frozen parameters are
    held weakly, so the hook never keeps a replaced layer alive."""

    def __init__(self, *layers):
        self.freeze_params = []
        for layer in layers:
            params = [layer] if isinstance(layer, Variable) else list(layer.params())
            self.freeze_params.extend(weakref.ref(p) for p in params)

    def __call__(self, params):
        frozen = {id(p) for p in (ref() for ref in self.freeze_params) if p is not None}
        for param in params:
            if id(param) in frozen:
                param.grad = None
        params[:] = [p for p in params if id(p) not in frozen]  # the list update() goes on with
