"""Advice on the host and its launches (theme ``host``): a step bound by the host (the GPU
waiting for launches, a CPU run's framework overhead), synchronizing calls inside steps.
``rules.py`` registers them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.advice.host_causes import (
    CauseText,
    allocation,
    os_waits,
    parts_line,
    sync_copies,
    syncs,
    untraced,
)
from traceviz.analyses.advice.run_uses import RunUses, holds_lstm, run_uses
from traceviz.analyses.summary.budget import Budget
from traceviz.table.launch_apis import is_sync_call
from traceviz.units import fmt_ns, fmt_pct, plural

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

HOST_BOUND = 0.25          # launch-bound share of the span (GPU)
FRAMEWORK_BOUND = 0.30     # framework overhead share (CPU)
# the timed calibration's host factor at or below which the timed step has no host time
# left to bound it (the profiled host wait was the profiler's own cost)
HOST_GONE_TIMED = 0.05
# the finding's words by the host's cause (budget.HOST_GROUPS), but issuing work's
CAUSE_TEXTS: dict[str, Callable[[Context, Budget], CauseText]] = {
    "untraced": untraced, "os": os_waits, "sync_copy": sync_copies, "sync": syncs,
    "alloc": allocation}


def _over(steps: int) -> str:
    """Whole-trace totals say so beside the per-step savings."""
    return f"in all {plural(steps, 'step')}" if steps else "over the whole trace"


def host_bound(ctx: Context) -> Finding | None:
    """GPU: the device waits for the host (nothing launched pending) >= 25% of the span.
    CPU: framework overhead (time outside work ops) >= 30%."""
    s = ctx.summary
    if s.cpu_trace:
        share = s.framework_overhead_fraction
        if share is None or share < FRAMEWORK_BOUND:
            return None
        return Finding(
            "host_bound", "Framework overhead dominates",
            [f"{fmt_pct(share)} of the span ({fmt_ns(s.span_ns - s.busy_ns)} of "
             f"{fmt_ns(s.span_ns)} {_over(s.steps)}) is outside the CPU ops",
             f"{s.kernel_count:,} CPU ops, median {fmt_ns(s.kernel_dur.median_ns)}"],
            remedy(ctx, "cut per-op overhead: TorchScript or torch.compile the step, fuse "
                         "small ops, or raise the batch size so each op does more",
                    "cut per-op overhead: compile the step with XLA "
                    "(tf.function(jit_compile=True)), fuse small ops, or raise the batch "
                    "size so each op does more",
                    "cut per-op overhead: jax.jit the whole step, fuse small ops, or raise "
                    "the batch size so each op does more")
            if not (compiler := run_uses(ctx).compiler) else
            f"the step is already compiled ({compiler}): what is left is the overhead per "
            "compiled op; fewer, larger ops (more of the step in one compiled function, a "
            "loop unrolled) or a larger batch so each op does more",
            ctx.saving("host_speedup=2"), "host_speedup=2", {"overhead_fraction": share})
    b = ctx.bound
    st = b.steady
    if st is None or not st.span_ns or st.host_ns < HOST_BOUND * st.span_ns:
        return None  # the steady windows' host time (start-up and input left out)
    if b.by == "device":  # the timed step shows the profiled host wait is gone
        return None
    factor = ctx.timed_host_factor
    if factor is not None and factor <= HOST_GONE_TIMED:
        return None  # without the profiler the host's time is gone: the wait was its cost
    share = st.share(st.host_ns)
    scope = {"steady steps": " of the steady steps",
             "recorded time": " outside start-up"}.get(b.scope, "")
    if b.scope == "windows less start-up" and st.startup_ns:
        scope = " outside start-up"
    evidence = [f"the device waits for the host {fmt_pct(share)} of the span{scope} "
                f"({fmt_ns(st.host_ns)} of {fmt_ns(st.span_ns)} {_over(ctx.steps)}"
                + (f"; the {fmt_ns(st.input_ns)} it waits for input calls left out"
                   if st.input_ns else "") + ")"]
    if line := parts_line(ctx, st):
        evidence.append(line)
    cause = st.cause or "launch"
    figures = {"launch_bound_fraction": share, "host_ns": st.host_ns, "cause": cause,
               "host_groups": st.groups, "input_idle_ns": st.input_ns}
    if cause != "launch":
        text = CAUSE_TEXTS[cause](ctx, st)
        saving = ctx.saving(text.scenario) if text.scenario else None
        if saving is not None and saving <= 0:
            saving = None
        return Finding("host_bound", text.title, evidence + text.evidence, text.action,
                       saving, text.scenario if saving is not None else None, figures)
    return _issuing(ctx, st, evidence, figures)


def _issuing(ctx: Context, st: Budget, evidence: list[str], figures: dict) -> Finding | None:
    """The host's cost of issuing work bounds the step: launch calls, the framework ops
    around them, the code between them; CUDA graphs, fusion or a bigger batch remove it."""
    s = ctx.summary
    per_step = s.kernel_count / s.steps if s.steps else None
    lo = s.launches.kernel
    uses = run_uses(ctx)
    if not uses.graphed and lo.count:  # the single launches left say nothing of graphs'
        evidence.append(f"median kernel {fmt_ns(s.kernel_dur.median_ns)} vs median launch "
                        f"call {fmt_ns(lo.call.median_ns)}")
    if per_step:
        evidence.append(f"{per_step:,.0f} kernels per step")
    if uses.said(ctx.steps):
        evidence.append(uses.said(ctx.steps))
    # a graphed run has no launches left to capture: what the host itself costs decides
    scenario = "host_speedup=2" if uses.graphed else "cuda_graphs"
    saving = ctx.saving(scenario)
    if st.input_ns and saving is not None:
        # what the remedy buys once the input is overlapped: the replay of both less the
        # input's own (a faster host also hides the loader behind queued work, which is
        # the input remedy's saving, not this one's)
        both, alone = ctx.saving(f"overlap_input+{scenario}"), ctx.saving("overlap_input")
        if both is not None and alone is not None:
            saving = both - alone
            scenario = f"overlap_input+{scenario} - overlap_input"
            evidence.append("the saving is what it adds once the input is overlapped")
    if saving is not None and saving <= 0:
        return None  # its own replay finds the device, not the host, setting the pace
    return Finding(
        "host_bound", "Host-bound between graph launches: the GPU waits for the host"
        if uses.graphed else "Host-bound: the GPU waits while the host issues its work",
        evidence, host_bound_action(ctx, uses), saving, scenario,
        figures | {"kernels_per_step": per_step, "graphed": uses.graphed,
                   "compiler": uses.compiler})


def host_bound_action(ctx: Context, uses: RunUses) -> str:
    """What to do about a host-bound step, leaving out what the run already does, in the
    trace's framework's words."""
    lstm = holds_lstm(ctx)
    per = f" ({uses.graph_launches / ctx.steps:,.0f} per step)" if ctx.steps else ""
    if ctx.framework == "tf":
        jax = ctx.framework_name == "jax"
        if uses.graphed:
            return ("the step already runs compiled, as XLA command buffers: what is left "
                    f"is the host between their launches{per}; launch fewer, larger ones "
                    + ("(more of the step under one jax.jit, a loop unrolled: "
                       "jax.lax.scan(..., unroll=k))" if jax else
                       "(more of the step under one tf.function(jit_compile=True), a loop "
                       "unrolled)")
                    + " or raise the batch size so each launch does more")
        ways = [] if uses.compiler == "XLA" else [
            "jit the whole step (jax.jit), which fuses pointwise ops and launches fewer "
            "kernels" if jax else
            "compile the step with XLA (tf.function(jit_compile=True)), which fuses "
            "pointwise ops and launches fewer kernels"]
        if lstm and not jax:
            ways.append("use a fused LSTM (keras.layers.LSTM on cuDNN)")
        ways.append("raise the batch size so each kernel does more")
        return ", ".join(ways[:-1]) + (", or " if len(ways) > 1 else "") + ways[-1]
    if ctx.framework_name == "none":
        return ("launch fewer, larger kernels: capture the loop's launches in a CUDA graph "
                "(cudaStreamBeginCapture ... cudaGraphLaunch), fuse small kernels, or give "
                "each kernel more work")
    if uses.graphed:
        loss = " (Python, the loss, the optimizer or input copies outside the graph)" \
            if ctx.run.mode == "training" else " (Python or input copies outside the graph)"
        into = "compile the loss and the optimizer step with the model" \
            if ctx.run.mode == "training" else "capture more of the step"
        return ("the step already runs as CUDA graphs: what is left is the host work "
                f"between graph launches{per}{loss} and the launch calls; move that work "
                f"into the graph ({into}), launch fewer, larger graphs, or raise the batch "
                "size so each graph does more")
    compiled = uses.compiler == "torch.compile"
    ways = ["capture the step in a CUDA graph (torch.cuda.graph, torch.compile "
            "mode='reduce-overhead')"]
    if not compiled:
        ways.append("fuse pointwise ops (torch.compile" + (", a fused LSTM such as cuDNN's"
                                                           if lstm else "") + ")")
    elif lstm:
        ways.append("use a fused LSTM such as cuDNN's")
    ways.append("raise the batch size so each kernel does more")
    return ", ".join(ways[:-1]) + ", or " + ways[-1]


def _sync_calls(ctx: Context) -> pd.DataFrame:
    ev = ctx.trace.events
    rt = ev[(ev["kind"] == "runtime") & (ev["step"] >= 0)]
    return rt[per_distinct(rt["name"], each(is_sync_call)).astype(bool)]


def syncs_in_steps(ctx: Context) -> Finding | None:
    """More than one synchronizing call per step (one at the step's end is how a
    benchmark times a step; more stall the host mid-step)."""
    if not ctx.steps or ctx.trace.is_cpu:
        return None
    calls = _sync_calls(ctx)
    if calls.empty:
        return None
    per_step = calls.groupby("step").size()
    extra = int((per_step - 1).clip(lower=0).sum())
    if extra < ctx.steps:  # fewer than one extra per step
        return None
    blocked = int(calls["dur_ns"].sum())
    names = ", ".join(f"{n} x{k}" for n, k in calls["name"].astype(str).value_counts()
                      .head(3).items())
    return Finding(
        "syncs_in_steps", "The host synchronizes with the GPU inside steps",
        [f"{plural(len(calls), 'synchronizing call')} in {plural(ctx.steps, 'step')} "
         f"({len(calls) / ctx.steps:.1f} per step): {names}",
         f"the host spent {fmt_ns(blocked)} in them"],
        remedy(ctx, torch="move .item(), .cpu(), printing of tensors and explicit "
                          "synchronize calls out of the step (log every N steps), and copy "
                          "with non_blocking=True",
               tf="keep the step's tensors on the device: no .numpy(), float(tensor) or "
                  "printing of tensors inside the step (log every N steps, e.g. "
                  "Keras' steps_per_execution), and run the step as one tf.function",
               jax="let JAX's asynchronous dispatch run ahead: no block_until_ready(), "
                   "float()/np.asarray() of device arrays or printing them inside the step "
                   "(log every N steps)",
               mxnet="move .asnumpy(), .asscalar(), wait_to_read() and waitall() out of "
                     "the step (log every N steps)"),
        None, None, {"per_step": len(calls) / ctx.steps, "blocked_ns": blocked})
