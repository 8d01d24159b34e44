"""Nsight Systems exports (.sqlite, --type arrow file, parquetdir/arrowdir, .nsys-rep).

Rows come from the CUPTI activity tables (kernels, memcpy, memset, runtime/driver calls)
and from NVTX_EVENTS. nsys numbers correlation ids per process, so launches are joined to
device rows on (process, correlationId): a device row names its process in ``globalPid``,
a call in ``globalTid``, whose low 24 bits are the thread id.

NVTX ranges become annotations, except two kinds the rest of traceviz relies on: ranges
named like step markers (``step 3``, ``ProfilerStep#3``) become ``step`` rows, and
PyTorch-style op ranges (``aten::mm, seq = 4, op_id = 7``, as emit_nvtx writes them)
become ``op`` rows named ``aten::mm``, so kernels get their op and casts are found."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.parsers.normalize import BASE_COLUMNS, finish, launch_details
from traceviz.parsers.nsys.checks import (
    KERNEL,
    RUNTIME,
    UNNAMED_CALL,
    UNNAMED_KERNEL,
    check_names,
    export_notes,
)
from traceviz.parsers.nsys.export import export_sqlite
from traceviz.parsers.nsys.nvtx import (
    PAYLOAD_COLUMNS,
    categorical,
    domains,
    numbers_only,
    payload,
    range_details,
    range_texts,
)
from traceviz.parsers.nsys.osrt import cpu_samples, off_cpu, os_calls
from traceviz.parsers.nsys.ranges_sql import ranges_of, ranges_trace, wanted
from traceviz.parsers.nsys.table_access import (
    ExportTables,
    SqliteTables,
    lookup_strings,
    open_tables,
    text_values,
)
from traceviz.parsers.numbers import INT32, checked_ints
from traceviz.parsers.nvtx_text import read_ranges
from traceviz.table.meta import TraceMeta
from traceviz.trace import Trace

MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX = "NVTX_EVENTS"
ACTIVITY_TABLES = (KERNEL, RUNTIME, MEMCPY, MEMSET, NVTX)

PROCESS_BITS = np.int64(~0xFFFFFF)  # globalTid & 0xFFFFFFFFFF000000 == globalPid
# NvtxPushPopRange, NvtxStartEndRange and their NVTXT twins (ENUM_NSYS_EVENT_TYPE)
NVTX_RANGE_TYPES = (59, 60, 70, 71)
NVTX_DOMAIN_CREATE = 75
NVTX_STARTEND_TYPES = (60, 71)
# the export's ENUM_CUDA_MEMCPY_OPER (CUpti_ActivityMemcpyKind), in Kineto's spelling;
# 11-13 are unified-memory migrations, which Kineto does not record as copies
MEMCPY_NAMES = {
    0: "Memcpy Unknown", 1: "Memcpy HtoD", 2: "Memcpy DtoH", 3: "Memcpy HtoA",
    4: "Memcpy AtoH", 5: "Memcpy AtoA", 6: "Memcpy AtoD", 7: "Memcpy DtoA",
    8: "Memcpy DtoD", 9: "Memcpy HtoH", 10: "Memcpy PtoP",
    11: "Memcpy HtoD (Unified)", 12: "Memcpy DtoH (Unified)", 13: "Memcpy DtoD (Unified)",
}
# the export's ENUM_CUDA_MEM_KIND (srcKind, dstKind), numbered from Pageable = 0 unlike
# CUPTI's own enum (Unknown = 0); the same in every export read here, those without the
# ENUM table too; the labels are Kineto's
MEMORY_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
                5: "Device Static", 6: "Managed Static", 7: "Unknown"}


def parse(path: Path, fmt: str) -> Trace:
    """Read an nsys export; ``fmt`` is ``nsys-sqlite``, ``nsys-arrow``, ``nsys-dir`` or
    ``nsys-rep`` (exported to SQLite in a temporary folder with the installed nsys)."""
    path = Path(path)
    if fmt == "nsys-rep":
        with tempfile.TemporaryDirectory(prefix="traceviz-nsys-") as tmp:
            sqlite = export_sqlite(path, Path(tmp) / "report.sqlite")
            trace = parse(sqlite, "nsys-sqlite")
        trace.meta["source_file"] = str(path)
        return trace
    with open_tables(path, fmt) as tables:
        if not tables.names & {*ACTIVITY_TABLES, "StringIds"}:
            raise TraceVizError(f"{path}: no Nsight Systems tables in it (StringIds, "
                                "CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS)")
        strings = _strings(tables)
        check_names(tables, strings, path)
        apart = ranges_of(tables, strings) \
            if wanted() and isinstance(tables, SqliteTables) else None
        if apart is not None:  # NVTX ranges alone: the Ranges section reads them apart
            return ranges_trace(apart, _meta(tables, path, fmt),
                                export_notes(_Rows(), tables.odd_names))
        b = _Rows()
        runtime = _runtime(tables, strings, b)
        # the threads that made CUDA calls: what they did outside CUDA is kept
        launchers = np.unique(runtime["link_pid"].to_numpy(np.int64)
                              | runtime["tid"].to_numpy(np.int64)) if len(runtime) \
            else np.zeros(0, np.int64)
        frames = [_kernels(tables, strings, b, path), _memcpy(tables, b), _memset(tables, b),
                  runtime, _nvtx(tables, strings, b), _gpu_memory(tables, b),
                  os_calls(tables, strings, b, launchers), off_cpu(tables, b, launchers),
                  cpu_samples(tables, strings, b, launchers)]
        meta = _meta(tables, path, fmt)
        odd = tables.odd_names
    notes = export_notes(b, odd)
    if notes:
        meta["notes"] = notes
    frames = [f for f in frames if len(f)]
    if not frames:
        raise TraceVizError(f"{path}: the export holds no CUDA activity and no NVTX ranges "
                            "(was it profiled with --trace=cuda,nvtx?)")
    base = pd.concat(frames, ignore_index=True)
    base["name"] = base["name"].astype("category")
    return finish(base, meta, link_pid="link_pid")


# --- tables -> base rows -------------------------------------------------------------

class _Rows:
    """Builds base rows from one table at a time, checking every number read; rows with
    a value out of range are dropped and counted (never wrapped into wrong values)."""

    def __init__(self) -> None:
        self.dropped = 0
        self.unnamed = 0  # kernels without a name in the export
        self.unnamed_calls = 0  # runtime calls without one
        self.wrong: dict[str, int] = {}  # NVTX_EVENTS.<column>: values that are no number
        self.no_time = 0  # activities without a start or end, or ending before they start

    def ints(self, df: pd.DataFrame, col: str, default: int = -1,
             bad: np.ndarray | None = None) -> np.ndarray:
        values, out_of_range = checked_ints(df[col], default=default)
        if bad is not None:
            bad |= out_of_range
        return values

    def rows(self, kind: str | np.ndarray, name: np.ndarray, df: pd.DataFrame, *,
             pid: np.ndarray, tid: np.ndarray, device: np.ndarray, stream: np.ndarray,
             link_pid: np.ndarray, bad: np.ndarray, correlation: np.ndarray | None = None,
             step: np.ndarray | None = None, bytes_: np.ndarray | None = None,
             details: np.ndarray | None = None, ranges: bool = False) -> pd.DataFrame:
        start = self.ints(df, "start", bad=bad)
        end = self.ints(df, "end", bad=bad)
        bad |= (device < INT32[0]) | (device > INT32[1]) | (stream < INT32[0]) | \
            (stream > INT32[1])
        n = len(df)
        self.dropped += int(bad.sum())
        keep = ~bad & (start >= 0) & (end >= start)
        # an NVTX range left open has no end (and a mark none either): not worth a note;
        # an activity without a time, or ending before it starts, is a damaged row
        if not ranges:
            self.no_time += int((~bad & ~keep).sum())
        every = bool(keep.all())

        def kept(values: np.ndarray | pd.Categorical) -> np.ndarray | pd.Categorical:
            # filtered before the frame is made; a categorical stays one (pandas would
            # turn an object array of a million texts into Arrow strings, one by one)
            return values if every else values[keep]

        columns = {
            "kind": np.full(n, kind, dtype=object) if isinstance(kind, str) else kind,
            "name": name,
            "ts_ns": start,
            "dur_ns": np.maximum(end - start, 0),
            "pid": pid, "tid": tid, "device": device, "stream": stream,
            "correlation": correlation if correlation is not None else np.full(n, -1),
            "step": step if step is not None else np.full(n, -1),
            "bytes": bytes_ if bytes_ is not None else np.full(n, -1),
            "link_pid": link_pid,
            "details": details if details is not None else np.full(n, "", dtype=object),
        }
        return pd.DataFrame({c: kept(columns[c])
                             for c in [*BASE_COLUMNS, "link_pid", "details"]})

    def device_rows(self, kind: str, name: np.ndarray, df: pd.DataFrame,
                    bytes_col: str | None = None, details: np.ndarray | None = None
                    ) -> pd.DataFrame:
        n = len(df)
        bad = np.zeros(n, dtype=bool)
        return self.rows(kind, name, df, pid=np.full(n, -1), tid=np.full(n, -1),
                         device=self.ints(df, "deviceId", bad=bad),
                         stream=self.ints(df, "streamId", bad=bad),
                         link_pid=self.ints(df, "globalPid", bad=bad), bad=bad,
                         correlation=self.ints(df, "correlationId", bad=bad),
                         bytes_=None if bytes_col is None else self.ints(df, bytes_col, bad=bad),
                         details=details)


def _strings(tables: ExportTables) -> pd.Series:
    s = tables.read("StringIds", ["id", "value"])
    if s.empty:
        return pd.Series(dtype=object)
    ids, bad = checked_ints(s["id"])
    keep = (ids >= 0) & ~bad  # NULL or odd ids name nothing
    strings = pd.Series(text_values(s["value"])[keep], index=ids[keep])
    return strings[~strings.index.duplicated(keep="first")]


_DEVICE_COLS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid"]
_LAUNCH_COLS = ["registersPerThread", "staticSharedMemory", "dynamicSharedMemory",
                "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"]




def _kernels(tables: ExportTables, strings: pd.Series, b: _Rows, path: Path) -> pd.DataFrame:
    name_cols = ["demangledName", "shortName", "mangledName"]
    df = tables.read(KERNEL, _DEVICE_COLS + name_cols + _LAUNCH_COLS)
    if df.empty:
        return df
    if not set(name_cols) & set(tables.columns(KERNEL)):
        # an export that cannot say which kernels ran is not a profile to analyze
        raise TraceVizError(f"{path}: the kernel table {KERNEL} has no name column "
                            f"({', '.join(name_cols)}): an incomplete export; export the "
                            "report again")
    names = np.full(len(df), None, dtype=object)
    for col in name_cols:  # the best name each kernel has
        found = lookup_strings(strings, df[col], None)
        names = np.where(pd.isna(names), found, names)
    unnamed = pd.isna(names)
    if unnamed.any():  # said in the notes, not only shown as a name
        b.unnamed += int(unnamed.sum())
    names = np.where(unnamed, UNNAMED_KERNEL, names)
    details = None
    if all(df[c].notna().any() for c in _LAUNCH_COLS):
        details = launch_details(
            b.ints(df, "registersPerThread"),
            b.ints(df, "staticSharedMemory", 0) + b.ints(df, "dynamicSharedMemory", 0),
            tuple(b.ints(df, f"grid{a}") for a in "XYZ"),
            tuple(b.ints(df, f"block{a}") for a in "XYZ"))
    return b.device_rows("kernel", names, df, details=details)


def _memcpy(tables: ExportTables, b: _Rows) -> pd.DataFrame:
    df = tables.read(MEMCPY, _DEVICE_COLS + ["copyKind", "bytes", "srcKind", "dstKind"])
    if df.empty:
        return df
    names = memcpy_names(b.ints(df, "copyKind", 0), b.ints(df, "srcKind"),
                         b.ints(df, "dstKind"))
    return b.device_rows("memcpy", names, df, "bytes")


def memcpy_names(kind: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Kineto's names (``Memcpy HtoD (Pageable -> Device)``) from the export's copy kind
    and memory kinds (-1: not recorded, an older export: ``Memcpy HtoD``), once per
    distinct triple."""
    triples = pd.DataFrame({"k": kind, "s": src, "d": dst})
    codes, keys = pd.factorize(pd.MultiIndex.from_frame(triples))
    names = np.array([
        MEMCPY_NAMES.get(k, "Memcpy") if k >= 11 or s < 0 or d < 0 or k not in MEMCPY_NAMES
        else f"{MEMCPY_NAMES[k]} ({MEMORY_KINDS.get(s, 'Unknown')} -> "
             f"{MEMORY_KINDS.get(d, 'Unknown')})"
        for k, s, d in keys], dtype=object)
    return names[codes]


