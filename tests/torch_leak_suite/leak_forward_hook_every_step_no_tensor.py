"""A forward hook that counts calls, registered at every step and never removed: it keeps no
tensor, but the module's hooks pile up (each forward runs all of them)."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
calls = {"forward": 0}


def count_call(module, inputs, output):
    calls["forward"] += 1


for x, t in batches():
    model[2].register_forward_hook(count_call)  # the handle is dropped
    out = model(x)
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
