"""XSpace events -> base rows: what each event is, in named steps.

``planes.py`` reads the planes into ``Rows`` (column lists plus the wanted stats); here
they become the base table ``normalize.finish`` takes: device work (kernels, copies,
sets), the host calls that launched it, host framework ops and steps. The module
docstring of ``planes.py`` says which event becomes which row and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from traceviz.algos.categorical import as_list, each, per_distinct, text_categorical
from traceviz.algos.intervals import innermost_enclosing
from traceviz.parsers.normalize import BASE_COLUMNS
from traceviz.parsers.numbers import INT32, checked_ints
from traceviz.table.copy_names import copy_name
from traceviz.table.launch_apis import launch_kind

_OP_EVENT = re.compile(r"^([^:\s]+):([A-Za-z_][\w]*)$")   # "node/name:Type"
_RUNTIME_API = r"^(?:hip|cuda|cu)[A-Z]\w*$"  # hipStreamWaitEvent; not cutlass_80_..., cudnn
_SIZE = re.compile(r"(?:size|num_bytes):(\d+)")
_COPY_KIND = {"H2D": "HtoD", "D2H": "DtoH", "D2D": "DtoD", "P2P": "DtoD"}
_HLO_SUFFIX = r"(_\d+)?(\.\d+)?$"  # TF's and XLA's uniquifiers: "MatMul_1.30" -> "MatMul"


@dataclass
class Rows:
    """Column lists for one XSpace, built line by line."""

    cols: dict[str, list] = field(default_factory=lambda: {
        c: [] for c in ("kind", "name", "ts_ns", "dur_ns", "pid", "tid", "device", "stream",
                        "line")})
    stats: dict[str, dict] = field(default_factory=dict)
    bad: np.ndarray | None = None  # rows with a number out of range, dropped
    threads: dict[str, str] = field(default_factory=dict)  # "pid:tid" -> host line's name
    names: dict[str, int] = field(default_factory=dict)  # event name -> its code in "name"

    def name_code(self, name: str) -> int:
        return self.names.setdefault(name, len(self.names))

    def stat(self, name: str, default, dtype=object) -> np.ndarray:
        """One stat per row, ``default`` where absent; a value of the wrong type (text in
        a number stat, a number in a text stat) reads as what it can be, else the
        default."""
        out = np.full(len(self.cols["kind"]), default, dtype=dtype)
        found = self.stats.get(name)
        if found:
            idx = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
            values = list(found.values())
            if dtype is object:
                out[idx] = values if all(isinstance(v, str) for v in values) else [
                    v if isinstance(v, str) else default if v is None
                    else v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                    for v in values]
            else:
                out[idx] = checked_ints(values, default=default)[0]
        return out


def to_base(rows: Rows) -> pd.DataFrame:
    """The base rows of one XSpace (``normalize.BASE_COLUMNS`` plus op_hint, details);
    rows with an out-of-range number are dropped and marked in ``rows.bad``."""
    ev = _timed_rows(rows)
    where = ev["where"].to_numpy()
    is_dev, is_host = where == "device", where == "host"
    names = ev["name"].array
    name = np.asarray(names, dtype=object)  # relabelled in place by the steps below
    corr = rows.stat("correlation_id", -1, np.int64)

    work = _device_work(rows, names, is_dev)
    kind = work.kind
    copies = np.flatnonzero(is_dev & (kind == "memcpy"))
    name[copies] = _copy_names(name[copies], work.memcpy_details.to_numpy()[copies])
    launch, other_api = _launch_calls(names, name, kind, work, corr, is_dev, is_host)
    is_op, hlo_name = _host_ops(rows, ev, names, name, is_host & ~launch)
    step, is_step = _steps(rows, name, where, is_dev, is_host)

    kind[launch | other_api] = "runtime"
    kind[is_step] = "step"
    name[is_step] = ("step " + pd.Series(step[is_step]).astype(str)).to_numpy(dtype=object)
    kind[is_op & ~is_step] = "op"
    other_host = is_host & ~launch & ~other_api & ~is_op & ~is_step
    kind[other_host] = "annotation"
    memory, mem_device, mem_size, mem_total = _memory_events(rows, name, is_host, ev)
    kind[memory] = "memory"
    keep = ~(other_host & ~memory & (ev["dur_ns"].to_numpy() <= 0))  # instants: marks
    keep &= ~np.asarray(rows.bad, dtype=bool)

    base = pd.DataFrame({
        "kind": kind, "name": text_categorical(name, keep_objects=True), "ts_ns": ev["ts_ns"],
        "dur_ns": ev["dur_ns"],
        "pid": ev["pid"], "tid": ev["tid"], "device": ev["device"], "stream": ev["stream"],
        "correlation": np.where(launch | is_dev, corr, -1), "step": step,
        "bytes": np.where(memory, mem_size, work.nbytes),
    })[list(BASE_COLUMNS)]
    base["device"] = np.where(memory, mem_device, base["device"])
    base["mem_total"] = np.where(memory, mem_total, -1)
    # a kernel's op from its own stats: TF's op type, else (JAX, XLA) its HLO instruction
    tf_op = rows.stat("tf_op", "")
    op_label = np.where(tf_op != "", tf_op, rows.stat("annotation", ""))
    hint = per_distinct(text_categorical(op_label, keep_objects=True), _label_type, fill="")
    hint = np.where(hint == "", hlo_name, hint)
    base["op_hint"] = text_categorical(np.where(is_dev, hint, ""))
    recorded = rows.stat("kernel_details", "")
    cost = _xla_cost(rows)
    both = (cost != "") & (recorded != "")
    details = np.where(cost == "", recorded, cost)
    details[both] = _per_pair(recorded[both], cost[both], lambda d, c: f"{d} {c}")
    base["details"] = text_categorical(np.where(is_dev & (kind == "kernel"), details, ""))
    return base[keep].reset_index(drop=True)


HOST_DEVICE_STRIDE = 1000  # a second host's GPU N is device 1000 + N
# TF's allocator events on the host plane: a signed size, the allocator's total after it
_MEMORY = {"MemoryAllocation": 1, "MemoryDeallocation": -1}
_GPU_ALLOCATOR = re.compile(r"^GPU_(\d+)_bfc$")


def _memory_events(rows: Rows, name: np.ndarray, is_host: np.ndarray, ev: pd.DataFrame
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: whether it is an allocator event, its device (a ``GPU_N_bfc`` allocator
    is GPU N of its host, any other allocator the host's memory, -1), signed size and the
    allocator's total after it (``bytes_allocated``)."""
    sign = np.zeros(len(name), dtype=np.int64)
    for event, signed in _MEMORY.items():  # compared by object: no text made per row
        sign[name == event] = signed
    size = rows.stat("allocation_bytes", -1, np.int64)
    memory = is_host & (sign != 0) & (size >= 0)
    allocator = text_categorical(rows.stat("allocator_name", ""), keep_objects=True)
    gpu = per_distinct(allocator, each(_gpu_of_allocator), fill=-1).astype(np.int64)
    host = ev["pid"].to_numpy(np.int64)
    device = np.where(gpu >= 0, gpu + HOST_DEVICE_STRIDE * np.maximum(host, 0), -1)
    return memory, device, sign * size, rows.stat("bytes_allocated", -1, np.int64)


