"""``TraceMeta``: the keys of ``Trace.meta``, the metadata saved beside the events table
(the Parquet file's ``traceviz`` key, as JSON).

Every key is optional: a parser sets the source's, ``normalize.finish`` the derived ones,
a capture or a run folder (``files/runfolder.run_meta``) the run's. Values are JSON
(saved with ``json.dumps``): a device index is a string key.
"""

from __future__ import annotations

from typing import Any, TypedDict


class TraceMeta(TypedDict, total=False):
    # -- every trace: Trace, the parsers, normalize.finish, load/upgrade ---------------------
    schema_version: int           # the events table's schema (table.schema.SCHEMA_VERSION)
    source_format: str            # kineto, nsys-sqlite, nsys-arrow, nsys-dir, xplane, mxnet
    source_file: str              # the raw trace read (beside the Parquet once loaded)
    profiler: str                 # what recorded it: torch.profiler, Nsight Systems...
    devices: dict[str, str]       # device index -> name, where the source names them
    origin_ns: int                # the source clock's time of ts_ns 0
    notes: list[str]              # what the import dropped or changed, one line each
    dtypes_recorded: bool         # op dtypes recorded (casts told from copies; Kineto)
    memory_base: dict[str, int]   # device -> bytes its allocator held before the first event
    # -- the source's own, kept as recorded ------------------------------------------------
    kineto_schemaVersion: Any     # Kineto's schemaVersion
    kineto_distributedInfo: dict[str, Any]  # Kineto's distributedInfo (rank, world size...)
    kineto_baseTimeNanoseconds: int  # Kineto's baseTimeNanoseconds (its clock's origin)
    kineto_traceName: str         # Kineto's traceName
    nsys_version: str             # nsys' EXPORT_PRODUCT_VERSION
    nsys_schema: str              # nsys' EXPORT_SCHEMA_VERSION
    nsys_window_ns: str           # nsys' DERIVED_WINDOW_NS (a windowed export)
    hostnames: list[str]          # XSpace: one per host file
    thread_names: dict[str, Any]  # XSpace: thread id -> name per host
    # XSpace GPU planes, Kineto deviceProperties: device -> name, multiprocessors, memory
    # (bytes), compute capability; XSpace adds clock (MHz) and bandwidth (GB/s)
    device_properties: dict[str, Any]
    mxnet_processes: list[Any]    # MXNet: the profile's process names
    # -- a run: capture, a run folder (runfolder.run_meta), capture -- python, profile() ---
    model: str                    # the variant (or the script's name, traceviz.profile)
    variant: str                  # the same as model
    preset: str | None            # the workload's preset
    mode: str | None              # forward or train
    amp: str | None               # fp16, bf16, or None (fp32)
    seed: int | None              # the run's seed
    device_kind: str | None       # cpu or cuda, as asked
    workload: dict[str, Any]      # the run's Workload (runners/benchdefs.py), as a dict
    bench: dict[str, Any]         # bench.json: the timed, unprofiled batches and more
    runner: dict[str, Any]        # meta.json: the runner's versions, device, profiler
    exec: str                     # Keras variants: function or eager, as asked
    options: dict[str, Any]       # variant options: rank, compile_mode
    graph_replay: bool            # a graph-replayed capture (CUDA graphs, CUDA-event times)
    script: str                   # capture -- python: the command profiled
    exit_status: int              # capture -- python: the script's exit status
    # a step the code did not finish, dropped on import (parsers/cut_step.py): its number,
    # the rows and ops dropped, ns from its start to its last row's end
    cut_step: dict[str, int]
    # -- read but written by no traceviz code: a user's own metadata -----------------------
    rank: int                     # the rank of a trace without distributedInfo (rank readers)
    workers: int                  # advice's data-stall rule (a run's is workload["workers"])
