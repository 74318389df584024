"""Errors kept with sys.exc_info(): each traceback keeps the frame of a step and its locals."""
import sys

import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
errors = []


def check(out):
    scaled = out * 2  # a local with a graph: the traceback's frame keeps it
    if scaled.shape[0] > 0:
        raise ValueError("a warning turned into an exception")


for x, t in batches():
    out = model(x)
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    try:
        check(out)
    except ValueError:
        errors.append(sys.exc_info())
