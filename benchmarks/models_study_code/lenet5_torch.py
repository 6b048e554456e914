"""LeNet-5 on MNIST in PyTorch (the study's cross-framework code-clone example)."""

import numpy as np
import torch
from torch import nn


class LeNet5(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def train(x, y, epochs=2, batch_size=64, lr=1e-3):
    model = LeNet5()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    xt = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    yt = torch.from_numpy(y.astype(np.int64))
    for _ in range(epochs):
        perm = torch.randperm(len(yt))
        for i in range(0, len(yt), batch_size):
            idx = perm[i : i + batch_size]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    return model


if __name__ == "__main__":
    data = np.load("mnist.npz")
    model = train(data["x"], data["y"])
    torch.jit.save(torch.jit.trace(model, torch.zeros(1, 1, 28, 28)), "lenet5.pt")
