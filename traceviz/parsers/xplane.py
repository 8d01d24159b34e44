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
- steps: host events with a ``step_num`` stat (``tf.profiler.experimental.Trace("step",
  step_num=N, _r=1)``, Keras' ``train``), else the device planes' derived ``Steps`` line
  with the ``group_id`` stat that tags each kernel of that step;
- other host events with a duration: annotations. Derived device lines (``TensorFlow
  Ops``, ``Framework Ops``, name scopes, XLA modules) repeat the kernels and are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.fileio import open_input
from traceviz.intervals import innermost_enclosing
from traceviz.launch_apis import launch_kind
from traceviz.normalize import BASE_COLUMNS, finish
from traceviz.parsers.numbers import INT32, checked_ints, dropped_note
from traceviz.trace import Trace

_STREAM = re.compile(r"^Stream #(\d+)")
_DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU):(\d+)$")
_TPU_OPS_LINE = "XLA Ops"  # a TPU's executed HLO ops; its other lines are derived
_HOST_PLANE = "/host:CPU"
HOST_DEVICE_STRIDE = 1000
_OP_EVENT = re.compile(r"^([^:\s]+):([A-Za-z_][\w]*)$")   # "node/name:Type"
_RUNTIME_API = r"^(?:hip|cuda|cu)[A-Z]\w*$"  # hipStreamWaitEvent; not cutlass_80_..., cudnn
_SIZE = re.compile(r"(?:size|num_bytes):(\d+)")
_COPY_KIND = {"H2D": "HtoD", "D2H": "DtoH", "D2D": "DtoD", "P2P": "DtoD"}
# the stats read per event; everything else is left in the protobuf
_WANTED = ("correlation_id", "kernel_details", "tf_op", "annotation", "memcpy_details",
           "memset_details", "group_id", "step_num", "step_name", "eager_op", "is_func",
           "hlo_op")


@dataclass
class _Rows:
    """Column lists for one XSpace, built line by line."""

    cols: dict[str, list] = field(default_factory=lambda: {
        c: [] for c in ("kind", "name", "ts_ns", "dur_ns", "pid", "tid", "device", "stream",
                        "line")})
    stats: dict[str, list] = field(default_factory=dict)
    bad: np.ndarray | None = None  # rows with a number out of range, dropped


def resolve(path: Path, run: str | None = None) -> list[Path]:
    """The ``.xplane.pb`` files a path names: itself, or in a profile log directory
    (``<logdir>/plugins/profile/<run>/<host>.xplane.pb``) every host file of the newest
    run, or of ``run`` when given."""
    path = Path(path)
    if not path.is_dir():
        return [path]
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


