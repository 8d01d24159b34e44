"""Workloads of the reproduced LSTM studies, framework-independent: shapes, loss, optimizer, mode.

``Workload`` itself lives in ``benchdefs.py`` (standard library only, so that every
runner, the MXNet one included, rebuilds it from its config); it is re-exported here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from traceviz.errors import TraceVizError, UsageError
from traceviz.runners.benchdefs import Workload

PRESETS: dict[str, Workload] = {
    # PTB word LM (Zaremba medium-ish): vocab 10001, embed 128, 3 x 256, seq 50, batch 128;
    # the model of "Stacked LSTM Language Model in TensorFlow and PyTorch" (lcy-seso/Carrot)
    "ptb_lm": Workload("ptb_lm", batch=128, seq=50, hidden=256, layers=3, input=128,
                       vocab=10001, embed=128, head="lm", classes=0, loss="xent",
                       optimizer="sgd", lr=1.0, mode="train"),
    # DeepBench inference: one layer, hidden/batch/timesteps are the swept axes
    "deepbench": Workload("deepbench", batch=64, seq=100, hidden=512, layers=1, input=512,
                          vocab=0, embed=0, head="none", classes=0, loss="mse",
                          optimizer="sgd", lr=0.01, mode="forward"),
    # rnn_bench: input = hidden, MSE on the last hidden state, SGD update
    "rnn_bench": Workload("rnn_bench", batch=128, seq=100, hidden=512, layers=1, input=512,
                          vocab=0, embed=0, head="last_mse", classes=0, loss="mse",
                          optimizer="sgd", lr=0.01, mode="train"),
    # 4 x 512, seq 100, batch 64, forward
    "seq100": Workload("seq100", batch=64, seq=100, hidden=512, layers=4, input=512,
                       vocab=0, embed=0, head="none", classes=0, loss="mse",
                       optimizer="sgd", lr=0.01, mode="forward"),
    # IMDB sentiment: embedding 5000, seq 500, one LSTM layer, FC + softmax, Adam
    "imdb": Workload("imdb", batch=256, seq=500, hidden=256, layers=1, input=128,
                     vocab=5000, embed=128, head="classify", classes=2, loss="xent",
                     optimizer="adam", lr=1e-3, mode="train"),
}

# On a CPU the full presets take minutes per variant; these caps keep the default
# capture of any variant well under a minute on 2 cores. Explicit flags override them.
CPU_CAPS = {"batch": 16, "seq": 20}
# bf16/fp16 on a CPU without the instructions for them is emulated, 20-40x slower than
# FP32 (3.2 s per ptb_lm batch at the caps above on an AVX2 machine): smaller still
EMULATED_HALF_CAPS = {"batch": 8, "seq": 10}
NATIVE_HALF_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}


def cpu_has_native(amp: str, cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes ``amp`` in hardware (Linux /proc/cpuinfo flags; True
    where they cannot be read, so nothing is capped by mistake)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return True
    flags = {f for line in cpuinfo.splitlines() if line.startswith("flags")
             for f in line.split(":", 1)[1].split()}
    return not flags or any(f in flags for f in NATIVE_HALF_FLAGS.get(amp, ()))

OVERRIDABLE = ("batch", "seq", "hidden", "layers", "embed", "vocab")


def make_workload(preset: str, mode: str | None, device: str, sparse_embedding: bool = False,
                  workers: int | None = None, amp: str | None = None,
                  **overrides: int | None) -> tuple[Workload, list[str]]:
    """The workload for ``preset`` with overrides; also notes on what was changed and why."""
    if preset not in PRESETS:
        raise TraceVizError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    w = PRESETS[preset]
    notes: list[str] = []
    given = {k: v for k, v in overrides.items() if v is not None}
    bad = [k for k, v in given.items() if k in OVERRIDABLE and v < (0 if k == "vocab" else 1)]
    if bad:
        raise UsageError("must be positive", option=bad[0])
    if device == "cpu":
        emulated = amp is not None and not cpu_has_native(amp)
        caps = EMULATED_HALF_CAPS if emulated else CPU_CAPS
        capped = {k: min(getattr(w, k), cap) for k, cap in caps.items()
                  if k not in given and getattr(w, k) > cap}
        if capped:
            w = replace(w, **capped)
            why = f" ({amp} is emulated on this CPU)" if emulated else ""
            notes.append(f"CPU default: {preset} scaled to "
                         + ", ".join(f"{k} {v}" for k, v in capped.items())
                         + f"{why} to finish in under a minute (pass --batch/--seq for the "
                           "full preset)")
    sizes: dict[str, Any] = {k: v for k, v in given.items() if k in OVERRIDABLE}
    w = replace(w, **sizes)
    if "embed" in given and w.vocab:
        w = replace(w, input=w.embed)
    if w.vocab == 0 and w.head in ("lm", "classify"):
        raise UsageError(f"preset {preset} needs a vocabulary above 0", option="vocab")
    if w.vocab == 0 and "hidden" in given and w.head in ("none", "last_mse"):
        w = replace(w, input=w.hidden)  # these presets feed input = hidden
    if mode:
        w = replace(w, mode=mode)
    if sparse_embedding:
        if not w.vocab:
            raise UsageError("needs a preset with an embedding", option="sparse_embedding")
        w = replace(w, sparse_embedding=True)
    if workers is not None:
        if workers < 0:
            raise UsageError("must be 0 or more", option="workers")
        w = replace(w, workers=workers)
    return w, notes
