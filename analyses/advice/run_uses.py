"""What a run already does, so that advice never recommends it: CUDA graphs (most kernels
launched by graph launches: torch.compile's reduce-overhead, torch.cuda.graph, XLA's
command buffers), a compiler (torch.compile's regions and Inductor kernels, XLA's fused
kernels), an LSTM at all (LSTM remedies only where the trace holds one), and the run's
precision where the trace records no dtypes (a FP32 run gets no mixed-precision advice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.table.classify import TENSOR_CORE_HALF, xla_category
from traceviz.table.launch_apis import is_graph_launch
from traceviz.units import fmt_ns

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

GRAPHED = 0.5   # share of kernels launched by graph launches for a run to be "graphed"
COMPILED = 0.5  # share of kernel time in compiler-made kernels
RECURRENT = re.compile(r"lstm|(?<![a-z])gru|rnn", re.IGNORECASE)  # not "Congruous"
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem)_")
_HALF_AMP = re.compile(r"fp16|bf16|float16|half|mixed", re.IGNORECASE)


@dataclass(frozen=True)
class RunUses:
    graph_launches: int          # graph launch calls
    graph_kernels: int           # kernels they ran
    kernels: int                 # all kernels
    graph_call_ns: int | None    # median graph launch call
    compiler: str | None         # "torch.compile", "XLA" or None

    @property
    def graphed(self) -> bool:
        return self.kernels > 0 and self.graph_kernels >= GRAPHED * self.kernels

    def said(self, steps: int) -> str:
        """What the run already does, in one clause."""
        n = self.graph_launches / steps if steps else self.graph_launches
        parts = []
        if self.graphed:
            graphs = "XLA command buffers" if self.compiler == "XLA" else "CUDA graphs"
            parts.append(f"its kernels already run in {graphs}: {n:,.0f} graph "
                         f"launch{'es' * (round(n) != 1)}" + (" per step" if steps else "")
                         + f" ran {self.graph_kernels:,} of its {self.kernels:,} kernels"
                         + (f", each launch call {fmt_ns(self.graph_call_ns)} (median)"
                            if self.graph_call_ns else ""))
        if self.compiler:
            parts.append(f"the step is compiled ({self.compiler})")
        return "; ".join(parts)


def run_uses(ctx: Context) -> RunUses:
    """Graph launches and compilers the trace shows."""
    t = ctx.trace
    ev = t.events
    kernels = ev[(ev["kind"] == "kernel").to_numpy()]
    graph = per_distinct(kernels["launch_api"], each(is_graph_launch), fill=False).astype(bool)
    calls = ev[(ev["kind"] == "runtime").to_numpy()]
    graph_calls = calls[per_distinct(calls["name"], each(is_graph_launch), fill=False)
                        .astype(bool)]
    names = pd.Series(kernels["name"].cat.categories.astype(str))
    time = kernels.groupby(kernels["name"].astype(str), observed=True)["dur_ns"].sum()
    total = float(time.sum()) or 1.0
    xla = names[[xla_category(n) is not None or n.startswith("gemm_fusion")
                 for n in names]]
    inductor = names[names.str.match(_INDUCTOR)]
    ops = ev["name"].cat.categories.astype(str)
    compiler = None
    op_names = ev.loc[(ev["kind"] == "op").to_numpy(), "name"]
    xla_ops = per_distinct(op_names, each(
        lambda n: xla_category(n) is not None or n.endswith("fusion")), fill=False).astype(
        bool) if t.is_cpu and len(op_names) else np.zeros(0, bool)
    if len(kernels) and float(time.reindex(xla).fillna(0).sum()) >= COMPILED * total or (
            len(xla_ops) and xla_ops.mean() >= COMPILED):  # XLA:CPU runs fused thunks
        compiler = "XLA"
    elif any(o.startswith("Torch-Compiled Region") for o in ops) or len(inductor) and (
            float(time.reindex(inductor).fillna(0).sum()) > 0):
        compiler = "torch.compile"
    return RunUses(graph_launches=len(graph_calls), graph_kernels=int(graph.sum()),
                   kernels=len(kernels),
                   graph_call_ns=int(np.median(graph_calls["dur_ns"])) if len(graph_calls)
                   else None, compiler=compiler)


def holds_lstm(ctx: Context) -> bool:
    """The trace runs a recurrent network: a traceviz capture (every model is an LSTM),
    an op or kernel named so, or recurrent kernels."""
    ev = ctx.trace.events
    names = pd.Series(ev["name"].cat.categories.astype(str))
    return ctx.trace.meta.get("model") is not None or bool(
        names.str.contains(RECURRENT).any()) or bool((ev["category"] == "rnn").any())


def fp32_run(ctx: Context) -> bool:
    """A run that asked for no lower precision: its config says no --amp (nor a
    mixed-precision option), or, without a config, no matrix kernel shows a half, bf16 or
    fp8 path."""
    meta = ctx.trace.meta
    if "amp" in meta:
        return not meta.get("amp")
    opts = meta.get("options") or {}
    if any(_HALF_AMP.search(str(v)) for v in opts.values()):
        return False
    ev = ctx.trace.events
    matrix = ev.loc[ev["category"].isin(["gemm", "rnn", "attention"]).to_numpy(), "name"]
    used = matrix.astype(str).unique() if len(matrix) else []
    return not any(TENSOR_CORE_HALF.search(n) for n in used)
