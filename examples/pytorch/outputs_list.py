"""A list of predictions kept for later: each keeps its forward graph and what it saved."""
import torch

from common import mlp, options, regression_data

args = options(__doc__)
model = mlp()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x_check, _ = next(regression_data(seed=1))
predictions = []  # to plot how the predictions move during training
for step, (x, t) in zip(range(args.steps), regression_data()):
    loss = torch.nn.functional.mse_loss(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if args.fixed:
        with torch.no_grad():  # no gradient will flow through these: build no graph
            predictions.append(model(x_check))
    else:
        predictions.append(model(x_check))  # a graph that no backward will ever free
print(f"{len(predictions)} predictions kept")
