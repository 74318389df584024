"""An asyncio logger task adds up the losses it is sent: its suspended coroutine keeps them."""
import asyncio

import torch
from suite_common import batches, mse, small_model


async def average_losses(queue):
    total, count = 0, 0
    while True:
        loss = await queue.get()
        total = total + loss  # a tensor with its graph: the suspended coroutine keeps it
        count += 1


async def main():
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    queue = asyncio.Queue()
    logger_task = asyncio.create_task(average_losses(queue))
    for x, t in batches():
        loss = mse(model(x), t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        queue.put_nowait(loss)
        await asyncio.sleep(0)  # the logger runs
    logger_task.cancel()


asyncio.run(main())
