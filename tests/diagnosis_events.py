"""The raw events a diagnosis needs, read straight from a trace file, independently of
traceviz: plain ``json``/``gzip`` for Kineto, ``sqlite3`` for Nsight Systems exports
(``.qdrep``/``.nsys-rep`` exported first with the installed ``nsys``), TensorFlow's own
``xplane_pb2`` for XSpace. No traceviz import: ``tests/diagnosis_raw.py`` builds its
expectations on these, and agreement with ``advise`` means something only if the two
share no code.

Times are integer nanoseconds. Interval sets are ``(n, 2)`` int64 arrays of sorted,
disjoint ``[start, end)`` ranges (``union`` makes them).
"""

from __future__ import annotations

import functools
import gzip
import json
import re
import sqlite3
import subprocess
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

LAUNCH = re.compile(
    r"^(cudaLaunchKernel|cudaLaunchKernelExC|cuLaunchKernel|cuLaunchKernelEx|"
    r"cudaLaunchCooperativeKernel|cuLaunchCooperativeKernel|cudaGraphLaunch|cuGraphLaunch|"
    r"hipLaunchKernel|hipExtLaunchKernel|hipModuleLaunchKernel|hipExtModuleLaunchKernel|"
    r"hipGraphLaunch)(_v\d+|_ptsz)*( \(.*\))?$")
GRAPH_LAUNCH = re.compile(r"^(cuda|cu|hip)GraphLaunch")
STEP = re.compile(r"^ProfilerStep#\d+$")
INPUT = re.compile(r"DataLoader.*__next__|IteratorGetNext|Iterator::")
# collective and point-to-point kernels: NCCL/RCCL, DeepEP's dispatch/combine/notify, NVLS
# multimem reductions, vLLM's custom all-reduce, XLA's collective ops
COMM = re.compile(r"nccl|rccl|ep::.*(dispatch|combine|notify)|multimem|cross_device_reduce|"
                  r"all[-_]?reduce|all[-_]?gather|reduce[-_]scatter|all[-_]?to[-_]?all|"
                  r"collective[-_]permute", re.I)
SOFTMAX = re.compile(r"softmax", re.I)

Intervals = np.ndarray


# ---------------------------------------------------------------- interval algebra


def union(starts, ends) -> Intervals:
    """The sorted, disjoint union of ``[start, end)`` ranges."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return np.empty((0, 2), np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    groups = np.cumsum(new) - 1
    ends = np.zeros(groups[-1] + 1, np.int64)
    np.maximum.at(ends, groups, e)
    return np.column_stack([s[new], ends])


def length(a: Intervals) -> int:
    return int((a[:, 1] - a[:, 0]).sum()) if len(a) else 0


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Where two interval sets (each disjoint) both hold."""
    if not len(a) or not len(b):
        return np.empty((0, 2), np.int64)
    t = np.r_[a[:, 0], a[:, 1], b[:, 0], b[:, 1]]
    d = np.r_[np.ones(len(a)), -np.ones(len(a)), np.ones(len(b)), -np.ones(len(b))]
    order = np.lexsort((d, t))  # ends before starts at one instant: [s, e) ranges
    t, depth = t[order], np.cumsum(d[order])
    both = depth[:-1] == 2
    return union(t[:-1][both], t[1:][both])


def minus(a: Intervals, b: Intervals) -> int:
    """Length of ``a`` not covered by ``b``."""
    return length(a) - length(intersect(a, b))


# ---------------------------------------------------------------- the events, per format


@dataclass
class Events:
    """The raw facts a diagnosis needs, one format's reading."""
    dev_start: np.ndarray  # device work: kernels, memcpy, memset
    dev_end: np.ndarray
    dev_id: np.ndarray
    dev_kernel: np.ndarray  # bool: a kernel (not a copy or set)
    dev_name: np.ndarray  # object
    dev_launched: np.ndarray  # when the call that launched the row returned (-1: not seen)
    steps: Intervals  # ProfilerStep#N host ranges (maybe empty)
    inputs: Intervals  # input-pipeline host ranges, unioned
    launches: int
    graph_launches: int
    host_span: tuple[int, int] | None  # first start, last end of any host range
    softmax_seq: int = 0  # the largest S of a softmax op over an [..., S, S] input (Kineto)
    gpu_steps: Intervals | None = None  # Kineto's device-side ProfilerStep ranges, if any
    device_steps: dict[int, Intervals] | None = None  # XSpace: each GPU's "Steps" line


def _columns(rows: list[tuple], n: int) -> list[tuple]:
    """Rows of ``n`` fields as ``n`` columns (empty ones without rows)."""
    return list(zip(*rows, strict=True)) if rows else [()] * n


