"""Losses logged as tensors to a handler that buffers its records: each record's args keep one."""
import logging
import logging.handlers

import torch
from suite_common import batches, mse, small_model

log = logging.getLogger("train")
log.propagate = False
log.setLevel(logging.INFO)
buffered = logging.handlers.MemoryHandler(capacity=10_000, flushLevel=logging.CRITICAL)
log.addHandler(buffered)  # flushed at the end of training: never, here

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    log.info("step %d loss %s", step, loss)  # the record keeps the tensor, formatted later
