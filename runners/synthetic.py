"""Synthetic samples for a workload (numpy only: the MXNet runner loads it by path too).

Batch-major: inputs ``(n, seq)`` tokens or ``(n, seq, input)`` vectors; targets by head:
``lm`` tokens ``(n, seq)``, ``classify`` classes ``(n,)``, ``last_mse`` ``(n, hidden)``,
``none`` ``(n, seq, hidden)``. Tokens are int64, vectors float32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceviz.runners.benchdefs import Workload


def samples_needed(w: Workload, cfg: dict) -> int:
    """One fixed batch, or (``workers >= 0``) enough samples for every batch of the run."""
    if not w.loader:
        return w.batch
    # the most warm-up batches the run may take (capture_protocol.max_warmup: the same default)
    most = max(cfg["warmup"], int(cfg.get("max_warmup", cfg["warmup"] + 10)))
    return w.batch * (most + cfg["steps"] + cfg["profile_steps"] + 3)


def synthetic_data(w: Workload, n: int, seed: int) -> tuple:
    import numpy as np

    rng = np.random.default_rng(seed)
    seq = w.seq
    xs: np.ndarray
    ys: np.ndarray
    xs = rng.integers(0, w.vocab, (n, seq)) if w.vocab \
        else rng.standard_normal((n, seq, w.input), dtype=np.float32)
    if w.head == "lm":
        ys = rng.integers(0, w.vocab, (n, seq))
    elif w.head == "classify":
        ys = rng.integers(0, w.classes, (n,))
    elif w.head == "last_mse":
        ys = rng.standard_normal((n, w.hidden), dtype=np.float32)
    else:
        ys = rng.standard_normal((n, seq, w.hidden), dtype=np.float32)
    return xs, ys
