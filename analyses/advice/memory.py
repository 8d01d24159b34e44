"""Advice on memory and copies (theme ``memory``): copies from or to pageable host memory,
device memory left unused by the batch. ``rules.py`` registers them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from traceviz.algos.categorical import each, per_distinct
from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.units import fmt_bytes, fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

PAGEABLE = re.compile(r"pageable", re.IGNORECASE)
PAGEABLE_SHARE = 0.01      # pageable copy time / span, for a finding worth acting on
HEADROOM = 2.0           # device memory / peak allocated, for the headroom finding


def pageable_memcpy(ctx: Context) -> Finding | None:
    """Copies from or to pageable host memory: synchronous, and slower than pinned."""
    ev = ctx.trace.events
    m = ev[ev["kind"] == "memcpy"]
    if m.empty:
        return None
    pageable = per_distinct(m["name"], each(lambda x: bool(PAGEABLE.search(x)))).astype(bool)
    p = m[pageable]
    if p.empty:
        return None
    # worth acting on: the copies, or the host calls they block (a pageable copy is
    # synchronous), take a share of the span; 2 copies of 16 bytes are not
    host_ns = int(p["launch_dur_ns"].fillna(0).sum())
    if max(int(p["dur_ns"].sum()), host_ns) < PAGEABLE_SHARE * max(ctx.summary.span_ns, 1):
        return None
    known = p["bytes"] >= 0
    size = f", {int(p.loc[known, 'bytes'].sum()):,} bytes" if known.any() else ""
    return Finding(
        "pageable_memcpy", "Copies use pageable host memory",
        [f"{len(p):,} of {len(m):,} copies are pageable ({fmt_ns(int(p['dur_ns'].sum()))} "
         f"of copy time{size}; their calls held the host {fmt_ns(host_ns)})",
         ", ".join(f"{n} x{k}" for n, k in p["name"].astype(str).value_counts().head(2)
                   .items())],
        remedy(ctx, torch="pin host buffers (DataLoader(pin_memory=True), "
                          "tensor.pin_memory()) and copy with non_blocking=True",
               tf="let tf.data stage batches on the device (dataset.prefetch(tf.data."
                  "AUTOTUNE) last, or tf.data.experimental.prefetch_to_device) so copies "
                  "start from the runtime's pinned staging buffers",
               jax="put batches on the device ahead of the step from a prefetch thread "
                   "(jax.device_put; flax.jax_utils.prefetch_to_device) so the copies overlap "
                   "the step",
               mxnet="load into pinned memory (gluon.data.DataLoader(pin_memory=True), "
                     "mx.cpu_pinned()) and copy with as_in_context",
               none="allocate the host buffers pinned (cudaHostAlloc / cudaMallocHost, or "
                    "cudaHostRegister on existing ones) and copy with cudaMemcpyAsync on a "
                    "stream, so the copies neither stage through a bounce buffer nor block "
                    "the host"),
        None, None, {"count": len(p), "ns": int(p["dur_ns"].sum())})


def memory_headroom(ctx: Context) -> Finding | None:
    """The timed batches' peak allocated memory is under half of the device's memory:
    the batch could grow (about device memory / peak, if memory grows with the batch)."""
    from traceviz.analyses.summary.footprint import bench_memory

    # the device's memory, not an allocator's pool (XLA's is 75% of it)
    mem = bench_memory(ctx.trace.meta) or {}
    peak, total = mem.get("peak_allocated_bytes"), mem.get("total_bytes")
    if not peak or not total or total / peak < HEADROOM:
        return None
    times = int(total // peak)
    return Finding(
        "memory_headroom", f"The run uses 1/{times} of the device's memory",
        [f"peak allocated {fmt_bytes(peak)} of {fmt_bytes(total)} "
         f"({fmt_pct(peak / total)}) during the timed batches",
         *([f"the allocator's pool is {fmt_bytes(mem['pool_bytes'])} of it (XLA's limit: "
            "XLA_PYTHON_CLIENT_MEM_FRACTION sets its share of the device)"]
           if mem.get("pool_bytes") else [])],
        f"the batch could grow up to about {times}x (less: weights and workspaces do not "
        "grow with it); a larger batch raises every matrix op's FLOP per byte",
        None, None, {"peak_allocated_bytes": peak, "total_bytes": total, "times": times})
