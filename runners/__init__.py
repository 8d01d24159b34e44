"""LSTM variants and their capture loops, one module per framework.

Nothing here imports a framework at import time; ``traceviz models`` asks each
framework module whether it can run, in a way that costs no framework import when
the framework is absent.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str
    framework: str
    description: str
    gpu_only: bool = False


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("cudnn_torch", "torch", "nn.LSTM: cuDNN on GPU, oneDNN on CPU"),
    Variant("cell_torch", "torch", "nn.LSTMCell loop (the seed's static LSTM)"),
    Variant("fine_torch", "torch", "fine-grained gate ops, eager"),
    Variant("jit_torch", "torch", "fine-grained gate ops under TorchScript (torch.jit.script)"),
    Variant("compile_torch", "torch", "fine-grained cell under torch.compile"),
    Variant("static_torch", "torch",
            "LSTMCell loop traced into one static TorchScript graph "
            "(the seed's JIT-ed static LSTM)"),
    Variant("naive8_torch", "torch", "8 GEMMs per step (one per gate and input)"),
    Variant("fused_torch", "torch",
            "input projection for all steps + one recurrent GEMM and one fused pointwise step"),
    Variant("graph_torch", "torch", "CUDA graph replay of fused_torch", gpu_only=True),
)}


def framework_installed(framework: str) -> bool:
    return importlib.util.find_spec(framework) is not None
