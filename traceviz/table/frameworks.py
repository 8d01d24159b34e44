"""Which framework recorded a trace: the runner's record, the format, and for an XSpace
which XLA front end, TensorFlow or JAX, from the host events' names (one pass over the
distinct names). Advice names the remedies of the trace's framework; the host's time
between ops is named after what runs there (Python, or the framework's executor)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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


def trace_framework(meta: Mapping[str, Any], names: pd.Series) -> str:
    """``torch``, ``tf``, ``jax``, ``mxnet`` or ``none``: the framework that recorded a
    trace, by the runner's record, else its format (an XSpace: TensorFlow or JAX by its
    host events' names, ``xla_front_end``; an Nsight Systems export by the framework its
    names show, ``recorded_framework``); advice's ``Context.framework_name``."""
    fmt = str(meta.get("source_format", ""))
    runner = str((meta.get("runner") or {}).get("framework", ""))
    if runner in ("tensorflow", "jax"):
        return "tf" if runner == "tensorflow" else "jax"
    if fmt == "xplane":
        return xla_front_end(names)
    if fmt == "mxnet" or runner == "mxnet":
        return "mxnet"
    if fmt.startswith("nsys") and not runner:  # recorded from outside the program
        return recorded_framework(names)
    return "torch"


# What runs on a launching thread between its recorded ops and calls: Python (PyTorch,
# MXNet, and any thread the profiler names after the interpreter), else the framework's
# own runtime (TensorFlow's executor threads, JAX's/XLA's runtime threads)
_BETWEEN = {"tf": "TensorFlow's executor", "jax": "the JAX runtime (XLA's executor)"}


def between_ops_what(meta: Mapping[str, Any], names: pd.Series, pid: int, tid: int) -> str:
    """What the time between ops on the thread ``pid``/``tid`` is, as a reader names it:
    ``Python``, or on a TensorFlow/JAX thread that is not the interpreter's, the
    framework's executor; in a program without a framework, its own code."""
    framework = trace_framework(meta, names)
    thread = str((meta.get("thread_names") or {}).get(f"{pid}:{tid}", ""))
    if thread.lower().startswith("python"):
        return "Python"
    if framework == "none":  # a C/CUDA program: its own code, not an interpreter
        return "the program's own code"
    return _BETWEEN.get(framework, "Python")
