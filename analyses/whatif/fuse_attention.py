"""The ``fuse_attention`` what-if scenario: every unfused attention (a softmax over
[..., S, S] scores between two batched matmuls, ``analyses/efficiency/attention_fusion.py``)
runs as one fused kernel (FlashAttention, PyTorch's SDPA): the kernels on the S×S tensor
go with their launch calls, and the two matmuls take the fused kernel's modelled time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.analyses.efficiency.attention_fusion import FUSED_PEAK_SHARE, attention
from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.whatif.given import Given
from traceviz.units import fmt_bytes, fmt_ns


def fuse_attention(g: ReplayGraph, _: float, given: Given) -> tuple[ReplayGraph, list[str]]:
    a = attention(g.trace, peak=given.peak)
    if not a.scale:
        return g, []
    rows = g.d_rows
    on = np.isin(rows, a.rows)
    matmul = np.isin(rows, a.matmul_rows)
    scale = pd.Series(rows).map(a.scale).fillna(1.0).to_numpy(np.float64)
    removed = on & ~matmul
    d_dur = np.where(matmul, (g.d_dur * scale).astype(np.int64), g.d_dur)
    calls = np.unique(g.d_launch[removed & (g.d_launch >= 0)])
    h_dur = g.h_dur.copy()
    h_dur[calls] = 0
    groups = ", ".join(f"S={x.seq} ({x.softmax_calls} calls, {fmt_ns(x.kernel_ns)} of kernels, "
                       f"{fmt_bytes(x.sxs_bytes)} of S×S tensors moved; fused "
                       f"{fmt_ns(x.fused_ns)})" for x in a.groups if x.fused_ns is not None)
    return g.with_changes(d_dur=d_dur, d_removed=g.d_removed | removed, h_dur=h_dur), [
        f"each unfused attention becomes one fused kernel: {groups}",
        "the softmax, mask, scale and dropout kernels on the S×S scores go with their "
        "launch calls; the two matmuls together last the fused kernel's time: their FLOPs "
        f"at {FUSED_PEAK_SHARE:.0%} of the device's matrix peak, or Q, K, V and the output "
        "moved once at its bandwidth, whichever is longer (the scores stay on chip)"]
