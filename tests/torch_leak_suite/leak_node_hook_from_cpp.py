"""A hook added at every step to an autograd node of a graph made once: the node keeps it in C++."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
reference = model(torch.ones(1, 4)).sum()  # a graph made once, before training
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    # Meant to compare with the reference's gradient later; each hook keeps its step's loss.
    reference.grad_fn.register_hook(lambda grad_inputs, grad_outputs, seen=loss: None)