def _gpu_of_allocator(name: str) -> int:
    m = _GPU_ALLOCATOR.match(name)
    return int(m.group(1)) if m else -1


def _xla_cost(rows: Rows) -> np.ndarray:
    """``xla_flops:F xla_bytes:B`` for device ops whose XSpace carries XLA's cost analysis
    (``flops``, ``bytes_accessed``; -1 where one is absent), else ""."""
    flops = rows.stat("flops", -1, np.int64)
    nbytes = rows.stat("bytes_accessed", -1, np.int64)
    has = (flops >= 0) | (nbytes >= 0)
    out = np.full(len(flops), "", dtype=object)
    if has.any():
        out[has] = ("xla_flops:" + pd.Series(flops[has]).astype(str) + " xla_bytes:"
                    + pd.Series(nbytes[has]).astype(str)).to_numpy(object)
    return out


def _timed_rows(rows: Rows) -> pd.DataFrame:
    """Where, name, times and places of every row, range-checked: protobuf ints are
    unbounded in Python, so times past int64 ns and device or stream numbers past int32
    mark their rows in ``rows.bad`` (dropped at the end, and counted)."""
    c = rows.cols
    ts, bad = checked_ints(c["ts_ns"])
    dur, bad_dur = checked_ints(c["dur_ns"])
    device, bad_dev = checked_ints(c["device"], bounds=INT32)
    stream, bad_stream = checked_ints(c["stream"], bounds=INT32)
    rows.bad = bad | bad_dur | bad_dev | bad_stream
    return pd.DataFrame({
        "where": pd.Categorical(c["kind"]),
        "name": pd.Categorical.from_codes(np.asarray(c["name"], dtype=np.int64), validate=False,
                                          categories=pd.Index(list(rows.names), dtype=object)),
        "ts_ns": ts,
        "dur_ns": np.maximum(dur, 0),
        "pid": np.array(c["pid"], dtype=np.int64),
        "tid": checked_ints(c["tid"])[0],
        "device": device.astype(np.int32),
        "stream": stream.astype(np.int32),
    })


