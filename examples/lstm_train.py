"""A small PyTorch LSTM training script, as a user would write it (no traceviz in it).

python lstm_train.py [--steps N] [--fail-at K]: trains a 2-layer LSTM language model on
random tokens; --fail-at raises in step K, as a script with a bug would.
"""

import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=12)
p.add_argument("--fail-at", type=int, default=-1)
args = p.parse_args()

torch.manual_seed(0)
vocab, hidden, seq, batch = 50, 32, 8, 4


class LanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=2)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x))
        return self.head(out)


model = LanguageModel()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randint(0, vocab, (seq, batch))
y = torch.randint(0, vocab, (seq, batch))
for step in range(args.steps):
    if step == args.fail_at:
        raise RuntimeError(f"loss went NaN at step {step}")
    with torch.profiler.record_function("forward"):
        loss = nn.functional.cross_entropy(model(x).view(-1, vocab), y.view(-1))
    opt.zero_grad()
    with torch.profiler.record_function("backward"):
        loss.backward()
    with torch.profiler.record_function("optimizer"):
        opt.step()
print(f"trained {args.steps} steps, final loss {loss.item():.4f}")
