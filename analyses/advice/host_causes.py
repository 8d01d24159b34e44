"""What a host-bound step's host is doing, in words: the titles, evidence and remedies of
``host_bound`` by its cause (``budget.HOST_GROUPS``: issuing work, untraced host work,
the OS, synchronous copies, synchronizations, allocation), each in the trace's
framework's words (``actions.remedy``), and the scenario that prices each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.summary.budget import Budget, largest_parts
from traceviz.units import fmt_ns

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

# the fine causes of summary/waits.py, as a reader says them
LABELS = {"startup": "start-up", "input": "input calls", "launch": "launch calls",
          "ops": "framework ops", "untraced": "untraced stretches",
          "sync_copy": "synchronous copies", "sync": "synchronizing calls",
          "alloc": "allocation", "setup": "set-up and attribute queries",
          "create": "stream and event creation", "other_api": "other runtime calls",
          "sleep": "sleeping", "io": "I/O", "lock": "locks", "other_os": "other OS calls",
          "offcpu": "off the CPU (scheduled out)"}


def gaps_label(ctx: Context) -> str:
    """Untraced time under 1 ms between recorded calls: Python in a PyTorch trace, the
    executor in a TensorFlow or JAX one, the program's own code without a framework."""
    name = ctx.framework_name
    if name == "torch":
        return "Python between ops (untraced, under 1 ms each)"
    if name in ("tf", "jax"):
        return "the executor between recorded events (under 1 ms each)"
    return "untraced code between calls (under 1 ms each)"


def label(ctx: Context, cause: str) -> str:
    return gaps_label(ctx) if cause == "gaps" else LABELS.get(cause, cause)


def top_names(ctx: Context, cause: str, key: str = "name", n: int = 3) -> str:
    """The names that held a fine cause most (calls, ops) or the user ranges it ran in."""
    w = ctx.summary.host_wait_split
    if w is None:
        return ""
    frame = w.names if key == "name" else w.ranges
    rows = frame[frame["cause"] == cause].head(n)
    return ", ".join(f"{r[key]} {fmt_ns(int(r['ns']))}" for _, r in rows.iterrows())


def parts_line(ctx: Context, b: Budget) -> str:
    """The host time's largest causes, each with what took it most."""
    parts = []
    for cause, ns in largest_parts(b, 4):
        names = top_names(ctx, cause, n=2)
        parts.append(f"{label(ctx, cause)} {fmt_ns(ns)}" + (f" ({names})" if names else ""))
    return "the host was " + "; ".join(parts) if parts else ""


@dataclass(frozen=True)
class CauseText:
    title: str
    evidence: list[str]
    action: str
    scenario: str | None   # what prices the action (None: no replay models it)


def untraced(ctx: Context, b: Budget) -> CauseText:
    ranges = top_names(ctx, "untraced", "range")
    sampled = top_names(ctx, "untraced", n=4)
    evidence = [f"{fmt_ns(b.causes.get('untraced', 0))} of the wait is in stretches of 1 ms "
                "or more with nothing recorded on the launching thread"
                + (f", inside {ranges}" if ranges else "")]
    if sampled:  # the profiler sampled the CPU: the functions are known
        evidence.append(f"the CPU samples there caught: {sampled}")
        return CauseText(
            "Host-bound: the host runs code of its own between launches", evidence,
            remedy(ctx,
                   torch="move that work off the step's thread (a DataLoader worker, a "
                         "background thread, before the loop) or make it cheaper",
                   tf="move that work into the tf.data pipeline or the graph, or before "
                      "the loop",
                   jax="move that work off the step's thread or into the jitted function, "
                       "or before the loop",
                   none="move that work off the thread that launches the kernels (another "
                        "thread, before the timed loop) or make it cheaper"),
            "drop_host_stalls")
    return CauseText(
        "Host-bound: the host runs work the profiler did not record", evidence,
        remedy(ctx,
               torch="find what it is with a sampling profiler (py-spy record --native; "
                     "torch.profiler with with_stack=True; nsys profile --sample=cpu), then "
                     "move it off the step's thread (a DataLoader worker, a background "
                     "thread) or make it cheaper",
               tf="find what it is with a sampling profiler (py-spy record --native; the "
                  "profiler's Python tracer: tf.profiler.experimental.ProfilerOptions("
                  "python_tracer_level=1); nsys profile --sample=cpu), then move it into "
                  "the tf.data pipeline or the graph",
               jax="find what it is with a sampling profiler (py-spy record --native; "
                   "jax.profiler's Python tracer; nsys profile --sample=cpu), then move it "
                   "off the step's thread or into the jitted function",
               none="find what it is with a sampling profiler (nsys profile --sample=cpu "
                    "--backtrace=dwarf, or perf record -g), then move it off the thread "
                    "that launches the kernels or make it cheaper"),
        "drop_host_stalls")


