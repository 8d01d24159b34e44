"""The runner side of the capture protocol: JSON lines on stdout, one-line errors, and
the one capture skeleton every framework's runner fills in (``capture``: the config read,
the framework's set-up, the phases, bench.json and meta.json).

Imports nothing but the standard library, so the MXNet runner, which runs in an
interpreter without traceviz's dependencies, loads it by path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

# the figures' and the workload's definitions; the MXNet runner loads this file by path,
# beside them
try:
    from traceviz.runners.benchdefs import (
        MIN_TIMED,
        Workload,
        first_call_seconds,
        profiler_overhead,
        settled,
        spread,
        workload_flops,
    )
except ImportError:  # pragma: no cover - the MXNet runner's interpreter has no traceviz
    from benchdefs import (  # type: ignore[no-redef]
        MIN_TIMED,
        Workload,
        first_call_seconds,
        profiler_overhead,
        settled,
        spread,
        workload_flops,
    )


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class RunnerError(Exception):
    """A failure worth one line to the user (bad device, unsupported dtype...)."""


def serve(run: Callable[[dict, Path], dict], prog: str, description: str,
          argv: list[str] | None = None) -> int:
    """Parse ``--config``/``--out``, call ``run(cfg, out)``, report ``done`` or ``error``."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    try:  # the MXNet runner's interpreter has no traceviz: the parent's PDEATHSIG serves
        from traceviz.runners import watch_parent
    except ImportError:  # pragma: no cover
        watch_parent = None  # type: ignore[assignment]
    if watch_parent is not None:
        watch_parent()
    cfg = json.loads(args.config.read_text())
    try:
        result = run(cfg, args.out)
    except RunnerError as e:
        emit("error", message=str(e))
        return 1
    except Exception as e:  # a crash in the framework: one line up, the detail in the log
        traceback.print_exc(file=sys.stderr)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        emit("error", message=f"{type(e).__name__}: {first}"[:500])
        return 1
    emit("done", **result)
    return 0


