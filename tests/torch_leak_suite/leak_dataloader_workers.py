"""A DataLoader with two worker processes, and total += loss in the main one."""
import torch
from suite_common import mse, small_model


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 640

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        x = torch.randn(4, generator=generator)
        return x, x.sum(0, keepdim=True)


if __name__ == "__main__":
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Squares(), batch_size=16, num_workers=2)
    total = 0
    for x, t in loader:
        loss = mse(model(x), t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = total + loss
