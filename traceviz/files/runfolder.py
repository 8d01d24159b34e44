"""A capture's run folder read as one run: its trace and what the runner wrote beside it
(``bench.json``: the timed, unprofiled batches; ``config.json``: what was asked for;
``meta.json``: the runner's versions and device).

A folder a user copied often has no ``trace.parquet``: the raw trace and the three files
are enough, and every command reads such a folder, or the raw trace inside it, as the run
with its timings. ``capture`` builds the same metadata from the same three records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from traceviz.errors import InputError
from traceviz.files.folders import run_trace

if TYPE_CHECKING:  # the type only: the table's definitions sit above files/
    from traceviz.table.meta import TraceMeta


def read_record(path: Path) -> dict[str, Any] | None:
    """A run's JSON record (bench/config/meta.json); None where the file is absent."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: not readable as the run's JSON record ({e})") from None
    if not isinstance(value, dict):
        raise InputError(f"{path}: not a JSON object (a run's {path.name} holds one)")
    return value


def run_meta(config: dict[str, Any] | None, bench: dict[str, Any] | None,
             runner: dict[str, Any] | None) -> TraceMeta:
    """The ``Trace.meta`` keys a run adds to its trace's, from config.json, bench.json
    and meta.json (any of them may be missing); ``TraceMeta`` says what each holds."""
    config, runner = config or {}, runner or {}
    workload = config.get("workload") or {}
    out: dict[str, Any] = {}
    if config.get("model"):
        out |= {"model": config["model"], "variant": config["model"]}
    for key, value in (("preset", workload.get("preset")), ("mode", workload.get("mode")),
                       ("amp", config.get("amp")), ("seed", config.get("seed")),
                       ("device_kind", config.get("device"))):
        if key in config or value is not None:
            out[key] = value
    if workload:
        out["workload"] = workload
    if bench is not None:
        out["bench"] = bench
    if runner:
        out["runner"] = runner
    prof = config.get("profiler")
    if runner.get("framework") == "torch" and prof in ("torch", "nsys"):
        out["profiler"] = {"torch": "torch.profiler", "nsys": "Nsight Systems"}[prof]
    elif runner.get("profiler") or runner.get("framework"):
        out["profiler"] = runner.get("profiler") or runner["framework"]
    if config.get("exec") is not None:
        out["exec"] = config["exec"]
    if config.get("options"):
        out["options"] = config["options"]
    if config.get("graph_replay"):
        out["graph_replay"] = True
    return cast("TraceMeta", out)


def folder_meta(run_dir: Path) -> TraceMeta:
    """``run_meta`` of the records in ``run_dir``."""
    bench = read_record(run_dir / "bench.json")
    if bench is not None:
        check_bench(bench, run_dir / "bench.json")
    return run_meta(read_record(run_dir / "config.json"), bench,
                    read_record(run_dir / "meta.json"))


# bench.json's figures the analyses read: numbers, or lists of numbers
_BENCH_NUMBERS = ("elapsed_s", "sequences_per_s", "batches", "profiled_time_per_batch_s",
                  "profiler_overhead", "first_call_s", "framework_compile_s",
                  "workload_flops", "warmup_batches")
_BENCH_LISTS = ("batch_times_s", "warmup_times_s", "loss_per_batch", "profiled_batch_times_s")


def check_bench(bench: dict[str, Any], path: Path) -> None:
    """Raise ``InputError`` naming the first figure of ``bench`` of the wrong type."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for key in _BENCH_NUMBERS:
        if bench.get(key) is not None and not number(bench[key]):
            raise InputError(f"{path}: {key!r} is not a number ({bench[key]!r})")
    for key in _BENCH_LISTS:
        v = bench.get(key)
        if v is not None and not (isinstance(v, list)
                                  and all(number(x) or x is None for x in v)):
            raise InputError(f"{path}: {key!r} is not a list of numbers")
    t = bench.get("time_per_batch_s")
    if t is not None and not (isinstance(t, dict) and all(
            number(t.get(k)) for k in ("median", "min", "max") if k in t)):
        raise InputError(f"{path}: 'time_per_batch_s' holds something other than numbers")
    for key in ("memory", "utilization", "workload_flops_parts"):
        if bench.get(key) is not None and not isinstance(bench[key], dict):
            raise InputError(f"{path}: {key!r} is not a JSON object")


def run_of(trace_path: Path) -> Path | None:
    """The run folder whose trace ``trace_path`` is, else None."""
    parent = Path(trace_path).parent
    found = run_trace(parent)
    return parent if found is not None and found.resolve() == Path(trace_path).resolve() \
        else None
