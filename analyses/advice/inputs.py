"""Advice on the input pipeline (theme ``input``): steps that wait for their next batch
while the device idles. ``rules.py`` registers it; ``summary/pipeline.py`` measures it;
``whatif``'s ``overlap_input`` prices it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from traceviz.analyses.advice.actions import capture_option, remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.units import fmt_ns, fmt_pct, plural

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

# the device idle inside input calls, as a share of the span, worth a finding: one step
# in twenty lost to loading is worth a num_workers change
INPUT_IDLE_SHARE = 0.05
_SINGLE = re.compile(r"_SingleProcessDataLoaderIter")
_MULTI = re.compile(r"_MultiProcessingDataLoaderIter")


def _loader(ctx: Context) -> str:
    """``single``, ``multi`` (a PyTorch DataLoader's iterator class) or ``""``."""
    names = ctx.trace.events["name"]
    cats = names.cat.categories if hasattr(names, "cat") else names.unique()
    text = " ".join(str(c) for c in cats if "DataLoader" in str(c))
    return "single" if _SINGLE.search(text) else "multi" if _MULTI.search(text) else ""


def input_pipeline(ctx: Context) -> Finding | None:
    """The device idles inside the host's calls for its next batch >= 5% of the span."""
    p = ctx.summary.input_pipeline
    span = ctx.summary.span_ns
    if p is None or not span or p.idle_ns < INPUT_IDLE_SHARE * span:
        return None
    steps = ctx.steps
    per = f" ({fmt_ns(p.input_ns / steps)} per step)" if steps else ""
    evidence = [f"{plural(p.calls, 'input call')} hold {fmt_ns(p.input_ns)}{per}, "
                f"{fmt_pct(p.share)} of the span; the device is idle for "
                f"{fmt_ns(p.idle_ns)} of it ({fmt_pct(p.idle_share)} of the span)"]
    loader = _loader(ctx)
    if loader == "single":
        evidence.append("the DataLoader runs in the main process (num_workers=0): every "
                        "batch is loaded while the step waits")
    elif loader == "multi":
        evidence.append("the DataLoader has worker processes, and they do not keep up: "
                        "the step still waits for batches")
    workers = ((ctx.trace.meta.get("workload") or {}).get("workers")
               if isinstance(ctx.trace.meta.get("workload"), dict) else None)
    if isinstance(workers, int) and workers >= 0:  # -1: the runner used no DataLoader
        evidence.append(f"data loader workers: {workers}")
    s = ctx.summary
    if not s.cpu_trace and s.host_wait_ns:
        other = max(s.host_wait_ns - p.idle_ns, 0)
        evidence.append(f"the device waits for launches outside the input calls "
                        f"{fmt_ns(other)}: the input costs the step more than launches do"
                        if p.idle_ns >= other else
                        f"the device waits for launches outside the input calls "
                        f"{fmt_ns(other)}, longer than for its input")
    return Finding(
        "input_pipeline", "Steps wait for their input: the device idles while the next "
        "batch is loaded", evidence, _action(ctx, loader), ctx.saving("overlap_input"),
        "overlap_input",
        {"input_ns": p.input_ns, "idle_ns": p.idle_ns, "share": p.share,
         "idle_share": p.idle_share, "steps": steps, "calls": p.calls,
         "loader": loader or None})


def _action(ctx: Context, loader: str) -> str:
    workers = "more workers (num_workers)" if loader == "multi" else \
        "worker processes (num_workers=N; 0 loads in the main process)"
    if loader or ctx.run.mode == "training":
        torch = (f"load batches beside the step: give the DataLoader {workers}, "
                 "pin_memory=True, prefetch_factor=2-4 and persistent_workers=True; move "
                 "decoding and augmentation to the workers or the GPU (DALI, "
                 "torchvision.io on the device)")
    else:  # no DataLoader in the trace: the inputs are made on the step's own thread
        torch = ("prepare the next inputs beside the step: build them on another thread or "
                 "process (a DataLoader with workers is one way), in pinned memory, and copy "
                 "them with non_blocking=True (a side stream) while the device computes")
    torch += capture_option(ctx, "; in traceviz capture: --workers N")
    return remedy(
        ctx, torch=torch,
        tf="overlap input with the step: dataset.map(..., num_parallel_calls=tf.data."
           "AUTOTUNE), .prefetch(tf.data.AUTOTUNE), .cache() after the expensive "
           "stages, and interleave file reads (tf.data.Dataset.interleave)",
        jax="feed batches ahead of the step: prefetch to the device (flax.jax_utils."
            "prefetch_to_device, or a background thread calling jax.device_put), and "
            "load with workers (grain: worker_count, and a prefetch buffer)",
        mxnet="load batches beside the step: gluon.data.DataLoader(num_workers=N, "
              "pin_memory=True, prefetch=2N)")
