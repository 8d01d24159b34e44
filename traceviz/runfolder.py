"""A capture's run folder read as one run: its trace and what the runner wrote beside it
(``bench.json``: the timed, unprofiled batches; ``config.json``: what was asked for;
``meta.json``: the runner's versions and device).

A folder a user copied often has no ``trace.parquet``: the raw trace and the three files
are enough, and every command reads such a folder, or the raw trace inside it, as the run
with its timings. ``capture`` builds the same metadata from the same three records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traceviz.errors import InputError
from traceviz.folders import run_trace


def _read(path: Path) -> dict[str, Any] | None:
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
             runner: dict[str, Any] | None) -> dict[str, Any]:
    """The ``Trace.meta`` keys a run adds to its trace's, from config.json, bench.json
    and meta.json (any of them may be missing)."""
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
    return out


def folder_meta(run_dir: Path) -> dict[str, Any]:
    """``run_meta`` of the records in ``run_dir``."""
    return run_meta(_read(run_dir / "config.json"), _read(run_dir / "bench.json"),
                    _read(run_dir / "meta.json"))


def run_of(trace_path: Path) -> Path | None:
    """The run folder whose trace ``trace_path`` is, else None."""
    parent = Path(trace_path).parent
    found = run_trace(parent)
    return parent if found is not None and found.resolve() == Path(trace_path).resolve() \
        else None
