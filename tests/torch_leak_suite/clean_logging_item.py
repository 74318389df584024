"""The same buffered log, given numbers: each record keeps a float."""
import logging
import logging.handlers

import torch
from suite_common import batches, mse, small_model

log = logging.getLogger("train_clean")
log.propagate = False
log.setLevel(logging.INFO)
log.addHandler(logging.handlers.MemoryHandler(capacity=10_000, flushLevel=logging.CRITICAL))

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    log.info("step %d loss %.4f", step, loss.item())
