"""Attention, fused or not: an unfused attention is a softmax over an ``[..., S, S]``
tensor between two batched matmuls (Q·Kᵀ writes the S×S scores, the softmax reads and
writes them, P·V reads them; a mask, a scale or dropout each read and write them once
more), found from the shapes the profiler recorded (``record_shapes``). A fused kernel
(FlashAttention, SDPA's, cuDNN's, an FMHA: category ``attention``) keeps the scores in
on-chip memory and never writes them.

Per sequence length S: the softmax calls, the kernel time of every op that reads or
writes the S×S tensor (the two matmuls included), the bytes of S×S tensors they move, and
a fused kernel's time by a memory-traffic model: the two matmuls' FLOPs at half the
device's matrix peak (FlashAttention-2 reaches 50-70 % of it on A100/H100) or Q, K, V and
the output read and written once at the device's bandwidth, whichever is longer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.efficiency.ops import _device_name, op_of_kernels
from traceviz.analyses.efficiency.workload import stated_peak
from traceviz.analyses.work import work_rows
from traceviz.opcost import peaks
from traceviz.opcost.shapes import DTYPE_BYTES, DTYPE_PRECISION, parse_details

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

SOFTMAX = re.compile(r"^aten::(_safe_|_)?softmax$|^aten::_masked_softmax$|^Softmax$")
MATMUL = re.compile(r"^aten::(bmm|matmul|baddbmm|einsum)$|^BatchMatMul(V2|V3)?$")
MIN_SEQ = 16            # below this the scores are a few registers' worth: no finding
FUSED_PEAK_SHARE = 0.5  # a fused attention kernel's matrix rate, of the device's peak


@dataclass(frozen=True)
class AttentionGroup:
    seq: int                   # S
    softmax_calls: int
    batch_heads: int           # B·H of the Q·Kᵀ matmul (its batch dims)
    head_dim: int              # d
    dtype: str
    kernel_ns: int             # every kernel of the ops on the S×S tensor
    softmax_ns: int
    matmul_ns: int
    sxs_bytes: int             # bytes of S×S tensors those ops read and wrote
    flops: int                 # the two matmuls' FLOPs
    qkvo_bytes: int            # Q, K, V and the output, once each
    fused_ns: int | None       # the model's fused kernel time (None: no peak known)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass(frozen=True)
class Attention:
    groups: list[AttentionGroup]
    kernel_total_ns: int             # all kernel time (copies aside): the shares' base
    fused_kernels: int               # kernels of fused attention (category attention)
    fused_kernel_ns: int
    rows: np.ndarray = field(repr=False)        # work-row labels of the unfused kernels
    matmul_rows: np.ndarray = field(repr=False)  # the subset that are the two matmuls
    scale: dict[int, float] = field(default_factory=dict, repr=False)  # per row label

    @property
    def unfused_ns(self) -> int:
        return sum(g.kernel_ns for g in self.groups)

    @property
    def share(self) -> float:
        return self.unfused_ns / self.kernel_total_ns if self.kernel_total_ns else 0.0


def _shape_info(name: str, details: str) -> tuple[str, int, list, list, str] | None:
    """(role, S, first shape, second shape, dtype): role ``softmax`` (S: the scores'
    side), ``qk`` (a matmul writing [.., S, S]), ``pv`` (reading it), ``sxs`` (any
    other op on a [.., S, S] tensor), per op record; None where it is none of them."""
    a = parse_details(details)
    if a is None:
        return None
    ts = a.tensors()
    if not ts:
        return None
    (s0, d0) = ts[0]
    if MATMUL.match(name):
        if name.endswith("baddbmm") and len(ts) >= 3:
            ts = ts[1:]
        if len(ts) < 2 or len(ts[0][0]) < 2 or len(ts[1][0]) < 2:
            return None
        x, y = ts[0][0], ts[1][0]
        if x[-2] == y[-1] and x[-1] == y[-2] and x[-2] != x[-1]:
            return "qk", x[-2], x, y, ts[0][1]
        if x[-1] == x[-2]:
            return "pv", x[-1], x, y, ts[0][1]
        return None
    if len(s0) >= 2 and s0[-1] == s0[-2] and s0[-1] >= MIN_SEQ:
        return ("softmax" if SOFTMAX.match(name) else "sxs"), s0[-1], s0, [], d0
    return None


def attention(trace: Trace, work: pd.DataFrame | None = None, peak: peaks.Peak | None = None
              ) -> Attention:
    """Unfused attention by sequence length, and the fused attention kernels. ``peak``:
    the device's peak the command resolved (``--peak``, or its efficiency's); None: the
    trace's device's row of the peak table, else the peak the trace states."""
    work = work_rows(trace) if work is None else work
    empty = np.zeros(0, np.int64)
    cat = work["category"].astype(object).to_numpy() if len(work) else np.zeros(0, object)
    fused = cat == "attention"
    kernel = (work["kind"] == "kernel").to_numpy() if len(work) else np.zeros(0, bool)
    total = int(work["dur_ns"].to_numpy()[kernel].sum()) if len(work) else 0
    base = Attention([], total, int(fused.sum()), int(work["dur_ns"].to_numpy()[fused].sum())
                     if len(work) else 0, empty, empty)
    if trace.is_cpu or work.empty:
        return base
    ev = trace.events
    op = op_of_kernels(trace, work)
    has = op >= 0
    if not has.any():
        return base
    ops = pd.DataFrame({"op": op[has], "dur": work["dur_ns"].to_numpy(np.int64)[has],
                        "label": work.index.to_numpy()[has]})
    # the shapes are read once per distinct (name, details) pair, not per kernel
    names = ev["name"].astype(str).to_numpy()[ops["op"]]
    details = ev["details"].astype(str).to_numpy()[ops["op"]]
    codes, uniq = pd.MultiIndex.from_arrays([names, details]).factorize()
    per = [_shape_info(n, d) for n, d in uniq]
    got = _Rows(per, codes)
    role = np.array([g[0] if g else "" for g in per], object)[codes]
    seq = np.array([g[1] if g else 0 for g in per], np.int64)[codes]
    seqs = set(seq[role == "softmax"].tolist())
    keep = (role != "") & np.isin(seq, list(seqs))
    if not keep.any():
        return base
    if peak is None:
        device = _device_name(trace, work)
        peak = peaks.find(device) or stated_peak(trace, device)
    groups, scale = [], {}
    for s in sorted(seqs):
        mine = keep & (seq == s)
        r = role[mine]
        dur = ops["dur"].to_numpy()[mine]
        # one record per op call: the shapes of a call, not of each of its kernels
        calls = ops["op"].to_numpy()[mine]
        first = ~pd.Series(calls).duplicated().to_numpy()
        qk = [got[i] for i in np.flatnonzero(mine)[first & (r == "qk")]]
        sm = int((first & (r == "softmax")).sum())
        x = qk[0][2] if qk else [1, s, 0]
        dtype = qk[0][4] if qk else got[np.flatnonzero(mine)[0]][4]
        bh, d = int(np.prod(x[:-2])) if len(x) > 2 else 1, int(x[-1])
        elem = DTYPE_BYTES.get(dtype, 0)
        sxs = bh * s * s * elem
        touches = {"qk": 1, "pv": 1, "softmax": 2, "sxs": 2}
        moved = int(sum(touches[v] for v in r[first]) * sxs)
        flops = 2 * 2 * bh * s * s * d * sm
        qkvo = 4 * bh * s * d * elem * sm
        fused_ns = _fused_ns(peak, dtype, flops, qkvo)
        matmul = np.isin(r, ("qk", "pv"))
        g = AttentionGroup(s, sm, bh, d, dtype, int(dur.sum()), int(dur[r == "softmax"].sum()),
                           int(dur[matmul].sum()), moved, flops, qkvo, fused_ns)
        groups.append(g)
        if fused_ns is not None and g.matmul_ns:
            for label in ops["label"].to_numpy()[mine][matmul]:
                scale[int(label)] = fused_ns / g.matmul_ns
    labels = ops["label"].to_numpy()[keep]
    mm = ops["label"].to_numpy()[keep & np.isin(role, ("qk", "pv"))]
    return Attention(groups, total, base.fused_kernels, base.fused_kernel_ns,
                     labels.astype(np.int64), mm.astype(np.int64), scale)


class _Rows:
    """Row i's shape record, through the distinct pairs' codes."""

    def __init__(self, per: list, codes: np.ndarray) -> None:
        self.per, self.codes = per, codes

    def __getitem__(self, i: int) -> tuple:
        return self.per[self.codes[i]]


def _fused_ns(peak: peaks.Peak | None, dtype: str, flops: int, qkvo: int) -> int | None:
    if peak is None:
        return None
    got = peak.applicable(DTYPE_PRECISION.get(dtype), "matrix")
    bw = peak.bandwidth
    if got is None or not bw:
        return None
    compute = flops / (got[1] * 1e12 * FUSED_PEAK_SHARE) * 1e9
    memory = qkvo / (bw * 1e9) * 1e9
    return int(max(compute, memory))