def is_xplane_dir(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and (any(path.glob("*.xplane.pb*"))
                              or any(path.glob("plugins/profile/*/*.xplane.pb*"))
                              or any(path.glob("*/*.xplane.pb*")))


def read_space(path: Path):
    """The parsed XSpace message of one file (gzip or not)."""
    from google.protobuf.message import DecodeError

    from traceviz.parsers.xspace_proto import xspace_class

    with open_input(path) as f:
        data = f.read()
    space = xspace_class()()
    try:
        space.ParseFromString(data)
    except DecodeError as e:
        raise TraceVizError(f"{path}: not a readable XSpace protobuf ({e})") from None
    if not any(plane.lines for plane in space.planes):
        raise TraceVizError(f"{path}: the XSpace holds no events (not an .xplane.pb, or "
                            "a profile that recorded nothing)")
    return space


def parse(path: str | Path, run: str | None = None) -> Trace:
    """Read one ``.xplane.pb`` (or a profile log directory) into a ``Trace``."""
    path = Path(path)
    frames, hostnames, devices, dropped = [], [], {}, 0
    for host, file in enumerate(resolve(path, run)):
        space = read_space(file)
        hostnames.extend(space.hostnames or [file.name.split(".xplane")[0]])
        frame, bad = _space_frame(space, host, devices)
        frames.append(frame.assign(host=host))
        dropped += bad
    base = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    meta = {"source_format": "xplane", "source_file": str(path),
            "profiler": "TensorFlow/JAX profiler (XSpace)", "hostnames": hostnames,
            "devices": devices}
    notes = dropped_note({"a time beyond 64-bit nanoseconds, or a device or stream number "
                          "beyond 32 bits": dropped})
    if notes:
        meta["notes"] = notes
    # each host's CUPTI numbers its own correlation ids
    return finish(base, meta, link_pid="host" if len(frames) > 1 else None)


def _space_frame(space, host: int, devices: dict) -> tuple[pd.DataFrame, int]:
    """Base rows of one host's XSpace, and how many were dropped as out of range."""
    rows = _Rows()
    for plane in space.planes:
        m = _DEVICE_PLANE.match(plane.name)
        if plane.name == _HOST_PLANE:
            _add_plane(rows, plane, device=-1, pid=host)
        elif m and plane.lines:
            # a second host's GPU:N is device 1000 + N, the third's 2000 + N...
            device = int(m.group(2)) + HOST_DEVICE_STRIDE * host
            devices[str(device)] = plane.name if host == 0 else f"host {host} {plane.name}"
            _add_plane(rows, plane, device=device, pid=-1)
    base = _to_base(rows)
    return base, int(rows.bad.sum()) if rows.bad is not None else 0


def _add_plane(rows: _Rows, plane, device: int, pid: int) -> None:
    names = {k: md.name for k, md in plane.event_metadata.items()}
    stat_names = {k: sm.name for k, sm in plane.stat_metadata.items()}
    wanted = {k: n for k, n in stat_names.items() if n in _WANTED}
    cols, stats = rows.cols, rows.stats
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
        events = line.events
        n = len(events)
        if not n:
            continue
        start = len(cols["kind"])
        base_ps = line.timestamp_ns * 1000
        cols["kind"].extend([kind] * n)
        cols["name"].extend([names.get(e.metadata_id, "") for e in events])
        cols["ts_ns"].extend([(base_ps + e.offset_ps) // 1000 for e in events])
        cols["dur_ns"].extend([e.duration_ps // 1000 for e in events])
        cols["pid"].extend([pid] * n)
        cols["tid"].extend([line.id if device < 0 else -1] * n)
        cols["device"].extend([device] * n)
        cols["stream"].extend([stream] * n)
        cols["line"].extend([line.name] * n)
        for i, e in enumerate(events, start):
            for s in e.stats:
                name = wanted.get(s.metadata_id)
                if name is None:
                    continue
                which = s.WhichOneof("value")
                value = stat_names.get(s.ref_value, "") if which == "ref_value" \
                    else getattr(s, which) if which else None
                stats.setdefault(name, {})[i] = value


def _stat(rows: _Rows, name: str, n: int, default, dtype=object) -> np.ndarray:
    """One stat per row, ``default`` where absent; a value of the wrong type (text in a
    number stat, a number in a text stat) reads as what it can be, else the default."""
    out = np.full(n, default, dtype=dtype)
    found = rows.stats.get(name)
    if found:
        idx = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
        values = list(found.values())
        if dtype is object:
            out[idx] = [v if isinstance(v, str) else default if v is None
                        else v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                        for v in values] if not all(isinstance(v, str) for v in values) \
                else values
        else:
            out[idx] = checked_ints(values, default=default)[0]
    return out


def _label_type(labels: pd.Index) -> np.ndarray:
    """``outer::node:Type#shape=...#`` -> ``Type``; "" when the label names none."""
    return (labels.to_series().str.replace(r"#.*?#", "", regex=True).str.split("::").str[-1]
            .str.extract(r":([A-Za-z_]\w*)$", expand=False).fillna("").to_numpy(dtype=object))


def _to_base(rows: _Rows) -> pd.DataFrame:
    c = rows.cols
    n = len(c["kind"])
    # protobuf ints are unbounded in Python: times past int64 ns, device or stream
    # numbers past int32 mark their rows, which are dropped at the end and counted
    ts, bad = checked_ints(c["ts_ns"])
    dur, bad_dur = checked_ints(c["dur_ns"])
    device, bad_dev = checked_ints(c["device"], bounds=INT32)
    stream, bad_stream = checked_ints(c["stream"], bounds=INT32)
    rows.bad = bad | bad_dur | bad_dev | bad_stream
    ev = pd.DataFrame({
        "where": pd.Categorical(c["kind"]),
        "name": pd.Categorical(c["name"]),
        "ts_ns": ts,
        "dur_ns": np.maximum(dur, 0),
        "pid": np.array(c["pid"], dtype=np.int64),
        "tid": checked_ints(c["tid"])[0],
        "device": device.astype(np.int32),
        "stream": stream.astype(np.int32),
    })
    corr = _stat(rows, "correlation_id", n, -1, np.int64)
    group = _stat(rows, "group_id", n, -1, np.int64)
    step_num = _stat(rows, "step_num", n, -1, np.int64)
    memcpy = pd.Series(_stat(rows, "memcpy_details", n, ""), dtype="category")
    memset = pd.Series(_stat(rows, "memset_details", n, ""), dtype="category")
    op_label = pd.Series(_stat(rows, "tf_op", n, ""), dtype=object)
    annotation = pd.Series(_stat(rows, "annotation", n, ""), dtype=object)
    op_label = op_label.where(op_label != "", annotation)
    details = _stat(rows, "kernel_details", n, "")
    where = ev["where"].to_numpy()
    names = ev["name"].array
    name = np.asarray(names, dtype=object)
    is_dev = where == "device"
    is_host = where == "host"
    # string tests run once per distinct name, then spread by the categorical codes
    named_memcpy = _per_name(names, lambda u: u.str.startswith("Memcpy"))
    named_memset = _per_name(names, lambda u: u.str.startswith("Memset"))

    # --- device rows ----------------------------------------------------------------
    is_memcpy = is_dev & ((memcpy != "").to_numpy() | named_memcpy)
    is_memset = is_dev & ~is_memcpy & ((memset != "").to_numpy() | named_memset)
    kind = np.where(is_memcpy, "memcpy", np.where(is_memset, "memset", "kernel")).astype(object)
    size_of = {"memcpy": _per_name(memcpy.array, _size), "memset": _per_name(memset.array, _size)}
    nbytes = np.where(is_memcpy, size_of["memcpy"], np.where(is_memset, size_of["memset"], -1))

    # --- host launch calls: named by the device work they launched --------------------
    # (a host event named after another runtime call, hipStreamWaitEvent under ROCm, is
    # that call: a runtime row that launches nothing, whatever id it carries)
    other_api = _per_name(names, lambda u: np.asarray(u.str.match(_RUNTIME_API), bool)
                          & ~np.array([launch_kind(str(v)) is not None for v in u], bool))
    other_api = is_host & (corr >= 0) & other_api.astype(bool)
    launch = is_host & (corr >= 0) & ~other_api
    dev_kind = pd.Series(kind[is_dev], index=corr[is_dev]).groupby(level=0).first()
    dev_copy = pd.Series(memcpy.astype(str).to_numpy()[is_dev], index=corr[is_dev]) \
        .groupby(level=0).first()
    launched = dev_kind.reindex(corr[launch]).to_numpy()
    host_name = name[launch]
    launched = np.where(pd.isna(launched),
                        np.where(named_memcpy[launch], "memcpy",
                                 np.where(named_memset[launch], "memset", "kernel")), launched)
    copy_info = dev_copy.reindex(corr[launch]).fillna("").to_numpy().astype(str)
    api = np.where(launched == "kernel", "cuLaunchKernel",
                   np.where(launched == "memset", "cuMemsetD8Async",
                            _memcpy_api(host_name, copy_info)))
    # ROCm's tracer names host events after the API it saw (hipModuleLaunchKernel...):
    # a recorded API name stays as it is
    recorded = _per_name(pd.Categorical(host_name),
                         lambda u: np.array([launch_kind(str(v)) is not None for v in u]))
    api = np.where(recorded.astype(bool), host_name, api)
    kind[launch | other_api] = "runtime"
    name[launch] = api

    # --- host ops: graph executor "node:Type", eager EagerKernelExecute ---------------
    op_type = _per_name(names, _op_event_type)
    is_op = is_host & ~launch & pd.notna(op_type)
    name[is_op] = op_type[is_op]
    # XLA:CPU thunks (TF jit_compile, JAX): the HLO instruction, "dot.3" -> "dot"
    hlo = pd.Series(_stat(rows, "hlo_op", n, ""), dtype="category")
    stripped = np.append(hlo.cat.categories.str.replace(r"(_\d+)?(\.\d+)?$", "", regex=True)
                         .to_numpy(dtype=object), "")
    hlo_name = stripped[hlo.cat.codes.to_numpy()]
    is_hlo = is_host & ~launch & ~is_op & (hlo != "").to_numpy()
    name[is_hlo] = hlo_name[is_hlo]
    is_op |= is_hlo
    eager = is_host & (name == "EagerExecute")
    is_func = _stat(rows, "is_func", n, 0, np.int64)
    eager_op = _stat(rows, "eager_op", n, "")
    kexec = np.flatnonzero(is_host & (name == "EagerKernelExecute"))
    outer = np.flatnonzero(eager)
    ts, dur, tid = ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy(), ev["tid"].to_numpy()
    enc = innermost_enclosing(tid[outer], ts[outer], ts[outer] + dur[outer], tid[kexec],
                              ts[kexec])
    ok = enc >= 0
    kexec, parent = kexec[ok], outer[enc[ok]]
    single = (is_func[parent] == 0) & (eager_op[parent] != "") \
        & ~pd.Series(eager_op[parent], dtype=object).str.startswith("__").to_numpy(bool)
    kexec, parent = kexec[single], parent[single]
    name[kexec] = eager_op[parent]
    is_op[kexec] = True

    # --- steps ------------------------------------------------------------------------
    step = np.full(n, -1, dtype=np.int64)
    host_steps = is_host & (step_num >= 0)
    if host_steps.any():
        is_step = host_steps
        step[is_step] = step_num[is_step]
    else:  # the device timelines' own grouping
        is_step = where == "device_steps"
        step_name = _stat(rows, "step_name", n, "")
        label = np.where(step_name[is_step] != "", step_name[is_step], name[is_step])
        numeric = pd.to_numeric(pd.Series(label, dtype=object), errors="coerce").to_numpy()
        step[is_step] = np.where(np.isnan(numeric), group[is_step],
                                 np.nan_to_num(numeric).astype(np.int64))
        by_group = pd.Series(step[is_step], index=group[is_step]).groupby(level=0).first()
        tagged = is_dev & (group >= 0)
        step[tagged] = by_group.reindex(group[tagged]).fillna(-1).to_numpy(np.int64)
    kind[is_step] = "step"
    name[is_step] = ("step " + pd.Series(step[is_step]).astype(str)).to_numpy(dtype=object)
    kind[is_op & ~is_step] = "op"
    other_host = is_host & ~launch & ~other_api & ~is_op & ~is_step
    kind[other_host] = "annotation"
    keep = ~(other_host & (ev["dur_ns"].to_numpy() <= 0))  # instants: allocations, marks
    keep &= ~rows.bad

    base = pd.DataFrame({
        "kind": kind, "name": name, "ts_ns": ev["ts_ns"], "dur_ns": ev["dur_ns"],
        "pid": ev["pid"], "tid": ev["tid"], "device": ev["device"], "stream": ev["stream"],
        "correlation": np.where(launch | is_dev, corr, -1), "step": step, "bytes": nbytes,
    })[list(BASE_COLUMNS)]
    # a kernel's op from its own stats: TF's op type, else (JAX, XLA) its HLO instruction
    hint = _per_name(pd.Categorical(op_label), _label_type)
    hint = np.where(hint == "", hlo_name, hint)
    base["op_hint"] = np.where(is_dev, hint, "")
    base["details"] = np.where(is_dev & (kind == "kernel"), details, "")
    return base[keep].reset_index(drop=True)


def _per_name(values: pd.Categorical, fn) -> np.ndarray:
    """``fn`` over the distinct values (an Index) -> one result per row."""
    per_value = np.asarray(fn(values.categories))
    fill = np.array([np.nan if per_value.dtype == object else 0], dtype=per_value.dtype)
    return np.append(per_value, fill)[values.codes]


def _size(details: pd.Index) -> np.ndarray:
    """``size:N`` (memcpy_details) or ``num_bytes:N`` (memset_details) -> N, else -1."""
    found = details.to_series().str.extract(_SIZE, expand=False)
    return pd.to_numeric(found, errors="coerce").fillna(-1).to_numpy(np.int64)


def _op_event_type(names: pd.Index) -> np.ndarray:
    """``node/name:Type`` -> ``Type``; NaN for other events and for tf.function calls
    (``__inference_f_12:__inference_f_12`` runs its ops elsewhere: not an op itself)."""
    op_type = names.to_series().str.extract(_OP_EVENT, expand=False)[1]
    return op_type.where(~op_type.str.startswith("__", na=False)).to_numpy(dtype=object)


def _memcpy_api(host_name: np.ndarray, details: np.ndarray) -> np.ndarray:
    """``MemcpyH2D`` + ``async:1`` -> ``cuMemcpyHtoDAsync`` (per distinct pair)."""
    pairs = pd.DataFrame({"n": host_name, "d": details})
    keys = pairs.drop_duplicates().copy()
    keys["api"] = [f"cuMemcpy{next((v for k, v in _COPY_KIND.items() if k in n), '')}"
                   f"{'Async' if 'async:1' in d else ''}"
                   for n, d in keys.itertuples(index=False)]
    return pairs.merge(keys, on=["n", "d"], how="left")["api"].to_numpy(dtype=object)
