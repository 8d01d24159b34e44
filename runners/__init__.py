"""LSTM variants and their capture loops, one module per framework.

Nothing here imports a framework at import time; ``traceviz models`` asks each
framework module whether it can run, in a way that costs no framework import when
the framework is absent.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path


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
    Variant("cudnn_tf", "tensorflow",
            "keras.layers.LSTM: cuDNN on GPU, Keras' generic loop on CPU"),
    Variant("generic_tf", "tensorflow", "keras.layers.LSTM(use_cudnn=False): Keras' loop"),
    Variant("mode1_tf", "tensorflow",
            "LSTM(use_cudnn=False, implementation=1): 4 matmuls per input (TF Mode 1)"),
    Variant("mode2_tf", "tensorflow",
            "LSTM(use_cudnn=False, implementation=2): one batched matmul (TF Mode 2)"),
    Variant("unroll_tf", "tensorflow", "LSTM(unroll=True): the time loop unrolled in the graph"),
    Variant("eager_tf", "tensorflow", "fine-grained gate ops, Python loop, eager"),
    Variant("graph_tf", "tensorflow", "eager_tf's cell and loop under tf.function"),
    Variant("whileop_tf", "tensorflow", "fine-grained cell in tf.while_loop (tf.function)"),
    Variant("xla_tf", "tensorflow",
            "Keras' LSTM loop compiled by XLA (tf.function(jit_compile=True))"),
    Variant("scan_jax", "jax", "fine-grained cell in jax.lax.scan, jit-compiled"),
    Variant("gluon_mxnet", "mxnet",
            "gluon.rnn.LSTM (MXNet 1.9.1, imperative Gluon), in its own interpreter"),
)}

# MXNet 1.9.1 needs numpy<1.24, so it lives in its own environment
MXNET_ENV = Path(".venv-mxnet")
MXNET_PYTHON_VAR = "TRACEVIZ_MXNET_PYTHON"
MXNET_REQUIREMENTS = ("mxnet==1.9.1", "numpy<1.24")


def mxnet_python(explicit: str | None = None) -> str | None:
    """The interpreter that runs gluon_mxnet: --python, $TRACEVIZ_MXNET_PYTHON, or the
    environment `traceviz env mxnet` makes (./.venv-mxnet)."""
    candidates = [explicit] if explicit else [os.environ.get(MXNET_PYTHON_VAR),
                                              str(MXNET_ENV / "bin" / "python")]
    for candidate in candidates:
        if candidate and (Path(candidate).is_file() or shutil.which(candidate)):
            return candidate
    return None


# pip extras that install each framework beside traceviz
EXTRAS = {"torch": "torch", "tensorflow": "tf", "jax": "jax"}


def framework_installed(framework: str) -> bool:
    if framework == "mxnet":
        return mxnet_python() is not None
    return importlib.util.find_spec(framework) is not None
