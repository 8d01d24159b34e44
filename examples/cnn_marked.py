"""A small CNN trained with Adam that marks its own steps with traceviz.step().

python cnn_marked.py [--steps N]
"""

import sys

import torch
from torch import nn

import traceviz

steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 10
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
opt = torch.optim.Adam(model.parameters())
x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
for _ in range(steps):
    for _ in range(2):  # two optimizer steps per unit of work: traceviz.step() decides
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    traceviz.step()
print("done")
