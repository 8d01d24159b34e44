"""The remedies a finding names, in the words of the trace's framework: what fuses a
repeated kernel sequence (an optimizer's update, an LSTM cell, a compiler), the PyTorch or
TensorFlow/JAX form of an action, and what the vendor calls its matrix units."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.intervals import union_blocks

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context


AMD_DEVICE = re.compile(r"\bAMD\b|Instinct|Radeon|\bMI\d{3}", re.IGNORECASE)


def remedy(ctx: Context, torch: str, tf: str, jax: str | None = None,
           mxnet: str | None = None, none: str | None = None) -> str:
    """The action in the words of the trace's framework (``Context.framework_name``):
    a TensorFlow trace gets ``tf``, a JAX trace ``jax`` (every rule outside the bound and
    host rules gives one; without it the ``tf`` text, which must then name no
    TensorFlow API), an MXNet trace without its own the PyTorch one; a TensorFlow or JAX
    trace never gets a PyTorch remedy. A program without a framework (``none``: an
    Nsight Systems export of C/CUDA code) gets ``none``'s text where the rule has one
    (CUDA's own words), else the PyTorch one."""
    name = ctx.framework_name
    if name == "none" and none:
        return none
    if name == "jax":
        return jax or tf
    if name == "tf":
        return tf
    return mxnet if name == "mxnet" and mxnet else torch


def framework_free(ctx: Context) -> bool:
    """The trace is of a program that runs no framework (``Context.framework_name`` is
    ``none``: an Nsight Systems export whose names show no framework's mark)."""
    return ctx.framework_name == "none"


def script_run(meta: Mapping[str, Any]) -> bool:
    """The trace is of a user's own code run by ``capture -- python ...``: its metadata
    names the command (``script``), or its bench.json counts steps from the code's marks
    (``steps_from``, written for a script run alone)."""
    bench = meta.get("bench")
    return bool(meta.get("script")) or (isinstance(bench, dict) and "steps_from" in bench)


def built_in(ctx: Context) -> bool:
    """The trace is a traceviz capture of one of its own variants (``capture --model``):
    advice may name capture's options for them (``--steps``, ``--max-warmup``,
    ``--workers``, ``--amp``). Never for a script run, a foreign trace or a lone raw
    trace."""
    return ctx.trace.meta.get("model") is not None and not script_run(ctx.trace.meta)


def capture_option(ctx: Context, text: str) -> str:
    """``text`` (a capture option in an action) for a capture of a built-in variant, else
    nothing."""
    return text if built_in(ctx) else ""


def cores(ctx: Context) -> str:
    """What the vendor calls its matrix units: AMD's matrix cores, NVIDIA's tensor cores."""
    devices = ctx.trace.meta.get("devices") or {}
    names = devices.values() if isinstance(devices, dict) else []
    apis = ctx.trace.events["launch_api"]
    apis = apis.cat.categories if isinstance(apis.dtype, pd.CategoricalDtype) else apis.unique()
    amd = any(AMD_DEVICE.search(str(n)) for n in names) or any(
        str(a).startswith("hip") for a in apis)
    return "matrix cores" if amd else "tensor cores"


OPTIMIZER_RANGE = re.compile(r"^(optimizer$|Optimizer\.step#)")
TORCHSCRIPT_VARIANTS = ("jit_torch", "static_torch")


def fusion_action(ctx: Context, work: pd.DataFrame, first: str) -> str:
    """What fuses a repeated sequence, for this trace: an optimizer's per-parameter
    update (its first kernel launched inside the optimizer's step range most of the
    time) wants a foreach or fused optimizer; an LSTM (every traceviz capture, or a trace
    naming one) a fused cell; TorchScript only for a model not already scripted."""
    ev = ctx.trace.events
    rows = work[work["name"].astype(str) == first]
    at = rows["launch_ts_ns"].fillna(rows["ts_ns"]).to_numpy(np.int64)
    ranges = ev[(ev["kind"] == "annotation") & ev["name"].astype(str).str.match(
        OPTIMIZER_RANGE)]
    bs, be = union_blocks(ranges["ts_ns"].to_numpy(np.int64),
                          (ranges["ts_ns"] + ranges["dur_ns"]).to_numpy(np.int64))
    i = np.searchsorted(bs, at, side="right") - 1
    inside = (i >= 0) & (at < be[np.maximum(i, 0)]) if len(bs) else np.zeros(len(at), bool)
    if len(at) and inside.mean() >= 0.5:
        return ("an optimizer's update, one kernel per parameter: a foreach or fused "
                "optimizer (torch.optim.SGD/Adam(..., foreach=True) or fused=True) runs it "
                "as a few kernels")
    from traceviz.analyses.advice.run_uses import holds_lstm, run_uses

    names = pd.Series(ev["name"].cat.categories.astype(str))
    lstm = holds_lstm(ctx)
    compiler = run_uses(ctx).compiler
    scripted = ctx.trace.meta.get("model") in TORCHSCRIPT_VARIANTS or bool(
        names.str.startswith("prim::").any())
    if ctx.framework == "tf":
        # TensorFlow's words on a TensorFlow trace, JAX's on a JAX one: never both
        jax = ctx.framework_name == "jax"
        ways = [] if compiler == "XLA" else [
            "jax.jit the step (XLA fuses what it compiles)" if jax else
            "compile with XLA (tf.function(jit_compile=True))"]
        ways += [("a fused LSTM (cuDNN's, through jax.experimental.rnn)" if jax else
                  "a fused LSTM (keras.layers.LSTM on cuDNN)")] if lstm else []
        ways.append("a custom (Pallas) kernel" if jax else "a custom kernel")
        return "fuse the pattern into one kernel: " + (
            ", ".join(ways[:-1]) + " or " if len(ways) > 1 else "") + ways[-1]
    ways = [] if compiler == "torch.compile" else ["torch.compile the model"]
    if lstm and not scripted:
        ways.append("TorchScript the cell")
    if lstm:
        ways.append("a fused LSTM (cuDNN's nn.LSTM)")
    ways.append("a custom (Triton) kernel")
    return "fuse the pattern into one kernel: " + (
        ", ".join(ways[:-1]) + " or " if len(ways) > 1 else "") + ways[-1]