class _DeviceWork(NamedTuple):
    kind: np.ndarray          # "kernel" / "memcpy" / "memset" (device rows; host rows too)
    nbytes: np.ndarray        # a copy's or set's size, -1 elsewhere
    named_memcpy: np.ndarray  # the event's name says Memcpy (host or device)
    named_memset: np.ndarray
    memcpy_details: pd.Series


def _device_work(rows: Rows, names: pd.Categorical, is_dev: np.ndarray) -> _DeviceWork:
    """Kernels, copies and sets: by their details stat, else by their name."""
    memcpy = pd.Series(text_categorical(rows.stat("memcpy_details", ""), keep_objects=True))
    memset = pd.Series(text_categorical(rows.stat("memset_details", ""), keep_objects=True))
    named_memcpy = per_distinct(names, lambda u: u.str.startswith("Memcpy"))
    named_memset = per_distinct(names, lambda u: u.str.startswith("Memset"))
    is_memcpy = is_dev & ((memcpy != "").to_numpy() | named_memcpy)
    is_memset = is_dev & ~is_memcpy & ((memset != "").to_numpy() | named_memset)
    kind = np.where(is_memcpy, "memcpy", np.where(is_memset, "memset", "kernel")).astype(object)
    nbytes = np.where(is_memcpy, per_distinct(memcpy, _size),
                      np.where(is_memset, per_distinct(memset, _size), -1))
    return _DeviceWork(kind, nbytes, named_memcpy, named_memset, memcpy)


