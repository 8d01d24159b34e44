"""``Workload``: one run's shapes, loss, optimizer and mode, framework-independent.

Standard library only: the parent side builds it (``presets.make_workload``), writes it
into the runner's config as ``to_dict()``, and every runner rebuilds it with
``from_dict``, the MXNet runner too, which loads this file by path (no traceviz in its
interpreter). ``presets.py`` re-exports it with the presets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Workload:
    preset: str
    batch: int
    seq: int
    hidden: int
    layers: int
    input: int          # LSTM input width (= embed when there is a vocabulary)
    vocab: int          # 0: no embedding, inputs are dense vectors
    embed: int
    head: str           # "lm" (decoder to vocab), "classify" (FC + softmax), "last_mse", "none"
    classes: int
    loss: str           # "xent" or "mse"
    optimizer: str      # "sgd" or "adam"
    lr: float
    mode: str           # "forward" or "train"
    sparse_embedding: bool = False
    workers: int = -1   # >= 0: batches come from a DataLoader with that many workers

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (config.json's ``workload``, ``Trace.meta["workload"]``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        """The workload of ``to_dict``'s form; keys it does not know are left out (a
        trace's metadata may carry more), a missing required one raises TypeError."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @property
    def train(self) -> bool:
        return self.mode == "train"

    @property
    def loader(self) -> bool:
        """Batches come from a data loader (``workers`` >= 0), not one fixed batch."""
        return self.workers >= 0

    @property
    def outputs(self) -> int | None:
        """The head's output width: the vocabulary (lm), the classes (classify), or None
        (no head: the loss is on the LSTM's states)."""
        return {"lm": self.vocab, "classify": self.classes}.get(self.head)