def os_waits(ctx: Context, b: Budget) -> CauseText:
    kinds = [(c, b.causes.get(c, 0)) for c in ("sleep", "io", "lock", "other_os", "offcpu")]
    kinds = [(c, ns) for c, ns in kinds if ns]
    top = max(kinds, key=lambda x: x[1])[0] if kinds else "offcpu"
    ranges = ", ".join(filter(None, (top_names(ctx, c, "range") for c, _ in kinds[:2])))
    what = {"sleep": "sleeps", "io": "waits for I/O", "lock": "waits on locks",
            "other_os": "waits in OS calls",
            "offcpu": "is off the CPU (sleeping or blocked)"}[top]
    return CauseText(
        f"Host-bound: the launching thread {what} while the device idles",
        [", ".join(f"{label(ctx, c)} {fmt_ns(ns)}" for c, ns in kinds)
         + (f", inside {ranges}" if ranges else "")],
        remedy(ctx,
               torch="take the wait off the step's thread: no time.sleep or blocking I/O in "
                     "the loop; load or prefetch weights and data on another thread or "
                     "process (DataLoader workers, a prefetch thread) and hand them over "
                     "ready; nsys profile --trace=osrt --sample=cpu names the call",
               tf="take the wait off the step's thread: no blocking I/O or sleeps in the "
                  "loop; read and prefetch with tf.data (interleave, prefetch) so the step "
                  "gets its data ready",
               jax="take the wait off the step's thread: no blocking I/O or sleeps in the "
                   "loop; prefetch on a background thread and hand over device arrays",
               none="take the wait off the thread that launches the kernels: no sleeps or "
                    "blocking I/O between launches; read and stage data on another thread, "
                    "with asynchronous copies"),
        "drop_host_stalls")


def sync_copies(ctx: Context, b: Budget) -> CauseText:
    names = top_names(ctx, "sync_copy")
    return CauseText(
        "Host-bound: synchronous copies hold the host while the device idles",
        [f"{fmt_ns(b.causes.get('sync_copy', 0))} of the wait is inside synchronous copy "
         f"calls ({names}): each returns only when its data has moved"],
        remedy(ctx,
               torch="copy from pinned memory without blocking (tensor.pin_memory(), "
                     "DataLoader(pin_memory=True), .to(device, non_blocking=True)); move "
                     "weights to the device once, before the loop",
               tf="let tf.data stage batches on the device (tf.data.experimental."
                  "prefetch_to_device / copy_to_device) and keep weights on the device",
               jax="put arrays on the device once (jax.device_put) ahead of the step, and "
                   "keep them there",
               none="use pinned host buffers (cudaHostAlloc / cudaMallocHost, or "
                    "cudaHostRegister) and cudaMemcpyAsync on a stream beside the "
                    "kernels; copy large blocks, not many small ones"),
        None)


def syncs(ctx: Context, b: Budget) -> CauseText:
    return CauseText(
        "Host-bound: the host waits in synchronizing calls while the device idles",
        [f"{fmt_ns(b.causes.get('sync', 0))} of the wait is inside synchronizing calls "
         f"({top_names(ctx, 'sync')})"],
        remedy(ctx,
               torch="move .item(), .cpu(), printing of tensors and torch.cuda.synchronize() "
                     "out of the step (log every N steps)",
               tf="keep the step's tensors on the device: no .numpy() or float(tensor) in "
                  "the step",
               jax="let asynchronous dispatch run ahead: no block_until_ready() or "
                   "float()/np.asarray() of device arrays in the step",
               none="synchronize once per iteration (or not at all): replace "
                    "cudaDeviceSynchronize/cudaStreamSynchronize between kernels by events "
                    "and stream order"),
        None)


def allocation(ctx: Context, b: Budget) -> CauseText:
    names = ", ".join(filter(None, (top_names(ctx, "alloc"), top_names(ctx, "create"))))
    return CauseText(
        "Host-bound: allocation and stream or event creation hold the host",
        [f"{fmt_ns(b.causes.get('alloc', 0) + b.causes.get('create', 0))} of the wait is "
         f"inside allocation and creation calls ({names})"],
        remedy(ctx,
               torch="reuse memory: PyTorch's caching allocator does unless the loop calls "
                     "torch.cuda.empty_cache() or shapes change every step; pin host "
                     "buffers once; create streams and events once, outside the loop",
               tf="keep shapes fixed so that the allocator reuses its blocks, and create "
                  "datasets and variables once",
               jax="keep shapes fixed so that buffers are reused (donate_argnums for "
                   "in-place updates)",
               none="allocate once and reuse: cudaMalloc/cudaHostAlloc and stream/event "
                    "creation outside the loop (or cudaMallocAsync with a memory pool)"),
        None)
