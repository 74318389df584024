"""Attention maps stored on a module deep inside the model (model.encoder.layers[1].attn.maps)."""
import torch
from suite_common import batches, mse


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.query = torch.nn.Linear(4, 4)
        self.maps = []

    def forward(self, x):
        weights = torch.softmax(self.query(x) @ x.T, dim=-1)
        self.maps.append(weights)  # for a visualisation later
        return weights @ x


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        return x + self.attn(x)


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(), Layer()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.encoder = Encoder()
        self.head = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


model = Model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