def _pick(ranges: list[tuple[int, int, str]], pattern: re.Pattern) -> Intervals:
    """The union of the (start, end, name) ranges whose name matches."""
    hits = [(s, e) for s, e, n in ranges if pattern.search(n)]
    return union([s for s, _ in hits], [e for _, e in hits])


def _ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value())


def _kineto(path: Path) -> Events:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=str)  # exact: Kineto writes µs with 3 decimals
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    evs = [e for e in evs if e.get("ph") == "X" and "dur" in e]
    dev_cats = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
    dev = [e for e in evs if str(e.get("cat", "")).lower() in dev_cats]
    host = [e for e in evs if str(e.get("cat", "")).lower() not in dev_cats
            and not str(e.get("cat", "")).startswith("gpu_")]
    start = np.array([_ns(e["ts"]) for e in dev], np.int64)
    dur = np.array([_ns(e["dur"]) for e in dev], np.int64)
    runtime = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
    api = [e for e in host if str(e.get("cat", "")).lower() in runtime]
    calls = [e["name"] for e in api if LAUNCH.match(e["name"])]
    returned = {e["args"]["correlation"]: _ns(e["ts"]) + _ns(e["dur"]) for e in api
                if e.get("args", {}).get("correlation") is not None}

    def ranges(pattern: re.Pattern) -> Intervals:
        hits = [e for e in host if pattern.search(e.get("name", ""))]
        s = [_ns(e["ts"]) for e in hits]
        return union(s, [a + _ns(e["dur"]) for a, e in zip(s, hits, strict=True)])

    # a softmax over [..., S, S] is attention's scores: its S from the op's recorded shapes
    square = [d[0][-1] for e in host if e.get("name") in ("aten::softmax", "aten::_softmax")
              and (d := e.get("args", {}).get("Input Dims")) and len(d[0]) >= 2
              and d[0][-1] == d[0][-2]]
    hs = [_ns(e["ts"]) for e in host]
    he = [a + _ns(e["dur"]) for a, e in zip(hs, host, strict=True)]
    return Events(
        dev_start=start, dev_end=start + dur,
        dev_id=np.array([int(e.get("args", {}).get("device", e.get("pid", 0)) or 0)
                         for e in dev], np.int64),
        dev_kernel=np.array([str(e["cat"]).lower() == "kernel" for e in dev], bool),
        dev_name=np.array([e["name"] for e in dev], object),
        dev_launched=np.array([returned.get(e.get("args", {}).get("correlation"), -1)
                               for e in dev], np.int64),
        steps=ranges(STEP), inputs=ranges(INPUT), launches=len(calls),
        graph_launches=sum(bool(GRAPH_LAUNCH.match(c)) for c in calls),
        host_span=(min(hs), max(he)) if hs else None, softmax_seq=max(square, default=0),
        gpu_steps=_pick([(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]) for e in evs
                         if e.get("cat") == "gpu_user_annotation"], STEP))


def _nsys(path: Path) -> Events:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    strings = dict(con.execute("select id, value from StringIds")) if "StringIds" in tables else {}
    rows = []
    for table, kernel in (("CUPTI_ACTIVITY_KIND_KERNEL", True),
                          ("CUPTI_ACTIVITY_KIND_MEMCPY", False),
                          ("CUPTI_ACTIVITY_KIND_MEMSET", False)):
        if table in tables:
            name = "coalesce(demangledName, shortName)" if kernel else "0"
            query = f"select start, end, deviceId, {name}, correlationId from {table}"
            rows += [(s, e, d, kernel, strings.get(n, "") if kernel else "", c)
                     for s, e, d, n, c in con.execute(query)]
    calls: dict[int, str] = {}  # nested runtime pairs share a correlation id: one launch
    returned: dict[int, int] = {}
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables:
            for corr, nid, end in con.execute(f"select correlationId, nameId, end from {table}"):
                returned[corr] = max(end, returned.get(corr, end))  # the outer call's return
                if LAUNCH.match(strings.get(nid, "")):
                    calls[corr] = strings[nid]
    steps = inputs = np.empty((0, 2), np.int64)
    span = None
    if "NVTX_EVENTS" in tables:
        query = "select start, end, text, textId from NVTX_EVENTS where end is not null"
        nvtx = [(s, e, t if t is not None else strings.get(tid, ""))
                for s, e, t, tid in con.execute(query)]
        steps, inputs = (_pick([(s, e, t or "") for s, e, t in nvtx], p) for p in (STEP, INPUT))
        span = (min(s for s, _, _ in nvtx), max(e for _, e, _ in nvtx)) if nvtx else None
    con.close()
    cols = _columns(rows, 6)
    return Events(np.array(cols[0], np.int64), np.array(cols[1], np.int64),
                  np.array(cols[2], np.int64), np.array(cols[3], bool), np.array(cols[4], object),
                  np.array([returned.get(c, -1) for c in cols[5]], np.int64),
                  steps, inputs, len(calls),
                  sum(bool(GRAPH_LAUNCH.match(c)) for c in calls.values()), span)


