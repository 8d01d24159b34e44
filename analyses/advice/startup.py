"""Advice on start-up (theme ``startup``): a trace that records a program starting (its
context made, its kernels' modules loaded, its algorithms autotuned, its first batch read)
reads as a host slow to launch unless start-up is told apart; ``summary/startup_calls.py`` finds
it, ``summary/waits.py`` measures it per window, ``bound.py`` leaves it out of the steady
verdict. The finding says what start-up held, and how to profile the steps instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.summary.budget import budget, cold_windows
from traceviz.units import fmt_ns, fmt_pct, plural

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

# start-up worth a finding beside another verdict: a tenth of what was recorded
STARTUP_FINDING = 0.10
PART_WORDS = {"context": "context creation", "module_loading": "module loading on first "
              "use", "allocation": "first-call allocation", "autotuning": "autotuning",
              "compilation": "compilation"}
VERDICT_WORDS = {"host": "host-bound", "device": "device-bound", "input": "input-bound",
                 "communication": "communication-bound"}


def startup(ctx: Context) -> Finding | None:
    """Start-up is the verdict, or takes 10% (``STARTUP_FINDING``) of the recorded time, or
    leaves cold step windows out of the verdict."""
    s = ctx.summary
    w = s.host_wait_split if not s.cpu_trace else None
    if w is None or not w.startup.found:
        return None
    b = ctx.bound
    whole = budget(w, None)
    cold = cold_windows(w, bool(s.steps))
    start_up = whole.startup_ns + w.before_ns
    recorded = whole.span_ns + whole.startup_ns + w.before_span_ns
    share = start_up / recorded if recorded else 0.0
    if b.by != "startup" and share < STARTUP_FINDING and not cold.any():
        return None
    evidence = [f"start-up takes {fmt_ns(start_up)} of the {fmt_ns(recorded)} recorded "
                f"({fmt_pct(share)})" + (f"; {fmt_ns(w.before_ns)} of it before the first "
                                         "window" if w.before_ns else "")]
    for r in w.startup.parts.itertuples(index=False):
        evidence.append(f"{PART_WORDS.get(r.part, r.part)}: {fmt_ns(int(r.ns))} in "
                        f"{plural(int(r.count), 'call' if r.part != 'autotuning' else 'mark')}"
                        f" ({', '.join(r.names)})" + _launch_median(ctx, r.part))
    if cold.any():
        steps = sorted({int(x) for x in w.steps.loc[cold, "step"]})
        kept = budget(w, None, ~cold)
        evidence.append(
            f"{plural(len(steps), 'step window')} ({_steps(steps)}) "
            f"{'is' if len(steps) == 1 else 'are'} cold (start-up is over "
            f"{fmt_pct(0.1)} of {'it' if len(steps) == 1 else 'each'})"
            + (f"; the verdict is taken on the {plural(len(kept.steps), 'steady step')}"
               f" ({_steps(kept.steps)})" if kept.windows else
               "; no steady step is recorded"))
        cold_b = budget(w, None, cold)
        if cold_b.input_ns >= 0.1 * (cold_b.span_ns + cold_b.startup_ns):
            evidence.append(f"the cold window also waits {fmt_ns(cold_b.input_ns)} for its "
                            "first batch (an input pipeline starting up)")
    rest = b.figures.get("rest") if b.by == "startup" else None
    if rest and rest != "startup":
        cause = b.figures.get("rest_cause")
        evidence.append(f"outside start-up the windows read as {VERDICT_WORDS.get(rest, rest)}"
                        + (f" ({cause})" if cause else ""))
    title = ("The trace records start-up, not steady steps" if b.by == "startup" else
             f"Start-up takes {fmt_pct(share)} of the recorded time, shown apart")
    return Finding("startup", title, evidence, _action(ctx), None, None,
                   {"startup_ns": start_up, "recorded_ns": recorded, "share": share,
                    "cold_windows": int(cold.sum()),
                    "parts": {r.part: int(r.ns) for r in
                              w.startup.parts.itertuples(index=False)}})


def _steps(steps: list[int]) -> str:
    if len(steps) > 4:
        return f"{steps[0]}-{steps[-1]}"
    return ", ".join(map(str, steps))


def _launch_median(ctx: Context, part: str) -> str:
    """For module loading: the launch calls' median, the time such a call usually takes."""
    if part != "module_loading":
        return ""
    lo = ctx.summary.launches.kernel
    return f"; the median launch call takes {fmt_ns(lo.call.median_ns)}" \
        if lo.count and lo.call.median_ns else ""


def _action(ctx: Context) -> str:
    return remedy(
        ctx,
        torch="profile the steady steps, after start-up: torch.profiler.profile(schedule="
              "torch.profiler.schedule(wait=1, warmup=2, active=3)) with prof.step() each "
              "iteration (or start the profiler after a few iterations; under Nsight "
              "Systems, --capture-range=cudaProfilerApi with torch.cuda.profiler.start() "
              "after them); start-up itself is paid once per process (cudnn.benchmark "
              "autotunes each new input shape once: keep shapes fixed)",
        tf="profile the steady steps, after start-up: the TensorBoard callback's "
           "profile_batch='10,15' (or tf.profiler.experimental.start() after a few steps); "
           "start-up is paid once per process (cuDNN autotuning runs once per input shape: "
           "keep shapes fixed; TF_CUDNN_USE_AUTOTUNE=0 skips it at some speed)",
        jax="profile the steady steps: call the jitted step once (and block_until_ready) "
            "before jax.profiler.start_trace()/jax.profiler.trace(), so that compilation "
            "and autotuning fall outside the profile; keep shapes fixed so that nothing "
            "recompiles",
        mxnet="profile the steady steps: start mx.profiler after a few iterations "
              "(profiler.set_state('run') after warm-up)",
        none="record the steady part: nsys profile --capture-range=cudaProfilerApi with "
             "cudaProfilerStart()/cudaProfilerStop() around the loop (or --delay=SECONDS); "
             "start-up is paid once per process (context creation; CUDA_MODULE_LOADING=LAZY "
             "loads each kernel's module at its first launch)")
