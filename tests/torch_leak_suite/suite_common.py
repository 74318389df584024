"""What the scripts of the suite share: a small model, its optimizer, and batches.

Each script of this folder is one way (or one right way) that PyTorch users
write a training loop; tests/test_torch_leak_suite.py runs each under
``leaks`` and checks its verdict and the holder it names.
"""
import torch

STEPS = 100  # more than the tests' step budget (--steps 12) needs, some steps not counted


def small_model(seed=0):
    """A two-layer MLP, the same weights every run."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def batches(count=STEPS, size=16, seed=0):
    """``count`` batches (inputs, targets) of a fixed linear problem."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(count):
        x = torch.randn(size, 4, generator=generator)
        yield x, x.sum(1, keepdim=True)


def mse(prediction, target):
    return torch.nn.functional.mse_loss(prediction, target)


class Squares(torch.utils.data.Dataset):
    """640 samples (x, sum of x), each made from its index: for DataLoader workers."""

    def __len__(self):
        return 640

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        x = torch.randn(4, generator=generator)
        return x, x.sum(0, keepdim=True)
