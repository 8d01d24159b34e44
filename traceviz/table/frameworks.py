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


def trace_framework(meta: Mapping[str, Any], names: pd.Series) -> str:
    """``torch``, ``tf``, ``jax`` or ``mxnet``: the framework that recorded a trace, by
    the runner's record, else its format (an XSpace: TensorFlow or JAX by its host
    events' names, ``xla_front_end``); the rule advice's ``Context.framework_name``
    follows."""
    fmt = str(meta.get("source_format", ""))
    runner = str((meta.get("runner") or {}).get("framework", ""))
    if runner in ("tensorflow", "jax"):
        return "tf" if runner == "tensorflow" else "jax"
    if fmt == "xplane":
        return xla_front_end(names)
    return "mxnet" if fmt == "mxnet" or runner == "mxnet" else "torch"


# What runs on a launching thread between its recorded ops and calls: Python (PyTorch,
# MXNet, and any thread the profiler names after the interpreter), else the framework's
# own runtime (TensorFlow's executor threads, JAX's/XLA's runtime threads)
_BETWEEN = {"tf": "TensorFlow's executor", "jax": "the JAX runtime (XLA's executor)"}


def between_ops_what(meta: Mapping[str, Any], names: pd.Series, pid: int, tid: int) -> str:
    """What the time between ops on the thread ``pid``/``tid`` is, as a reader names it:
    ``Python``, or on a TensorFlow/JAX thread that is not the interpreter's, the
    framework's executor."""
    framework = trace_framework(meta, names)
    thread = str((meta.get("thread_names") or {}).get(f"{pid}:{tid}", ""))
    if framework not in _BETWEEN or thread.lower().startswith("python"):
        return "Python"
    return _BETWEEN[framework]
