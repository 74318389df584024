"""No optimizer and no backward: an evaluation loop that builds graphs it keeps."""
import torch
from suite_common import batches, small_model

model = small_model()
scores = []
for x, t in batches():
    scores.append(model(x).mean())  # no torch.no_grad(): each score keeps its graph
