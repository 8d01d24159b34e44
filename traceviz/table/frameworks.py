"""Which XLA front end recorded an XSpace: TensorFlow or JAX, from the host events' names
(one pass over the distinct names). Advice names the remedies of the trace's framework."""

from __future__ import annotations

import re

import pandas as pd

from traceviz.algos.categorical import categorical_of

# TensorFlow's executor and eager runtime, its ops' Python API; JAX's dispatch (pjit),
# PjRt client and Python frames ("$jaxlib.utils safe_map", "$core.py:2002 ...")
_TF = re.compile(r"^(?:ExecutorState::Process|EagerKernelExecute|EagerExecute|"
                 r"TFE_|__inference_|tf\.|IteratorGetNext)")
_JAX = re.compile(r"(?:^PjitFunction|^pjit|jaxlib|^\$.*jax|^jit_|PjRt|"
                  r"^Wait for donation holds$)")


def xla_front_end(names: pd.Series) -> str:
    """``tf`` or ``jax``: the front end whose names the trace holds more of (``tf``
    where neither shows: the profiler's own default)."""
    cats = pd.Series(categorical_of(names).categories.astype(str))
    tf = int(cats.str.contains(_TF).sum())
    jax = int(cats.str.contains(_JAX).sum())
    return "jax" if jax > tf else "tf"


# what a framework leaves in a trace recorded outside it (an Nsight Systems export):
# PyTorch's ATen ops (emit_nvtx) and kernels, c10, Triton/Inductor kernels, a profiler
# step; TensorFlow's kernels, Eigen's and its executor; XLA's fusions and runtime and JAX
# (the TensorFlow/JAX words name both). cuBLAS, cuDNN and NCCL are libraries a C/CUDA
# program calls too: no mark
_TORCH_MARKS = re.compile(r"(?:\b(?:aten|at|c10|torch|caffe2)::|^triton_|^ProfilerStep|"
                          r"^torch[._])")
_TF_MARKS = re.compile(r"(?:\b(?:tensorflow|Eigen|xla|jax)::|^__inference_|"
                       r"^(?:EagerKernelExecute|ExecutorState|TFE_|jit_|PjitFunction)|"
                       r"^(?:loop|input)_\w*fusion|^(?:wrapped|gemm_fusion)_)")


def recorded_framework(names: pd.Series) -> str:
    """``torch``, ``tf`` or ``none``: the framework whose ops or kernels a trace recorded
    from outside (an Nsight Systems export) holds, by its distinct names; ``none`` for a
    program that shows none (C/CUDA, TensorRT, Fortran), whose remedies name no framework.
    """
    cats = pd.Series(categorical_of(names).categories.astype(str))
    torch = int(cats.str.contains(_TORCH_MARKS).sum())
    tf = int(cats.str.contains(_TF_MARKS).sum())
    if not torch and not tf:
        return "none"
    return "tf" if tf > torch else "torch"
