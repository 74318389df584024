"""What the example loops share: a small model, its data, and the --fixed switch.

Each example of this folder is one way a PyTorch training loop keeps the
autograd graph of every step alive (lesson 07 of the course shows the same
mistakes in dezero_mini), and, with ``--fixed``, the loop written right:

    python -m dezero_mini leaks examples/pytorch/total_loss.py           # exit 1: a leak
    python -m dezero_mini leaks examples/pytorch/total_loss.py --fixed   # exit 0: clean
"""
import argparse

import torch

STEPS = 200  # more than `leaks` needs: its step budget stops the loop early


def options(description):
    """The examples' command line: ``--fixed`` and ``--steps``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--fixed", action="store_true", help="run the loop written right")
    parser.add_argument("--steps", type=int, default=STEPS, help="optimizer steps to run")
    return parser.parse_args()


def regression_data(batch_size=32, features=8, seed=0):
    """An endless supply of batches (inputs, targets) of a fixed linear problem."""
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(features, 1, generator=generator)
    while True:
        x = torch.randn(batch_size, features, generator=generator)
        yield x, x @ weights + 0.1 * torch.randn(batch_size, 1, generator=generator)


def mlp(features=8, hidden=32):
    """A two-layer network, the same weights every run."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, 1))