def _memset(tables: ExportTables, b: _Rows) -> pd.DataFrame:
    df = tables.read(MEMSET, _DEVICE_COLS + ["bytes"])
    if df.empty:
        return df
    return b.device_rows("memset", np.full(len(df), "Memset", dtype=object), df, "bytes")


# nsys --cuda-memory-usage=true: CUDA allocations and frees (schema: the User Guide's
# CUDA_GPU_MEMORY_USAGE_EVENTS; memoryOperationType 0 allocates, 1 frees; memKind 0 and 1
# are pageable and pinned host memory, as the export's own ENUM_CUDA_MEM_KIND says)
GPU_MEMORY = "CUDA_GPU_MEMORY_USAGE_EVENTS"
_HOST_MEMORY_KINDS = (0, 1)


def _gpu_memory(tables: ExportTables, b: _Rows) -> pd.DataFrame:
    """Allocator events as ``memory`` rows: signed sizes; the export gives no running
    total, so peaks count from the first event."""
    df = tables.read(GPU_MEMORY, ["start", "globalPid", "deviceId", "bytes", "memKind",
                                  "memoryOperationType"])
    if df.empty:
        return df
    df = df.assign(end=df["start"])
    n = len(df)
    bad = np.zeros(n, dtype=bool)
    gpid = b.ints(df, "globalPid", bad=bad)
    size = b.ints(df, "bytes", 0, bad=bad)
    sign = np.where(b.ints(df, "memoryOperationType", 0) == 1, -1, 1)
    host = np.isin(b.ints(df, "memKind", 0), _HOST_MEMORY_KINDS)
    device = np.where(host, -1, b.ints(df, "deviceId", -1, bad=bad))
    pid = (gpid >> 24) & 0xFFFFFF
    return b.rows("memory", np.full(n, "[memory]", dtype=object), df, pid=pid,
                  tid=np.full(n, -1), device=device, stream=np.full(n, -1),
                  link_pid=gpid & PROCESS_BITS, bad=bad, bytes_=sign * size)


