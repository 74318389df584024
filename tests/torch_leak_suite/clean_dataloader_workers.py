"""A DataLoader with two worker processes, the loss added up as a number."""
import torch
from suite_common import Squares, mse, small_model


if __name__ == "__main__":
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Squares(), batch_size=16, num_workers=2)
    total = 0.0
    for x, t in loader:
        loss = mse(model(x), t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
