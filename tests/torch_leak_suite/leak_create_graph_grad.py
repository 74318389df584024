"""backward(create_graph=True) with gradients zeroed through .data: each .grad keeps every step's graph."""
import warnings

import torch
from suite_common import batches, mse, small_model

warnings.simplefilter("ignore")  # PyTorch warns of this very cycle
model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    for parameter in model.parameters():  # zeroed as old tutorials do: the grad_fn stays
        if parameter.grad is not None:
            parameter.grad.data.zero_()
    loss.backward(create_graph=True)  # for a gradient penalty computed elsewhere
    optimizer.step()
