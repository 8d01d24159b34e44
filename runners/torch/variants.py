"""The PyTorch model map: variant name -> model class, and the options a variant takes.
Imported only inside a runner process (or a test).

The registry (``runners/__init__.py``) names the same variants; a test holds the two
together.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from traceviz.runners.torch.lstms import (
    CellLSTM,
    CompileLSTM,
    CudnnLSTM,
    FineLSTM,
    FusedLSTM,
    GraphLSTM,
    JitLSTM,
    Naive8LSTM,
    StaticLSTM,
)
from traceviz.runners.torch.rung_lstms import (
    CompileFullLSTM,
    FactorizedLSTM,
    StreamsLSTM,
    TransposedLSTM,
    WavefrontLSTM,
)

MODELS: dict[str, type[nn.Module]] = {
    "cudnn_torch": CudnnLSTM,
    "cell_torch": CellLSTM,
    "fine_torch": FineLSTM,
    "jit_torch": JitLSTM,
    "compile_torch": CompileLSTM,
    "static_torch": StaticLSTM,
    "naive8_torch": Naive8LSTM,
    "fused_torch": FusedLSTM,
    "graph_torch": GraphLSTM,
    "streams_torch": StreamsLSTM,
    "wavefront_torch": WavefrontLSTM,
    "transposed_torch": TransposedLSTM,
    "factorized_torch": FactorizedLSTM,
    "compile_full_torch": CompileFullLSTM,
}

# the capture options a variant's constructor takes (``--rank``, ``--compile-mode``)
OPTIONS: dict[str, tuple[str, ...]] = {
    "factorized_torch": ("rank",),
    "compile_full_torch": ("compile_mode",),
}


def build(name: str, input_size: int, hidden: int, layers: int,
          options: dict[str, Any] | None = None) -> nn.Module:
    """The variant's model; of ``options`` only those it takes (None: its default)."""
    given = {k: v for k, v in (options or {}).items() if k in OPTIONS.get(name, ())}
    return MODELS[name](input_size, hidden, layers, **given)