def _launch_calls(names: pd.Categorical, name: np.ndarray, kind: np.ndarray,
                  work: _DeviceWork, corr: np.ndarray, is_dev: np.ndarray,
                  is_host: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host events with a correlation id: launch calls, renamed after the driver API of
    the work they launched (``name`` is changed in place); and other runtime calls (a
    host event named after another API, hipStreamWaitEvent under ROCm, launches
    nothing whatever id it carries). Returns (launch, other_api) row masks."""
    other_api = per_distinct(names, lambda u: np.asarray(u.str.match(_RUNTIME_API), bool)
                             & ~np.array([launch_kind(str(v)) is not None for v in u], bool))
    other_api = is_host & (corr >= 0) & other_api.astype(bool)
    launch = is_host & (corr >= 0) & ~other_api
    dev_kind = pd.Series(kind[is_dev], index=corr[is_dev]).groupby(level=0).first()
    copies = work.memcpy_details.array  # codes: one text per distinct details
    dev_copy = pd.Series(copies.codes[is_dev], index=corr[is_dev]).groupby(level=0).first()
    launched = dev_kind.reindex(corr[launch]).to_numpy()
    host_name = name[launch]
    launched = np.where(pd.isna(launched),
                        np.where(work.named_memcpy[launch], "memcpy",
                                 np.where(work.named_memset[launch], "memset", "kernel")),
                        launched)
    code = dev_copy.reindex(corr[launch]).fillna(-1).to_numpy(np.int64)
    copy_info = np.append(copies.categories.to_numpy(object), "")[code]
    api = np.where(launched == "kernel", "cuLaunchKernel",
                   np.where(launched == "memset", "cuMemsetD8Async",
                            _memcpy_api(host_name, copy_info)))
    # ROCm's tracer names host events after the API it saw (hipModuleLaunchKernel...):
    # a recorded API name stays as it is; XLA's command buffers are graph launches
    # ("cuGraphLaunch (CudaGraph:9)": one call, every kernel of the graph)
    host_names = text_categorical(host_name, keep_objects=True)
    graph = per_distinct(host_names, lambda u: np.array([_graph_api(str(v)) for v in u],
                                                       dtype=object), fill="")
    recorded = per_distinct(host_names, each(lambda v: launch_kind(v) is not None), fill=False)
    name[launch] = np.where(graph != "", graph,
                            np.where(recorded.astype(bool), host_name, api))
    return launch, other_api


_GRAPH_LAUNCH = re.compile(r"^((?:cuda|cu|hip)GraphLaunch)\b")


def _graph_api(name: str) -> str:
    """``cuGraphLaunch (CudaGraph:9)`` -> ``cuGraphLaunch``; "" for other calls."""
    m = _GRAPH_LAUNCH.match(name)
    return m.group(1) if m else ""


def _host_ops(rows: Rows, ev: pd.DataFrame, names: pd.Categorical, name: np.ndarray,
              candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host framework ops among ``candidates``, renamed by op type in place: executor
    events ``node:Type``, XLA:CPU thunks (``hlo_op``), eager ``EagerKernelExecute``
    inside a single-op ``EagerExecute``. Returns (is_op, each row's HLO name)."""
    op_type = per_distinct(names, _op_event_type)
    is_op = candidates & pd.notna(op_type)
    name[is_op] = op_type[is_op]
    hlo = pd.Series(text_categorical(rows.stat("hlo_op", ""), keep_objects=True))
    hlo_name = per_distinct(hlo, lambda u: u.str.replace(_HLO_SUFFIX, "", regex=True), fill="")
    is_hlo = candidates & ~is_op & (hlo != "").to_numpy()
    name[is_hlo] = hlo_name[is_hlo]
    is_op |= is_hlo

    eager = np.flatnonzero(candidates & (name == "EagerExecute"))
    kexec = np.flatnonzero(candidates & (name == "EagerKernelExecute"))
    ts, dur, tid = ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy(), ev["tid"].to_numpy()
    enc = innermost_enclosing(tid[eager], ts[eager], ts[eager] + dur[eager], tid[kexec],
                              ts[kexec])
    ok = enc >= 0
    kexec, parent = kexec[ok], eager[enc[ok]]
    is_func = rows.stat("is_func", 0, np.int64)
    eager_op = rows.stat("eager_op", "")
    single = (is_func[parent] == 0) & (eager_op[parent] != "") \
        & ~pd.Series(eager_op[parent], dtype=object).str.startswith("__").to_numpy(bool)
    kexec, parent = kexec[single], parent[single]
    name[kexec] = eager_op[parent]
    is_op[kexec] = True
    return is_op, hlo_name


def _steps(rows: Rows, name: np.ndarray, where: np.ndarray, is_dev: np.ndarray,
           is_host: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's step number (-1: none) and the rows that are steps: host events with
    a ``step_num`` stat, else the device planes' ``Steps`` line, whose ``group_id``
    also tags each kernel of that step."""
    step_num = rows.stat("step_num", -1, np.int64)
    step = np.full(len(name), -1, dtype=np.int64)
    host_steps = is_host & (step_num >= 0)
    if host_steps.any():
        step[host_steps] = step_num[host_steps]
        return step, host_steps
    is_step = where == "device_steps"
    group = rows.stat("group_id", -1, np.int64)
    step_name = rows.stat("step_name", "")
    label = np.where(step_name[is_step] != "", step_name[is_step], name[is_step])
    numeric = per_distinct(text_categorical(label, keep_objects=True), lambda u: pd.to_numeric(
        u.to_series(), errors="coerce").to_numpy(np.float64), fill=np.nan)
    step[is_step] = np.where(np.isnan(numeric), group[is_step],
                             np.nan_to_num(numeric).astype(np.int64))
    by_group = pd.Series(step[is_step], index=group[is_step]).groupby(level=0).first()
    tagged = is_dev & (group >= 0)
    step[tagged] = by_group.reindex(group[tagged]).fillna(-1).to_numpy(np.int64)
    return step, is_step


def _label_type(labels: pd.Index) -> np.ndarray:
    """``outer::node:Type#shape=...#`` -> ``Type``; "" when the label names none."""
    return (labels.to_series().str.replace(r"#.*?#", "", regex=True).str.split("::").str[-1]
            .str.extract(r":([A-Za-z_]\w*)$", expand=False).fillna("").to_numpy(dtype=object))


def _size(details: pd.Index) -> np.ndarray:
    """``size:N`` (memcpy_details) or ``num_bytes:N`` (memset_details) -> N, else -1."""
    found = details.to_series().str.extract(_SIZE, expand=False)
    return pd.to_numeric(found, errors="coerce").fillna(-1).to_numpy(np.int64)


def _op_event_type(names: pd.Index) -> np.ndarray:
    """``node/name:Type`` -> ``Type``; NaN for other events and for tf.function calls
    (``__inference_f_12:__inference_f_12`` runs its ops elsewhere: not an op itself)."""
    # Python's re over the distinct names: pandas' extract copied each name twice, and
    # one name may be as large as the file
    found = [_OP_EVENT.search(v) for v in as_list(names)]
    return np.array([m.group(2) if m and not m.group(2).startswith("__") else np.nan
                     for m in found], dtype=object)


_KINDS = re.compile(r"kind_src:(\w+) kind_dst:(\w+)")
_ROW_DIRECTION = {"H2D": "HtoD", "D2H": "DtoH", "D2D": "DtoD", "P2P": "PtoP"}


def _copy_names(recorded: np.ndarray, details: np.ndarray) -> np.ndarray:
    """``MemcpyH2D`` + ``kind_src:pageable kind_dst:device ...`` -> Kineto's name,
    ``Memcpy HtoD (Pageable -> Device)`` (``table/copy_names.py``); without the kinds (TF
    before 2.5 recorded none) ``Memcpy HtoD``; a name that says no direction is kept,
    with the kinds where recorded. Per distinct pair."""
    return _per_pair(recorded, details, _copy_name)


def _copy_name(recorded: str, details: str) -> str:
    m = re.fullmatch(r"Memcpy(H2D|D2H|D2D|P2P)", recorded)
    k = _KINDS.search(details)
    src, dst = (None, None) if k is None else (
        k.group(i).replace("_", " ").title() for i in (1, 2))
    if m is not None:
        return copy_name(_ROW_DIRECTION[m.group(1)], src, dst)
    return recorded if src is None else f"{recorded} ({src} -> {dst})"


def _memcpy_api(host_name: np.ndarray, details: np.ndarray) -> np.ndarray:
    """``MemcpyH2D`` + ``async:1`` -> ``cuMemcpyHtoDAsync`` (per distinct pair)."""
    return _per_pair(host_name, details, lambda n, d: (
        f"cuMemcpy{next((v for k, v in _COPY_KIND.items() if k in n), '')}"
        f"{'Async' if 'async:1' in d else ''}"))


def _per_pair(a: np.ndarray, b: np.ndarray, fn: Callable[[str, str], str]) -> np.ndarray:
    """``fn(a, b)`` once per distinct pair of texts, one result per row: the pairs found
    by codes, so a text that many rows share is never copied per row (a frame of texts
    makes an Arrow string of every row: pandas 3)."""
    a_code, a_text = pd.factorize(np.asarray(a, dtype=object))
    b_code, b_text = pd.factorize(np.asarray(b, dtype=object))
    a_text = np.append("", a_text.astype(object))  # code -1, a missing value: ""
    b_text = np.append("", b_text.astype(object))
    pairs, at = np.unique((a_code.astype(np.int64) + 1) * len(b_text) + b_code + 1,
                          return_inverse=True)
    first, second = np.divmod(pairs, len(b_text))
    out = np.array([fn(str(a_text[i]), str(b_text[j]))
                    for i, j in zip(first.tolist(), second.tolist(), strict=True)], dtype=object)
    return out[at.reshape(-1)]
