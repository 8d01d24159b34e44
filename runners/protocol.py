"""The runner side of the capture protocol: JSON lines on stdout, one-line errors.

Imports nothing but the standard library, so the MXNet runner, which runs in an
interpreter without traceviz's dependencies, loads it by path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path


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


def bench_figures(times: list[float], prof_times: list[float], batch: int, elapsed: float,
                  warmup: int, profiled: int) -> dict:
    """bench.json: timed batches without the profiler, and the profiled ones beside them."""
    median = statistics.median(times)
    return {
        "time_per_batch_s": {"median": median, "min": min(times), "max": max(times),
                             "mean": statistics.fmean(times)},
        "batches": len(times),
        "batch_times_s": times,
        "elapsed_s": elapsed,
        "sequences_per_s": batch / median,
        "profiled_time_per_batch_s": statistics.median(prof_times),
        "profiler_overhead": statistics.median(prof_times) / median,
        "warmup_batches": warmup,
        "profiled_batches": profiled,
    }


def run_result(out: Path, bench: dict, meta: dict, trace: str | Path | None) -> dict:
    """Write bench.json and meta.json into the run folder; the ``done`` fields."""
    (out / "bench.json").write_text(json.dumps(bench, indent=2))
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return {"bench": bench, "meta": meta, "trace": str(trace) if trace else None}


def timed_steps(step: Callable[[], None], n: int, label: str) -> list[float]:
    """Run ``step`` n times; wall time of each (``step`` returns once its work is done)."""
    times = []
    for i in range(n):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
        emit("progress", phase=label, done=i + 1, total=n)
    return times


def run_phases(step: Callable[[], None], cfg: dict, start: Callable[[], None],
               stop: Callable[[], None],
               around_step: Callable[[int], contextlib.AbstractContextManager],
               min_warmup: int = 0, after_step: Callable[[], None] = lambda: None,
               profile_unmarked: bool = False) -> tuple[list[float], float, list[float]]:
    """The phases every runner shares: warm-up, timed batches without the profiler, then
    one unmarked and one warm-up step and the active steps (numbered from 2, as
    torch.profiler numbers them), each active one inside ``around_step(i)``. The
    profiler runs from ``start()`` (before the active steps, or with ``profile_unmarked``
    before the unmarked ones, for a profiler with its own schedule) to ``stop()``;
    ``after_step()`` follows every step of that phase. Returns (timed, elapsed of the
    timed, profiled). ``min_warmup``: steps the first call needs whatever --warmup says
    (tracing, jit)."""
    emit("phase", phase="warmup", total=cfg["warmup"])
    timed_steps(step, max(cfg["warmup"], min_warmup), "warmup")
    emit("phase", phase="timed", total=cfg["steps"])
    t0 = time.perf_counter()
    times = timed_steps(step, cfg["steps"], "timed")
    elapsed = time.perf_counter() - t0
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
    return times, elapsed, prof_times
