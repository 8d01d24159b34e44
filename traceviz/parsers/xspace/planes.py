"""TensorFlow / JAX profiler output: the XSpace protobuf (``<host>.xplane.pb``).

An XSpace holds planes (``/host:CPU``, ``/device:GPU:N``...), each with lines (threads,
streams, derived timelines) of events whose name, display name and typed stats live in
per-plane metadata tables. Times are a line's ``timestamp_ns`` plus an event's
``offset_ps``; here they become integer nanoseconds since the epoch (``// 1000``).

What becomes a row:
- device lines ``Stream #N(...)`` of ``/device:GPU:N`` planes and the ``XLA Ops`` line of
  ``/device:TPU:N`` planes (a TPU runs HLO ops, launched by no host call): kernels,
  memcpy (``memcpy_details``, bytes from its ``size:``) and memset; ``kernel_details``
  (registers, shared memory, grid, block) goes to the ``details`` column; ``tf_op``
  (TF >= 2.5) or ``annotation`` (older) names the TF op that launched it (``hlo_op`` the
  XLA instruction, under JAX), used when no host op encloses the launch;
- host events with a ``correlation_id``: the driver call that put that device row on
  the GPU. CUPTI's host events carry the kernel's name, not the API's, so they are named
  after the driver API TF/XLA use for that work: ``cuLaunchKernel`` for kernels,
  ``cuMemcpy{HtoD,DtoH,DtoD}[Async]`` for copies, ``cuMemsetD8Async`` for memsets;
  ROCm's tracer names them after the API (``hipModuleLaunchKernel``): kept as recorded;
- host framework ops: executor events ``node:Type`` (graph mode, tf.function), in
  eager mode ``EagerKernelExecute`` inside ``EagerExecute`` (its ``eager_op`` stat is
  the type), and XLA:CPU thunks (``hlo_op`` stat: ``dot.3``, ``MatMul_1.30``, with TF's
  and XLA's uniquifying suffixes dropped); rows are named by op type (``MatMul``,
  ``Cast``, ``dot``), as Kineto names aten ops;
- a GPU plane's own stats name its device (``gpu_device_name``: "NVIDIA H200", so the
  peak table matches it; the plane's name where absent) and state its multiprocessors,
  memory bandwidth and size, clock and compute capability (``meta["device_properties"]``);
- XLA's command buffers run as CUDA graphs: the host event ``cuGraphLaunch (CudaGraph:N)``
  is one ``cuGraphLaunch`` call, with every kernel the graph ran under its correlation id;
- steps: host events with a ``step_num`` stat (``tf.profiler.experimental.Trace("step",
  step_num=N, _r=1)``, Keras' ``train``), else the device planes' derived ``Steps`` line
  with the ``group_id`` stat that tags each kernel of that step;
- other host events with a duration: annotations. Derived device lines (``TensorFlow
  Ops``, ``Framework Ops``, name scopes, XLA modules) repeat the kernels and are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.files.fileio import is_gzip, open_input
from traceviz.files.folders import describe_folder, log_dirs_below
from traceviz.files.limits import xspace_limit
from traceviz.parsers.normalize import finish
from traceviz.parsers.numbers import dropped_note
from traceviz.parsers.xspace.event_rows import HOST_DEVICE_STRIDE, Rows, to_base
from traceviz.table.meta import TraceMeta
from traceviz.trace import Trace

_STREAM = re.compile(r"^Stream #(\d+)")
_DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU):(\d+)$")
_TPU_OPS_LINE = "XLA Ops"  # a TPU's executed HLO ops; its other lines are derived
_HOST_PLANE = "/host:CPU"
# the stats read per event; everything else is left in the protobuf
_WANTED = ("correlation_id", "kernel_details", "tf_op", "annotation", "memcpy_details",
           "memset_details", "group_id", "step_num", "step_name", "eager_op", "is_func",
           "hlo_op", "allocator_name", "allocation_bytes", "bytes_allocated", "flops",
           "bytes_accessed")
# read from an event's metadata too (XLA's cost analysis on a TPU's "XLA Ops" line)
_METADATA_STATS = ("flops", "bytes_accessed")


def resolve(path: Path, run: str | None = None) -> list[Path]:
    """The ``.xplane.pb`` files a path names: itself, or in a profile log directory
    (``<logdir>/plugins/profile/<run>/<host>.xplane.pb``) every host file of the newest
    run, or of ``run`` when given."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    if not (path / "plugins").is_dir() and not any(path.glob("*.xplane.pb*")) and \
            not any(path.glob("*/*.xplane.pb*")):
        # a folder above the log directory (Keras' logs/fit/): its one log directory
        below = log_dirs_below(path)
        if len(below) == 1:
            return resolve(below[0], run)
        if below:
            raise TraceVizError(describe_folder(path))
    runs_dir = path / "plugins" / "profile"
    if not runs_dir.is_dir():
        runs_dir = path / "profile" if (path / "profile").is_dir() else path
    if any(runs_dir.glob("*.xplane.pb*")):  # already a run folder
        return sorted(runs_dir.glob("*.xplane.pb*"))
    runs = sorted(d for d in runs_dir.iterdir() if d.is_dir() and any(d.glob("*.xplane.pb*")))
    if not runs:
        raise TraceVizError(f"{path}: no .xplane.pb under it (expected a profile log "
                            "directory: <logdir>/plugins/profile/<run>/<host>.xplane.pb)")
    if run is not None:
        chosen = [d for d in runs if d.name == run]
        if not chosen:
            raise TraceVizError(f"{path}: no profile run {run!r} (runs: "
                                + ", ".join(d.name for d in runs) + ")")
        return sorted(chosen[0].glob("*.xplane.pb*"))
    return sorted(runs[-1].glob("*.xplane.pb*"))  # run names are timestamps: last = newest


def read_space(path: Path):
    """The parsed XSpace message of one file (gzip or not)."""
    from google.protobuf.message import DecodeError

    from traceviz.parsers.xspace.messages import xspace_class

    # the bytes and the parsed message are held at once: refuse what would not fit
    # before reading it, not after (a 17 MB .gz can inflate to 5 GB)
    limit = xspace_limit()
    gzip = is_gzip(path)
    size = path.stat().st_size
    if not gzip and size > limit:
        raise _too_big(path, limit)
    with open_input(path) as f:
        # a read of N bytes reserves N at once: a plain file's own size, never the limit
        # (an eighth of the machine's memory failed a 284-byte file under a 4.5 GB
        # ulimit -v); a gzip file is inflated in blocks as they come, up to the limit
        data = f.read(limit + 1) if gzip else f.read(size)
    if len(data) > limit:
        raise _too_big(path, limit)
    space = xspace_class()()
    try:
        space.ParseFromString(data)
    except DecodeError as e:
        raise TraceVizError(f"{path}: not a readable XSpace protobuf ({e})") from None
    if not any(plane.lines for plane in space.planes):
        raise TraceVizError(f"{path}: the XSpace holds no events (not an .xplane.pb, or "
                            "a profile that recorded nothing)")
    return space


def _too_big(path: Path, limit: int) -> TraceVizError:
    return TraceVizError(f"{path}: an XSpace of more than {limit >> 20:,} MB, the limit "
                         "(by default an eighth of this machine's memory: parsing holds "
                         "several times the bytes; TRACEVIZ_MAX_XSPACE_MB=N sets it)")


def parse(path: str | Path, run: str | None = None) -> Trace:
    """Read one ``.xplane.pb`` (or a profile log directory) into a ``Trace``."""
    path = Path(path)
    frames: list[pd.DataFrame] = []
    hostnames: list[str] = []
    devices: dict[str, str] = {}
    threads: dict[str, str] = {}
    properties: dict[str, dict] = {}
    dropped = 0
    for host, file in enumerate(resolve(path, run)):
        space = read_space(file)
        hostnames.extend(space.hostnames or [file.name.split(".xplane")[0]])
        frame, bad = _space_frame(space, host, devices, threads, properties)
        del space  # the message (the file's size or more) is not kept through the rest
        frames.append(frame.assign(host=host))
        dropped += bad
    base = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    meta: TraceMeta = {"source_format": "xplane", "source_file": str(path),
            "profiler": "TensorFlow/JAX profiler (XSpace)", "hostnames": hostnames,
            "devices": devices, "thread_names": threads}
    if properties:
        meta["device_properties"] = properties
    notes = dropped_note({"a time beyond 64-bit nanoseconds, or a device or stream number "
                          "beyond 32 bits": dropped})
    if notes:
        meta["notes"] = notes
    # each host's CUPTI numbers its own correlation ids
    return finish(base, meta, link_pid="host" if len(frames) > 1 else None)


def _space_frame(space, host: int, devices: dict, threads: dict | None = None,
                 properties: dict | None = None) -> tuple[pd.DataFrame, int]:
    """Base rows of one host's XSpace, and how many were dropped as out of range
    (``threads`` gains the host's thread names, ``properties`` what each device plane
    states about its device)."""
    rows = Rows()
    for plane in space.planes:
        m = _DEVICE_PLANE.match(plane.name)
        if plane.name == _HOST_PLANE:
            _add_plane(rows, plane, device=-1, pid=host)
        elif m and plane.lines:
            # a second host's GPU:N is device 1000 + N, the third's 2000 + N...
            device = int(m.group(2)) + HOST_DEVICE_STRIDE * host
            stated = plane_stats(plane)
            named = str(stated.get("gpu_device_name") or plane.name)
            devices[str(device)] = named if host == 0 else f"host {host} {named}"
            if properties is not None and stated:
                properties[str(device)] = device_properties(stated)
            _add_plane(rows, plane, device=device, pid=-1)
    base = to_base(rows)
    if threads is not None:
        threads.update(rows.threads)
    return base, int(rows.bad.sum()) if rows.bad is not None else 0


def plane_stats(plane) -> dict[str, object]:
    """A plane's own stats by name (a GPU plane's ``gpu_device_name``, ``core_count``,
    ``memory_bandwidth``...)."""
    names = {k: sm.name for k, sm in plane.stat_metadata.items()}
    return {names[s.metadata_id]: _value(s, names) for s in plane.stats
            if s.metadata_id in names}


def device_properties(stated: dict[str, object]) -> dict[str, object]:
    """What a GPU plane states about its device, in the units traceviz uses: name,
    multiprocessors, memory bandwidth (GB/s, 10^9 bytes), memory size (bytes), clock (MHz),
    compute capability."""
    out: dict[str, object] = {}

    def number(key: str) -> float | None:
        v = stated.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    if stated.get("gpu_device_name"):
        out["name"] = str(stated["gpu_device_name"])
    for key, out_key, scale in (("core_count", "multiprocessors", 1.0),
                                ("memory_bandwidth", "memory_bandwidth_gbps", 1e-9),
                                ("memory_size", "memory_bytes", 1.0),
                                ("clock_rate", "clock_mhz", 1e-3)):
        v = number(key)
        if v is not None:
            out[out_key] = int(v) if scale == 1.0 else round(v * scale, 3)
    major, minor = number("compute_cap_major"), number("compute_cap_minor")
    if major is not None:
        out["compute_capability"] = f"{int(major)}.{int(minor or 0)}"
    return out


def _value(s, stat_names: dict) -> object:
    """An XStat's value: its oneof field, a reference resolved to its name."""
    which = s.WhichOneof("value")
    return stat_names.get(s.ref_value, "") if which == "ref_value" \
        else getattr(s, which) if which else None


def _add_plane(rows: Rows, plane, device: int, pid: int) -> None:
    # an event names its metadata: the row keeps the name's code, one string per name
    # however many events share it (a copy per event made 4.9 GB of a 50 MB file)
    names = {k: rows.name_code(md.name) for k, md in plane.event_metadata.items()}
    unnamed = rows.name_code("")
    stat_names = {k: sm.name for k, sm in plane.stat_metadata.items()}
    wanted = {k: n for k, n in stat_names.items() if n in _WANTED}
    cols, stats = rows.cols, rows.stats
    # per event metadata: the cost stats it carries (an event's own stats override them)
    metadata_stats = {
        k: [(stat_names[s.metadata_id], _value(s, stat_names)) for s in md.stats
            if stat_names.get(s.metadata_id) in _METADATA_STATS]
        for k, md in plane.event_metadata.items()} if device >= 0 else {}
    for line in plane.lines:
        if device >= 0:
            m = _STREAM.match(line.name)
            if m:
                kind, stream = "device", int(m.group(1))
            elif line.name == _TPU_OPS_LINE:  # TPU: no streams, one line of XLA ops
                kind, stream = "device", int(line.id)
            elif line.name == "Steps":
                kind, stream = "device_steps", -1
            else:
                continue  # derived timelines: ops, name scopes, XLA modules
        else:
            kind, stream = "host", -1
            rows.threads[f"{pid}:{line.id}"] = line.display_name or line.name
        events = line.events
        n = len(events)
        if not n:
            continue
        start = len(cols["kind"])
        base_ps = line.timestamp_ns * 1000
        cols["kind"].extend([kind] * n)
        cols["name"].extend([names.get(e.metadata_id, unnamed) for e in events])
        cols["ts_ns"].extend([(base_ps + e.offset_ps) // 1000 for e in events])
        cols["dur_ns"].extend([e.duration_ps // 1000 for e in events])
        cols["pid"].extend([pid] * n)
        cols["tid"].extend([line.id if device < 0 else -1] * n)
        cols["device"].extend([device] * n)
        cols["stream"].extend([stream] * n)
        cols["line"].extend([line.name] * n)
        for i, e in enumerate(events, start):
            for name, value in metadata_stats.get(e.metadata_id, ()):
                stats.setdefault(name, {})[i] = value
            for s in e.stats:
                name = wanted.get(s.metadata_id)
                if name is None:
                    continue
                stats.setdefault(name, {})[i] = _value(s, stat_names)
