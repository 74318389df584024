"""The same warnings, made with text: each record keeps a string."""
import warnings

import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for x, t in batches():
        loss = mse(model(x), t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss > 0.0:
            warnings.warn(f"loss spike: {loss.item():.4f}")
print(len(caught), "warnings")