def _host_ids(gtid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pid, tid, process key) from nsys' globalTid."""
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF, gtid & PROCESS_BITS


def _runtime(tables: ExportTables, strings: pd.Series, b: _Rows) -> pd.DataFrame:
    df = tables.read(RUNTIME, ["start", "end", "globalTid", "correlationId", "nameId"])
    if df.empty:
        return df
    names = lookup_strings(strings, df["nameId"], None)
    unnamed = pd.isna(names)
    b.unnamed_calls += int(unnamed.sum())  # said in the notes, not only shown as a name
    names = np.where(unnamed, UNNAMED_CALL, names)
    n = len(df)
    bad = np.zeros(n, dtype=bool)
    pid, tid, key = _host_ids(b.ints(df, "globalTid", bad=bad))
    return b.rows("runtime", names, df, pid=pid, tid=tid, device=np.full(n, -1),
                  stream=np.full(n, -1), link_pid=key, bad=bad,
                  correlation=b.ints(df, "correlationId", bad=bad))


def _nvtx(tables: ExportTables, strings: pd.Series, b: _Rows) -> pd.DataFrame:
    # category and payload columns are NULL in most exports: read those holding a value
    extra = tables.holding_values(NVTX, ["category", *PAYLOAD_COLUMNS])
    df = tables.read(NVTX, ["start", "end", "eventType", "text", "textId", "globalTid",
                            "domainId", *extra])
    if df.empty:
        return df
    etype = b.ints(df, "eventType")
    text_code, texts = range_texts(df, strings)
    domain_id = b.ints(df, "domainId", 0)
    process = b.ints(df, "globalTid", 0) & PROCESS_BITS
    created = etype == NVTX_DOMAIN_CREATE
    made = pd.DataFrame({"p": process[created], "d": domain_id[created],
                         "name": texts[text_code[created]]})
    ranges = np.isin(etype, NVTX_RANGE_TYPES)
    # a range still open when recording stopped lasts to the export's last NVTX time, as
    # in nsys' reports (nvtxsum, nvtxgpuproj)
    if df["end"].isna().any():
        last = max(b.ints(df, "start", 0).max(), b.ints(df, "end", 0).max())
        df = df.assign(end=df["end"].fillna(last))
    if not ranges.all():
        df = df[ranges]
    startend = np.isin(etype[ranges], NVTX_STARTEND_TYPES)
    text_code, domain_id, process = text_code[ranges], domain_id[ranges], process[ranges]
    # each distinct text read once (an emit_nvtx run's are all distinct, most exports'
    # are a few dozen), each distinct (text, domain) named once: the rows take them
    step_no, kind, name, details = read_ranges(pd.Series(texts, dtype=object))
    # a domain is registered per process: "MPI:MPI_Send", as nsys' reports write it
    d_code, d_names = domains(made, process, domain_id)
    pair = text_code * (len(d_names) + 1) + (d_code + 1)
    pairs, at = np.unique(pair, return_inverse=True)
    p_text, p_dom = np.divmod(pairs, len(d_names) + 1)
    p_name = name[p_text].astype(object)
    qualified = (p_dom > 0) & (kind[p_text] == "annotation")
    p_name[qualified] = d_names[p_dom[qualified] - 1] + ":" + p_name[qualified]
    step_no = step_no[text_code]
    ann = kind[text_code] == "annotation"
    pay = payload(df, b.wrong)
    range_text = range_details(
        startend[ann], d_code[ann], d_names,
        numbers_only(df["category"], "category", b.wrong).to_numpy(object)[ann]
        if "category" in df else None,
        None if pay is None else pay[ann])
    details = categorical(details, text_code, range_text, ann)
    kind = categorical(kind, text_code)
    name = categorical(p_name, at.reshape(-1))
    n = len(df)
    bad = np.zeros(n, dtype=bool)
    pid, tid, key = _host_ids(b.ints(df, "globalTid", bad=bad))
    return b.rows(kind, name, df, pid=pid, tid=tid, device=np.full(n, -1),
                  stream=np.full(n, -1), link_pid=key, bad=bad,
                  step=step_no, details=details, ranges=True)


