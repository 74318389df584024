"""A forward hook keeps every activation in a list only its closure holds."""
import torch
from suite_common import batches, mse, small_model


def make_recorder():
    activations = []

    def record(module, inputs, output):
        activations.append(output)  # with its graph

    return record


model = small_model()
model[1].register_forward_hook(make_recorder())
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
