"""The notebook's tables: ``analyze --json``'s figures (integer nanoseconds, fractions) as
pandas DataFrames whose column names carry their unit.

One naming rule for every table: a total time is ``*_ms`` (``total_ns`` reads
``time_ms``, a per-step figure ``*_per_step_ms``, per window ``*_per_window_ms``), the
time of one call (a kernel's mean, median, min, max, deviation) is ``*_us``, a share is
``*_pct`` (0 to 100: ``share`` reads ``share_pct``, ``*_fraction`` and ``pct_*``
``*_pct``), memory is ``*_mib``, a count has no suffix; rates keep the unit they are
named by (``tflops``, ``gbps``). Every figure is the JSON's value converted, nothing
recomputed: ``time_ms * 1e6`` is the ``total_ns`` it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

# the figures of one call (one kernel's duration), shown in microseconds
PER_CALL = frozenset({"mean_ns", "min_ns", "median_ns", "max_ns", "std_ns", "p90_ns"})


def column(key: str) -> str:
    """The unit-named column for a ``--json`` key (``total_ns`` -> ``time_ms``)."""
    if key == "total_ns":
        return "time_ms"
    for per in ("_ns_per_step", "_ns_per_window"):
        if key.endswith(per):
            return key[: -len(per)] + per[3:] + "_ms"
    if key.startswith("pct_"):
        return key[4:] + "_pct"
    if key in PER_CALL:
        return key[:-3] + "_us"
    if key.endswith("_ns"):
        return key[:-3] + "_ms"
    if key == "share":
        return "share_pct"
    if key.endswith("_fraction"):
        return key[: -len("_fraction")] + "_pct"
    return key


def value(key: str, v: Any) -> Any:
    """``v`` in the unit ``column(key)`` names (None stays None)."""
    if v is None or isinstance(v, bool):
        return v
    if key in PER_CALL:
        return v / 1e3
    if key.endswith(("_ns", "_ns_per_step", "_ns_per_window")):
        return v / 1e6
    if key == "share" or key.endswith("_fraction") or key.startswith("pct_"):
        return v * 100
    return v


def records(rows: Iterable[Mapping[str, Any]], keys: list[str]) -> pd.DataFrame:
    """One row per record, the ``keys`` it has converted (nested values left out)."""
    rows = list(rows)
    keys = [k for k in keys if any(k in r for r in rows)] if rows else keys
    data = [[value(k, r.get(k)) for k in keys] for r in rows]
    return pd.DataFrame(data, columns=[column(k) for k in keys])


KERNEL_KEYS = ["rank", "name", "category", "count", "total_ns", "share", "mean_ns",
               "median_ns", "min_ns", "max_ns", "std_ns"]
PHASE_KEYS = ["phase", "ranges", "wall_ns", "busy_ns", "kernels", "kernel_ns", "casts",
              "cast_ns"]


def kernels_frame(summary: Mapping[str, Any]) -> pd.DataFrame:
    """The top kernels (on a CPU trace: the work ops), largest first: ``rank``, ``name``,
    ``category``, ``count``, ``time_ms``, ``share_pct`` (of kernel time) and one call's
    ``mean_us``, ``median_us``, ``min_us``, ``max_us``, ``std_us``."""
    return records(summary.get("top_kernels") or [], KERNEL_KEYS)


def categories_frame(summary: Mapping[str, Any]) -> pd.DataFrame:
    """Kernel time per category (``gemm``, ``rnn``...): ``category``, ``count``,
    ``time_ms``, ``share_pct`` (of kernel time); every category, largest first."""
    cats = summary.get("categories") or {}
    rows = [{"category": c, **v} for c, v in cats.items()]
    frame = records(rows, ["category", "count", "total_ns", "share"])
    return frame.sort_values("time_ms", ascending=False, kind="stable",
                             ignore_index=True) if len(frame) else frame


def phases_frame(summary: Mapping[str, Any]) -> pd.DataFrame:
    """Per marked phase: ``phase``, ``ranges``, ``wall_ms``, ``busy_ms``, ``kernels``,
    ``kernel_ms``, ``casts``, ``cast_ms``."""
    return records(summary.get("phases") or [], PHASE_KEYS)


TOTALS = (("span", "span_ns"), ("busy", "busy_ns"), ("idle", "idle_ns"),
          ("host wait", "host_wait_ns"), ("queued idle", "queued_idle_ns"))


def totals_frame(summary: Mapping[str, Any]) -> pd.DataFrame:
    """Where the span went: ``figure`` (span, busy, idle, host wait, queued idle),
    ``time_ms`` and ``share_pct`` of the span; figures the trace cannot give (a CPU
    trace's host wait) are left out."""
    span = summary.get("span_ns")
    rows = [(label, summary[key] / 1e6,
             summary[key] * 100 / span if span else None)
            for label, key in TOTALS if summary.get(key) is not None]
    return pd.DataFrame(rows, columns=["figure", "time_ms", "share_pct"])


def host_wait_frame(split: Mapping[str, Any] | None) -> pd.DataFrame:
    """``host_wait_split``'s causes, largest first: ``cause``, ``time_ms``,
    ``per_step_ms``, ``share_pct`` (of the host wait); empty where there is none."""
    causes = (split or {}).get("causes") or {}
    rows = [{"cause": c, "total_ns": v["ns"], "per_step_ns": v.get("per_step_ns"),
             "share": v.get("share")} for c, v in causes.items() if v.get("ns")]
    frame = records(rows, ["cause", "total_ns", "per_step_ns", "share"])
    return frame.sort_values("time_ms", ascending=False, kind="stable",
                             ignore_index=True) if rows else frame


def bound_frame(bound: Mapping[str, Any]) -> pd.DataFrame:
    """The figures a verdict was judged on: ``figure``, ``time_ms`` and ``share_pct`` of
    the span (NaN where the verdict has no span, and for the timed step, a benchmark's
    time rather than a part of the span); the host's groups as ``host: <group>``."""
    figures = bound.get("figures") or {}
    span = figures.get("span_ns")
    rows: list[tuple[str, float]] = []
    for key, v in figures.items():
        if key.endswith("_ns") and isinstance(v, int | float) and not isinstance(v, bool):
            rows.append((key[:-3], v))
        elif key == "host_groups" and isinstance(v, dict):
            rows += [(f"host: {g}", ns) for g, ns in v.items()]
    nan = float("nan")
    return pd.DataFrame(
        [(f, ns / 1e6, ns * 100 / span if span and f != "timed_step" else nan)
         for f, ns in rows], columns=["figure", "time_ms", "share_pct"]).astype(
        {"time_ms": float, "share_pct": float})


# -- efficiency, whatif, advise, memory ---------------------------------------------------
RATE_KEYS = ["precision", "calls", "kernels", "time_ns", "flops", "bytes", "tflops", "gbps",
             "intensity", "pct_peak", "pct_bw", "bound"]


def efficiency_kernels_frame(eff: Mapping[str, Any]) -> pd.DataFrame:
    """Per kernel: ``kernel``, ``category``, ``precision``, ``calls``, ``kernels``,
    ``time_ms``, ``flops``, ``bytes``, ``tflops``, ``gbps``, ``intensity`` (FLOPs per
    byte), ``peak_pct`` and ``bw_pct`` (of the device's peaks), ``bound``."""
    return records(eff.get("kernels") or [], ["kernel", "category", *RATE_KEYS])


def efficiency_groups_frame(eff: Mapping[str, Any]) -> pd.DataFrame:
    """Per op group (op, shapes, types): the same columns as the kernels' with ``op``,
    ``dims``, ``types`` first."""
    return records(eff.get("groups") or [], ["op", "dims", "types", *RATE_KEYS])


def _per_step(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with its ``per_step`` figures beside its own (``saving_ns`` per step as
    ``saving_ns_per_step``)."""
    steps = row.get("per_step") or {}
    return {**row, **{k[:-3] + "_ns_per_step": v for k, v in steps.items()
                      if k.endswith("_ns")}}


def scenarios_frame(whatif: Mapping[str, Any]) -> pd.DataFrame:
    """Per scenario: ``name``, ``applies``, ``predicted_ms``, ``saving_ms``,
    ``saving_pct`` (of the measured span), per step ``saving_per_step_ms`` and in timed
    time ``timed_saving_per_step_ms``."""
    rows = [_per_step(r) for r in whatif.get("scenarios") or []]
    return records(rows, ["name", "applies", "predicted_ns", "saving_ns", "saving_fraction",
                          "saving_ns_per_step", "timed_saving_ns_per_step"])


def findings_frame(findings: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Per finding, in advise's order: ``rule``, ``title``, ``saving_ms`` (over the
    trace), ``saving_per_step_ms``, ``timed_saving_per_step_ms``, ``saving_scenario``,
    ``evidence`` (a list of lines), ``action``."""
    return records(findings, ["rule", "title", "saving_ns", "saving_ns_per_step",
                              "timed_saving_ns_per_step", "saving_scenario", "evidence",
                              "action"])


MEMORY_BYTES = ("base", "peak_allocated", "allocated", "freed")


def _mib(rows: Iterable[Mapping[str, Any]], keys: list[str]) -> pd.DataFrame:
    frame = records(rows, keys)
    for k in MEMORY_BYTES:
        if k in frame:
            frame[k] = frame[k].astype(float) / 2**20
    return frame.rename(columns={k: f"{k}_mib" for k in MEMORY_BYTES})


def memory_devices_frame(memory: Mapping[str, Any]) -> pd.DataFrame:
    """Per device (-1: host memory): ``events`` and ``base_mib``, ``peak_allocated_mib``,
    ``allocated_mib``, ``freed_mib`` (MiB: 2**20 bytes)."""
    return _mib(memory.get("devices") or [], ["device", "events", *MEMORY_BYTES])


def memory_phases_frame(memory: Mapping[str, Any]) -> pd.DataFrame:
    """Per device and phase: ``events``, ``allocated_mib``, ``freed_mib``."""
    return _mib(memory.get("phases") or [], ["device", "phase", "events", "allocated",
                                              "freed"])


# -- the critical path -------------------------------------------------------------------
PATH_PARTS = ("host", "launch", "device", "queue", "sync")


def path_steps_frame(path: Mapping[str, Any]) -> pd.DataFrame:
    """Per window (a step, or a host range): ``length_ms`` and its parts ``host_ms``,
    ``launch_ms``, ``device_ms``, ``queue_ms``, ``sync_ms``, which add up to it."""
    return records(path.get("steps") or [], ["step", "start_ns", "end_ns", "length_ns",
                                             *(f"{p}_ns" for p in PATH_PARTS)])


def path_parts_frame(path: Mapping[str, Any]) -> pd.DataFrame:
    """The path's parts over every window: ``part``, ``time_ms``, ``per_window_ms``,
    ``share_pct`` (of the windows' length)."""
    totals, per = path.get("totals") or {}, path.get("per_window") or {}
    shares = path.get("shares") or {}
    return pd.DataFrame(
        [(p, totals[p] / 1e6, per.get(p, 0) / 1e6,
          float("nan") if shares.get(p) is None else 100 * shares[p])
         for p in PATH_PARTS if p in totals],
        columns=["part", "time_ms", "per_window_ms", "share_pct"])


def path_kernels_frame(path: Mapping[str, Any]) -> pd.DataFrame:
    """The kernels on the path: ``name``, ``category``, ``calls``, ``time_ms`` (all their
    time), ``on_path_ms``, ``on_path_calls``, ``share_pct`` (of their time on the path)."""
    return records(path.get("kernels") or [], ["name", "category", "calls", "total_ns",
                                               "on_path_ns", "on_path_calls", "share"])


def path_host_calls_frame(path: Mapping[str, Any]) -> pd.DataFrame:
    """The host calls on the path: ``name``, ``on_path_ms``, ``on_path_per_window_ms``."""
    return records(path.get("host_calls") or [], ["name", "on_path_ns",
                                                  "on_path_ns_per_window"])
