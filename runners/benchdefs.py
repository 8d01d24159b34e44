"""What a run's benchmark figures mean: the spread of the timed batches and when it is
noisy, when warm-up has settled, the first-call time, and a workload (``Workload``: one
run's shapes, loss, optimizer and mode) and its FLOPs, and the profiler's overhead (the
one definition bench.json and the analyses share).

The runners write these figures into bench.json (``capture_protocol.py``); the analyses recompute
them for a bench.json of an older run (``analyses/timings.py``) and hold the run's work
against the device (``analyses/efficiency/workload.py``). Standard library only, like
``capture_protocol.py``: the MXNet runner loads both by path. The parent side builds the
``Workload`` (``presets.make_workload``, which re-exports it), writes it into the runner's
config as ``to_dict()``, and every runner rebuilds it with ``from_dict``.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, fields
from typing import Any

# A benchmark is noisy when its timed batches spread this much (docs/capture.md, "Timings").
NOISY_CV = 0.10          # coefficient of variation (stdev / mean)
NOISY_MAX_OVER_MIN = 1.5
# Warm-up goes on until the last SETTLE_WINDOW batches agree within NOISY_MAX_OVER_MIN
# (TorchScript profiles then optimizes, torch.compile/XLA compile on their first calls),
# bounded by --max-warmup batches.
SETTLE_WINDOW = 3


def spread(times: list[float]) -> dict:
    """min/median/max/mean, coefficient of variation, max/min, and the noisy verdict."""
    median = statistics.median(times)
    mean = statistics.fmean(times)
    cv = statistics.pstdev(times) / mean if mean > 0 else 0.0
    ratio = max(times) / min(times) if min(times) > 0 else float("inf")
    return {"median": median, "min": min(times), "max": max(times), "mean": mean,
            "cv": cv, "max_over_min": ratio,
            "noisy": cv > NOISY_CV or ratio > NOISY_MAX_OVER_MIN}


# fewer timed steps than this: noisy, and no profiler-overhead figure
MIN_TIMED = 3
# The timed batches' noise around their median: this many scaled median absolute
# deviations (1.4826 MAD estimates the standard deviation of normal noise, and one slow
# batch cannot widen it the way it widens [min, max]).
NOISE_MADS = 3.0
MAD_TO_SD = 1.4826


def within_noise(value: float, timed: list[float]) -> bool:
    """Whether ``value`` reads as one more timed batch: inside the timed batches' range
    and within ``NOISE_MADS`` scaled median absolute deviations of their median."""
    median = statistics.median(timed)
    mad = statistics.median(abs(t - median) for t in timed)
    return min(timed) <= value <= max(timed) and \
        abs(value - median) <= NOISE_MADS * MAD_TO_SD * mad


def profiler_overhead(profiled: list[float], timed: list[float]) -> dict:
    """The profiler's overhead, the one statistic every figure of it is: the steady
    profiled step over the median timed (unprofiled) step.

    The steady profiled step is the median of the profiled steps after the first: the
    first holds the profiler's own start-up (its buffers, the first records, the tracer's
    first callbacks), which no later step pays. The overhead is significant unless the
    steady step is ``within_noise`` of the timed steps.
    Returns bench.json's keys (``profiled_time_per_batch_s``: the steady step,
    ``profiler_overhead``, ``profiler_overhead_significant``), or {} where it cannot be
    told: fewer than two profiled steps (only the start-up step) or fewer than
    ``MIN_TIMED`` timed ones."""
    if len(profiled) < 2 or len(timed) < MIN_TIMED:
        return {}
    steady = statistics.median(profiled[1:])
    median = statistics.median(timed)
    return {"profiled_time_per_batch_s": steady,
            "profiler_overhead": steady / median if median > 0 else None,
            "profiler_overhead_significant": not within_noise(steady, timed)}


def settled(times: list[float]) -> bool:
    last = times[-SETTLE_WINDOW:]
    return len(last) == SETTLE_WINDOW and max(last) <= NOISY_MAX_OVER_MIN * min(last)


def first_call_seconds(warmup: list[float], median: float) -> float:
    """Compile and first-call time: the warm-up batches' time above the settled median
    (what tracing, compiling, autotuning and lazy set-up added to the first batches)."""
    return sum(max(0.0, t - median) for t in warmup)


def workload_flops(w: dict, rank: int | None = None) -> dict:
    """FLOPs of one batch of a workload (multiply and add counted apart), by part.

    LSTM layer l: 2 * T * B * 4H * (I_l + H) per direction (the input and recurrent
    products of the four gates; I_0 = the input width, then H), the count
    ``traceviz.opcost`` gives aten::_cudnn_rnn. Embedding: 0 (a lookup). Decoder ("lm"):
    2 * T * B * H * V + T * B * V (bias); classifier: 2 * B * H * C + B * C. Softmax and
    loss: 5 FLOPs per logit forward, 3 backward. Training: the matrix products three
    times (forward, data gradient, weight gradient), the bias twice; the optimizer's
    update is left out. Gate pointwise arithmetic is not counted (as in opcost).
    ``rank``: the factorized LSTM's (W ~ W2 W1), whose layer l does
    2 * T * B * (r * (I_l + H) + 4H * r)."""
    t, b, h, layers = (int(w[k]) for k in ("seq", "batch", "hidden", "layers"))
    widths = [int(w["input"]) if i == 0 else h for i in range(layers)]
    lstm = sum(2 * t * b * (4 * h * (i + h) if rank is None else rank * (i + h) + 4 * h * rank)
               for i in widths)
    head, bias, logits = 0, 0, 0
    if w.get("head") == "lm":
        v = int(w["vocab"])
        head, bias, logits = 2 * t * b * h * v, t * b * v, t * b * v
    elif w.get("head") == "classify":
        c = int(w["classes"])
        head, bias, logits = 2 * b * h * c, b * c, b * c
    train = w.get("mode") == "train"
    parts = {"lstm": lstm * (3 if train else 1), "head": head * (3 if train else 1)
             + bias * (2 if train else 1), "softmax": logits * (8 if train else 5)}
    return {"total": sum(parts.values()), "parts": parts}


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