def _xplane(path: Path) -> Events:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # TensorFlow's schema, not ours

    data = path.read_bytes()
    space = xplane_pb2.XSpace()
    space.ParseFromString(gzip.decompress(data) if path.suffix == ".gz" else data)
    dev, host, returned, steps = [], [], {}, {}
    for plane in space.planes:
        names = {k: m.name for k, m in plane.event_metadata.items()}
        corr_id = next((k for k, m in plane.stat_metadata.items()
                        if m.name == "correlation_id"), None)

        def corr(e, corr_id=corr_id) -> int | None:
            return next((st.int64_value or st.uint64_value for st in e.stats
                         if st.metadata_id == corr_id), None)

        gpu = plane.name.startswith("/device:GPU:")
        tpu = plane.name.startswith("/device:TPU:")
        if plane.name == "/host:CPU":
            for line in plane.lines:
                for e in line.events:
                    t = line.timestamp_ns * 1000 + e.offset_ps
                    host.append((t, e.duration_ps, names.get(e.metadata_id, "")))
                    if (c := corr(e)) is not None:
                        returned[c] = (t + e.duration_ps) // 1000
        elif gpu or tpu:
            number = int(plane.name.rsplit(":", 1)[1])
            for line in plane.lines:
                t0 = line.timestamp_ns * 1000
                if line.name == "Steps":  # TF's own step marks, one line per GPU
                    steps[number] = union([(t0 + e.offset_ps) // 1000 for e in line.events],
                                          [(t0 + e.offset_ps + e.duration_ps) // 1000
                                           for e in line.events])
                # a GPU's work is on its "Stream #N" lines (the others restate it per op,
                # name scope, step); a TPU's on "XLA Ops"
                if (gpu and line.name.startswith("Stream #")) or (tpu and line.name == "XLA Ops"):
                    for e in line.events:
                        name = names.get(e.metadata_id, "")
                        copy = gpu and re.match(r"Memcpy|Memset|MEMCPY|MEMSET", name) is not None
                        dev.append((t0 + e.offset_ps, e.duration_ps, number, not copy, name,
                                    corr(e)))
    cols = _columns(dev, 6)
    start = np.array(cols[0], np.int64)
    calls = [n for _, _, n in host if LAUNCH.match(n)]
    host_ns = [(s // 1000, (s + d) // 1000, n) for s, d, n in host]
    return Events(start // 1000, (start + np.array(cols[1], np.int64)) // 1000,
                  np.array(cols[2], np.int64), np.array(cols[3], bool), np.array(cols[4], object),
                  np.array([returned.get(c, -1) for c in cols[5]], np.int64),
                  _pick(host_ns, STEP), _pick(host_ns, INPUT), len(calls),
                  sum(bool(GRAPH_LAUNCH.match(c)) for c in calls),
                  (min(s for s, _, _ in host_ns), max(e for _, e, _ in host_ns))
                  if host else None, device_steps=steps or None)


@functools.cache
def exported(report: Path) -> Path:
    """A ``.qdrep``/``.nsys-rep`` exported to SQLite with the installed ``nsys`` (once per
    process); raises ``RuntimeError`` with nsys's own message when it cannot."""
    out = Path(tempfile.mkdtemp(prefix="diagnosis-raw-")) / (report.stem + ".sqlite")
    r = subprocess.run(["nsys", "export", "--type", "sqlite", "-o", str(out), str(report)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode or not out.is_file():
        raise RuntimeError((r.stderr or r.stdout).strip().splitlines()[-1])
    return out


@functools.cache
def read(path: Path) -> Events:
    """The events of one trace file, read once per process."""
    name = path.name
    if name.endswith((".json", ".json.gz")):
        return _kineto(path)
    if name.endswith(".sqlite"):
        return _nsys(path)
    if name.endswith((".qdrep", ".nsys-rep")):
        return _nsys(exported(path))
    if ".xplane.pb" in name:
        return _xplane(path)
    raise ValueError(f"not a trace this test bed reads: {path}")