def rss_peak_bytes() -> int:
    """The process's peak resident set so far (Linux reports KiB, macOS bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) * (1 if sys.platform == "darwin" else 1024)


def rss_probe() -> tuple[Callable[[], None], Callable[[], dict]]:
    """(reset, read) for a CPU run: the growth of the process's peak resident set over
    the timed batches (the peak cannot be reset: what the warm-up reached is the floor)."""
    start = [0]

    def reset() -> None:
        start[0] = rss_peak_bytes()

    def read() -> dict:
        peak = rss_peak_bytes()
        return {"device": "cpu", "peak_rss_bytes": peak,
                "peak_rss_growth_bytes": peak - start[0]}

    return reset, read


def bench_figures(run: Phases, batch: int, workload: dict | None = None,
                  losses: list[float] | None = None, rank: int | None = None) -> dict:
    """bench.json: timed batches without the profiler, and the profiled ones beside them,
    the workload's FLOPs per batch (and the model TFLOP/s they give at the median batch),
    the timed phase's peak memory, utilization and energy (per batch and per sequence),
    the first batches' time above the median, and each timed batch's loss (``losses``;
    ``loss_first_batch``: the batch number of the first, counted from 0 over warm-up and
    timed batches, so runs with other warm-up counts line up).

    The profiler's overhead is ``benchdefs.profiler_overhead``'s: the steady profiled
    step (the profiler's start-up step left out) over the timed median, significant only
    outside the range of the unprofiled batches; ``profiled_batch_times_s`` keeps every
    profiled batch, the start-up one first.
    """
    times, prof = run.times, run.prof_times
    s = spread(times)
    extra: dict = {"memory": run.memory} if run.memory else {}
    if run.usage:
        u = dict(run.usage)
        joules = u.get("energy_j")
        u["energy_per_batch_j"] = joules / len(times) if joules is not None else None
        u["energy_per_sequence_j"] = joules / (len(times) * batch) if joules is not None \
            else None
        extra["utilization"] = u
    if losses is not None:
        extra.update({"loss_per_batch": losses, "loss_first_batch": len(run.warmup_times)})
    if workload is not None:
        flops = workload_flops(workload, rank)
        extra.update({"workload_flops": flops["total"],
                      "workload_flops_parts": flops["parts"],
                      "model_tflops": flops["total"] / s["median"] / 1e12})
    return {
        "time_per_batch_s": s,
        "batches": len(times),
        "batch_times_s": times,
        "elapsed_s": run.elapsed,
        "sequences_per_s": batch / s["median"],
        "noisy": s["noisy"],
        "profiled_batch_times_s": prof,
        **profiler_overhead(prof, times),
        "warmup_batches": len(run.warmup_times),
        "warmup_settled": run.warmup_settled,
        "warmup_times_s": run.warmup_times,
        "profiled_batches": len(prof),
        "first_call_s": first_call_seconds(run.warmup_times, s["median"]),
    } | extra


def step_bench(times: dict[str, list[float]], source: str | None) -> dict:
    """bench.json of code that marks its own steps (``runners/marks.py``): the unprofiled
    steps after the profiled ones are the timed batches; where the code ended before
    any, the profiled steps stand in (``timed_from`` says which). Wall time between
    marks: on a GPU, steps the code does not synchronise are timed as queued."""
    timed, timed_from = times["timed"], "unprofiled steps after the profiled ones"
    if not timed:
        timed, timed_from = times["profiled"], "the profiled steps (none ran after them)"
    if source is None:
        timed_from = "none: the code marked no step"
    bench: dict = {"steps_from": source or "fixed time slices", "timed_from": timed_from,
                   "warmup_batches": len(times["warmup"]), "warmup_times_s": times["warmup"],
                   "profiled_batches": len(times["profiled"])}
    if not timed:
        return bench
    s = spread(timed)
    prof = times["profiled"]
    return bench | {
        "time_per_batch_s": s, "batches": len(timed), "batch_times_s": timed,
        "elapsed_s": sum(timed), "noisy": s["noisy"] or len(timed) < MIN_TIMED,
        "profiled_batch_times_s": prof,
        # the profiled steps that stand in for timed ones have no overhead to show
        **(profiler_overhead(prof, timed) if times["timed"] else {}),
    }


def run_result(out: Path, bench: dict, meta: dict, trace: str | Path | None) -> dict:
    """Write bench.json and meta.json into the run folder; the ``done`` fields."""
    (out / "bench.json").write_text(json.dumps(bench, indent=2))
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return {"bench": bench, "meta": meta, "trace": str(trace) if trace else None}


def timed_steps(step: Callable[[], object], n: int, label: str,
                outputs: list | None = None) -> list[float]:
    """Run ``step`` n times; wall time of each (``step`` returns once its work is done).
    What each call returns goes into ``outputs`` (a loss, read after the phase: reading
    a device value inside the timed step would wait for the device)."""
    times = []
    for i in range(n):
        t = time.perf_counter()
        out = step()
        times.append(time.perf_counter() - t)
        if outputs is not None:
            outputs.append(out)
        emit("progress", phase=label, done=i + 1, total=n)
    return times


class Phases(NamedTuple):
    times: list[float]          # timed batches, profiler off
    elapsed: float              # wall time of the timed batches
    prof_times: list[float]     # the profiled (marked) steps
    warmup_times: list[float]
    warmup_settled: bool
    memory: dict | None = None  # the timed phase's peak memory (the runner's probe)
    outputs: list | None = None  # what each timed step returned (its loss)
    usage: dict | None = None   # utilization and energy over the timed phase


def warm_up(step: Callable[[], object], least: int, most: int) -> tuple[list[float], bool]:
    """At least ``least`` batches, then more until the last ones agree (``settled``), at
    most ``most`` in all. Returns the warm-up times and whether they settled."""
    emit("phase", phase="warmup", total=least)
    times: list[float] = []
    while len(times) < least or (not settled(times) and len(times) < most):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
        # an extra settling batch counts on (4/4, 5/5...), not again from 1
        emit("progress", phase="warmup", done=len(times), total=max(least, len(times)))
    return times, settled(times) or most <= least


def run_phases(step: Callable[[], object], cfg: dict, start: Callable[[], None],
               stop: Callable[[], None],
               around_step: Callable[[int], contextlib.AbstractContextManager],
               min_warmup: int = 0, after_step: Callable[[], None] = lambda: None,
               profile_unmarked: bool = False,
               memory: tuple[Callable[[], None], Callable[[], dict]] | None = None,
               usage: tuple[Callable[[], None], Callable[[], dict]] | None = None) -> Phases:
    """The phases every runner shares: warm-up (until settled, see ``warm_up``), timed
    batches without the profiler, then one unmarked and one warm-up step and the active
    steps (numbered from 2, as torch.profiler numbers them), each active one inside
    ``around_step(i)``. The profiler runs from ``start()`` (before the active steps, or
    with ``profile_unmarked`` before the unmarked ones, for a profiler with its own
    schedule) to ``stop()``; ``after_step()`` follows every step of that phase.
    ``min_warmup``: steps the first call needs whatever --warmup says (tracing, jit).
    ``memory``: (reset, read) of the runner's peak-memory probe, ``usage``: (start, stop)
    of its utilization probe, both around the timed batches."""
    least = max(cfg["warmup"], min_warmup)
    warm, ok = warm_up(step, least, max(least, max_warmup(cfg)))
    emit("phase", phase="timed", total=cfg["steps"])
    if memory:
        memory[0]()
    if usage:
        usage[0]()
    outputs: list = []
    t0 = time.perf_counter()
    times = timed_steps(step, cfg["steps"], "timed", outputs)
    elapsed = time.perf_counter() - t0
    used = usage[1]() if usage else None
    peak = memory[1]() if memory else None
    active = cfg["profile_steps"]
    emit("phase", phase="profiled", total=active + 2)
    prof_times: list[float] = []
    started = False
    try:
        for i in range(active + 2):
            if i == (0 if profile_unmarked else 2):
                start()
                started = True
            marked = i >= 2
            t = time.perf_counter()
            with around_step(i) if marked else contextlib.nullcontext():
                step()
            if marked:
                prof_times.append(time.perf_counter() - t)
            after_step()
            emit("progress", phase="profiled", done=i + 1, total=active + 2)
    finally:
        if started:
            stop()
    return Phases(times, elapsed, prof_times, warm, ok, peak, outputs, used)


def max_warmup(cfg: dict) -> int:
    """The warm-up bound: ``max_warmup`` of the config (older configs: --warmup + 10)."""
    return int(cfg.get("max_warmup", cfg["warmup"] + 10))


# -- the capture skeleton: what every framework's runner does, in one place ----------------

Probe = tuple[Callable[[], None], Callable[[], dict]]  # (reset or start, read or stop)


@dataclass(frozen=True)
class RunConfig:
    """A runner's config.json, read: what the parent asked for (``CaptureRequest.config``)."""

    model: str
    workload: Workload
    device: str            # "cpu" or "cuda"
    seed: int
    amp: str | None        # "fp16", "bf16" or None
    out: Path              # the run folder
    cfg: dict[str, Any]    # the whole config: options, profiler, exec, graph_replay...

    @classmethod
    def read(cls, cfg: dict[str, Any], out: Path) -> RunConfig:
        return cls(cfg["model"], Workload.from_dict(cfg["workload"]), cfg["device"],
                   cfg["seed"], cfg.get("amp"), out, cfg)

    @property
    def train(self) -> bool:
        return self.workload.train


def _as_timed(phases: Phases) -> tuple[Phases, dict]:
    return phases, {}


@dataclass
class Capture:
    """A framework's run, set up: what ``capture`` runs and records. The step runs one
    batch and returns once its work is done (its return value: the batch's loss, read
    with ``loss`` after the timed phase); the profiler runs from ``start`` to ``stop``
    around the profiled steps, each active one inside ``around_step(i)``."""

    framework: str                        # meta.json's "framework"
    version: str                          # its "framework_version"
    device_name: str
    profiler: str                         # meta.json's "profiler"
    step: Callable[[], object]
    start: Callable[[], None]
    stop: Callable[[], None]
    around_step: Callable[[int], contextlib.AbstractContextManager]
    trace: Callable[[], Path | None]      # the raw trace, asked once the profiler stopped
    meta: dict[str, Any] = field(default_factory=dict)  # meta.json's framework-specific keys
    after_step: Callable[[], None] = lambda: None       # after every profiled-phase step
    profile_unmarked: bool = False        # the profiler has its own schedule (run_phases)
    min_warmup: int = 0                   # steps the first call needs (tracing, compiling)
    memory: Probe | None = None           # the timed phase's peak memory (reset, read)
    usage: Probe | None = None            # utilization and energy (start, stop)
    within: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    loss: Callable[[Any], float] = float  # a step's return value as a number
    rank: int | None = None               # the factorized LSTM's rank (its FLOPs)
    bench: Callable[[], dict] = dict      # bench.json's framework figures (compile time)
    retime: Callable[[Phases], tuple[Phases, dict]] = _as_timed  # other clocks' times


def capture(setup: Callable[[RunConfig], Capture], cfg: dict[str, Any], out: Path) -> dict:
    """The runner skeleton: the config read (``RunConfig``), the framework's ``setup``,
    the warm-up, timed and profiled phases (``run_phases``) inside ``within()``, then
    bench.json (``bench_figures``, ``bench()``, ``retime``'s figures) and meta.json
    (framework, version, Python, device, profiler, then ``meta``); the ``done`` fields."""
    run = RunConfig.read(cfg, out)
    c = setup(run)
    with c.within():
        phases = run_phases(c.step, cfg, c.start, c.stop, c.around_step,
                            min_warmup=c.min_warmup, after_step=c.after_step,
                            profile_unmarked=c.profile_unmarked, memory=c.memory,
                            usage=c.usage)
    trace = c.trace()
    phases, timing = c.retime(phases)
    w = run.workload
    bench = bench_figures(phases, w.batch, w.to_dict(),
                          losses=[c.loss(v) for v in phases.outputs or []], rank=c.rank)
    bench.update(c.bench())
    bench.update(timing)
    meta = {"framework": c.framework, "framework_version": c.version,
            "python": platform.python_version(), "device_name": c.device_name,
            "profiler": c.profiler, **c.meta}
    return run_result(out, bench, meta, trace)


def serve_capture(setup: Callable[[RunConfig], Capture], prog: str, description: str,
                  argv: list[str] | None = None) -> int:
    """A runner's ``main``: ``serve`` with the skeleton around ``setup``."""
    return serve(lambda cfg, out: capture(setup, cfg, out), prog, description, argv)


def profile_dir(path: Path) -> Path:
    """The profiler's log directory, emptied (a reused, --force, run folder's old one)."""
    shutil.rmtree(path, ignore_errors=True)
    return path


def xplane_file(logdir: Path, profiler: str) -> Path:
    """The newest ``.xplane.pb`` the TensorFlow or JAX profiler wrote under ``logdir``."""
    files = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
    if not files:
        raise RunnerError(f"{profiler} wrote no .xplane.pb under {logdir}")
    return files[-1]


def cpu_name() -> str:
    """meta.json's ``device_name`` of a CPU run."""
    return platform.processor() or platform.machine()
