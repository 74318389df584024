"""A recurrent state carried from batch to batch without `detach()`.

Here it is the state of a second stream that the loop follows beside its
training (a validation stream read one batch per step): every step's graph
hangs on the state, with what each step saved. In the training stream
itself the same mistake makes the second `backward()` fail (PyTorch frees
the graph it went through), and `retain_graph=True`, the change that makes
the error go away, keeps every window's graph as here.
"""
import torch

from common import options, regression_data

args = options(__doc__.splitlines()[0])
torch.manual_seed(0)
cell = torch.nn.RNNCell(8, 16)
readout = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD([*cell.parameters(), *readout.parameters()], lr=0.01)
h_val = torch.zeros(32, 16)  # the validation stream's state
for step, ((x, t), (x_val, t_val)) in zip(range(args.steps),
                                        zip(regression_data(), regression_data(seed=1))):
    h = cell(x)  # each training batch starts from a zero state
    loss = torch.nn.functional.mse_loss(readout(h), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if args.fixed:
        h_val = h_val.detach()  # carry the value, not its history
    h_val = cell(x_val, h_val)
    val_loss = torch.nn.functional.mse_loss(readout(h_val), t_val)
print(f"last validation loss {val_loss.item():.4f}")
