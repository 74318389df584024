"""A summary registered with atexit at every step, with the step's loss as
its argument: atexit keeps each function and its arguments (the loss, with
its graph) until the interpreter exits."""
import atexit

import torch
from suite_common import batches, mse, small_model


summary = []  # text, written at exit: not what keeps the graphs


def print_loss(step, loss):
    summary.append(f"step {step}: loss {loss.item():.4f}")


model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    atexit.register(print_loss, step, loss)
