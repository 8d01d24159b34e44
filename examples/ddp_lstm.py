"""Data-parallel LSTM training under torch.distributed, as a user would write it (no
traceviz in it): ``torchrun --nproc-per-node 2 ddp_lstm.py [--steps N]``, or
``traceviz capture --ranks 2 -- python ddp_lstm.py``.

Each rank trains a 2-layer LSTM language model on its own random tokens; DDP all-reduces
the gradients after every backward (Gloo on CPUs, NCCL on GPUs).
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=12)
p.add_argument("--hidden", type=int, default=64)
args = p.parse_args()

cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
device = torch.device("cuda", local) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
torch.manual_seed(0)  # the same weights on every rank
vocab, seq, batch = 50, 16, 8


class LanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, args.hidden)
        self.lstm = nn.LSTM(args.hidden, args.hidden, num_layers=2)
        self.head = nn.Linear(args.hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x))
        return self.head(out)


model = DistributedDataParallel(LanguageModel().to(device))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(1 + rank)  # each rank its own batches
x = torch.randint(0, vocab, (seq, batch), generator=g).to(device)
y = torch.randint(0, vocab, (seq, batch), generator=g).to(device)
for _ in range(args.steps):
    loss = nn.functional.cross_entropy(model(x).view(-1, vocab), y.view(-1))
    opt.zero_grad()
    loss.backward()  # DDP's gradient all-reduce runs here
    opt.step()
print(f"rank {rank}: trained {args.steps} steps, final loss {loss.item():.4f}")
dist.destroy_process_group()
