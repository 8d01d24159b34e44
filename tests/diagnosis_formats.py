"""The diagnosis test bed's readers of Nsight Systems SQLite exports and XSpace protobufs:
``sqlite3`` and TensorFlow's own ``xplane_pb2``, no traceviz import (``Events`` and the
Kineto reader are in ``tests/diagnosis_events.py``)."""

from __future__ import annotations

import functools
import gzip
import re
import sqlite3
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from tests.diagnosis_events import (
    GRAPH_LAUNCH,
    INPUT,
    LAUNCH,
    STEP,
    Events,
    Spans,
    linked_events,
    union,
)

OFF_CPU = "[off-CPU]"  # the name of a stretch a thread was scheduled out (nsys SCHED_EVENTS)
# a runtime or driver API's name, as XSpace writes the CUPTI callbacks it recorded
API_NAME = re.compile(r"^(cu|cuda|hip)[A-Z]\w*$")
# a TensorFlow op as its host events name it: "name/scope:Type"
TF_OP = re.compile(r"^[^:\s]+:[A-Za-z_]\w*$")


def _columns(rows: list[tuple], n: int) -> list[tuple]:
    """Rows of ``n`` fields as ``n`` columns (empty ones without rows)."""
    return list(zip(*rows, strict=True)) if rows else [()] * n


def _process(global_tid: int) -> int:
    """The process of an nsys ``globalTid`` (its bits 24 to 47)."""
    return (int(global_tid) >> 24) & 0xFFFFFF


def nsys(path: Path) -> Events:
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
    # nested runtime pairs (cudaMemcpy + cudaMemcpy_v3020) share a correlation id: one call,
    # the outer one (the earliest start, the latest end, the outer's name)
    outer: dict[int, list] = {}
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables:
            query = f"select start, end, globalTid, correlationId, nameId from {table}"
            for s, e, tid, corr, nid in con.execute(query):
                key = corr if corr else -len(outer) - 1  # no id: a call of its own
                have = outer.get(key)
                if have is None or e - s > have[1] - have[0]:
                    outer[key] = [s, e, tid, strings.get(nid, ""), _process(tid), False]
    corr_of = {k: i for i, k in enumerate(outer)}
    calls = Spans.of([tuple(v) for v in outer.values()])
    launch = [c for c in calls.name if LAUNCH.match(c)]
    ranges = []
    if "NVTX_EVENTS" in tables:
        query = "select start, end, text, textId, globalTid from NVTX_EVENTS where end is not null"
        for s, e, t, tid, g in con.execute(query):
            text = (t if t is not None else strings.get(tid, "")) or ""
            ranges.append((s, e, g or 0, text, _process(g or 0), text.startswith("aten::")))
    os_rows = []
    if "OSRT_API" in tables:
        os_rows = [(s, e, g, strings.get(n, ""), _process(g), False)
                   for s, e, g, n in con.execute("select start, end, globalTid, nameId "
                                                 "from OSRT_API")]
    if "SCHED_EVENTS" in tables:
        # a thread is off the CPU from a switch out to its next switch in
        out: dict[int, int] = {}
        query = "select start, isSchedIn, globalTid from SCHED_EVENTS order by start"
        for t, sched_in, g in con.execute(query):
            if not sched_in:
                out.setdefault(g, t)
            elif g in out:
                os_rows.append((out.pop(g), t, g, OFF_CPU, _process(g), False))
    con.close()
    cols = _columns(rows, 6)
    ranges = Spans.of(ranges)
    host = [a for a in (calls, ranges) if len(a)]
    return linked_events(Events(
        np.array(cols[0], np.int64), np.array(cols[1], np.int64),
        np.array(cols[2], np.int64), np.array(cols[3], bool), np.array(cols[4], object),
        np.empty(0), ranges.pick(STEP), ranges.pick(INPUT), len(launch),
        sum(bool(GRAPH_LAUNCH.match(c)) for c in launch),
        (int(min(a.start.min() for a in host)), int(max(a.end.max() for a in host)))
        if host else None,
        calls=calls, ranges=ranges, os=Spans.of(os_rows),
        dev_call=np.array([corr_of.get(c, -1) for c in cols[5]], np.int64)))


def xplane(path: Path) -> Events:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # TensorFlow's schema, not ours

    data = path.read_bytes()
    space = xplane_pb2.XSpace()
    space.ParseFromString(gzip.decompress(data) if path.suffix == ".gz" else data)
    dev, host, steps, step_marks = [], [], {}, []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.event_metadata.items()}
        ids = {m.name: k for k, m in plane.stat_metadata.items()}

        def stat(e, name: str, ids=ids) -> int | None:
            return next((st.int64_value or st.uint64_value for st in e.stats
                         if st.metadata_id == ids.get(name)), None)

        gpu = plane.name.startswith("/device:GPU:")
        tpu = plane.name.startswith("/device:TPU:")
        if plane.name == "/host:CPU":
            for line in plane.lines:
                for e in line.events:
                    t = line.timestamp_ns * 1000 + e.offset_ps
                    host.append((t // 1000, (t + e.duration_ps) // 1000, line.id,
                                 names.get(e.metadata_id, ""), stat(e, "correlation_id")))
                    if stat(e, "step_num") is not None:  # a step (JAX's StepTraceAnnotation)
                        step_marks.append(host[-1][:2])
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
                                    stat(e, "correlation_id")))
    cols = _columns(dev, 6)
    kernel_of = {c: k for c, k in zip(cols[5], cols[3], strict=True) if c is not None}
    rows_of = Counter(c for c in cols[5] if c is not None)
    calls, ranges, corr_of = [], [], {}
    launch = [n for *_, n, _ in host if LAUNCH.match(n)]  # the launch APIs XSpace names
    for s, e, line, name, c in host:
        if c is not None or API_NAME.match(name):
            if c is not None and c not in corr_of:
                corr_of[c] = len(calls)
            if not API_NAME.match(name):
                # XSpace names a launch or copy call by what it launched: the call it
                # stands for (one call launching several kernels: a graph, XLA's command
                # buffers)
                name = ("cuMemcpyAsync" if not kernel_of.get(c, True) else
                        "cuGraphLaunch" if rows_of[c] > 1 else "cuLaunchKernel")
            calls.append((s, e, line, name, 0, False))
        else:
            ranges.append((s, e, line, name, 0, bool(TF_OP.match(name))))
    start = np.array(cols[0], np.int64)
    ranges = Spans.of(ranges)
    return linked_events(Events(
        start // 1000, (start + np.array(cols[1], np.int64)) // 1000,
        np.array(cols[2], np.int64), np.array(cols[3], bool), np.array(cols[4], object),
        np.empty(0), union(*np.array(step_marks, np.int64).reshape(-1, 2).T) if step_marks
        else ranges.pick(STEP), ranges.pick(INPUT), len(launch),
        sum(bool(GRAPH_LAUNCH.match(c)) for c in launch),
        (min(s for s, *_ in host), max(e for _, e, *_ in host)) if host else None,
        device_steps=steps or None, calls=Spans.of(calls), ranges=ranges,
        dev_call=np.array([corr_of.get(c, -1) if c is not None else -1 for c in cols[5]],
                          np.int64)))


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