def _meta(tables: ExportTables, path: Path, fmt: str) -> TraceMeta:
    meta: TraceMeta = {"source_format": fmt, "source_file": str(path),
                  "profiler": "Nsight Systems", "devices": {}}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        info = tables.read(table, ["name", "value"])
        if info["name"].notna().any():
            kv = dict(zip(info["name"], info["value"], strict=True))
            if kv.get("EXPORT_PRODUCT_VERSION") is not None:
                meta["nsys_version"] = str(kv["EXPORT_PRODUCT_VERSION"])
            if kv.get("EXPORT_SCHEMA_VERSION") is not None:
                meta["nsys_schema"] = str(kv["EXPORT_SCHEMA_VERSION"])
            if kv.get("DERIVED_WINDOW_NS") is not None:
                meta["nsys_window_ns"] = str(kv["DERIVED_WINDOW_NS"])
    gpus = tables.read("TARGET_INFO_GPU", ["id", "cuDevice", "name"])
    # reports of older nsys exported by a newer one leave cuDevice NULL: use id then
    ids = checked_ints(gpus["cuDevice"])[0]
    ids = np.where(ids >= 0, ids, checked_ints(gpus["id"])[0])
    meta["devices"] = {str(i): str(nm) for i, nm in zip(ids, text_values(gpus["name"]), strict=True)
                       if i >= 0 and nm is not None}
    return meta
