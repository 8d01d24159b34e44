"""A small MLP classifier run for inference only: no optimizer, no step marks.

python mlp_infer.py [--batches N]
"""

import sys

import torch
from torch import nn

batches = int(sys.argv[sys.argv.index("--batches") + 1]) if "--batches" in sys.argv else 40
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
with torch.no_grad():
    for _ in range(batches):
        model(torch.randn(32, 64)).softmax(-1)
print(f"ran {batches} batches")
sys.exit(3 if "--exit3" in sys.argv else 0)
