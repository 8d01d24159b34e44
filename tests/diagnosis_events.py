"""The raw events a diagnosis needs, read straight from a trace file, independently of
traceviz: plain ``json``/``gzip`` for Kineto, ``sqlite3`` for Nsight Systems exports
(``.qdrep``/``.nsys-rep`` exported first with the installed ``nsys``), TensorFlow's own
``xplane_pb2`` for XSpace (those two in ``tests/diagnosis_formats.py``). No traceviz
import: ``tests/diagnosis_raw.py`` builds its expectations on these, and agreement with
``advise`` means something only if the two share no code.

Times are integer nanoseconds. Interval sets are ``(n, 2)`` int64 arrays of sorted,
disjoint ``[start, end)`` ranges (``union`` makes them).
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np

LAUNCH = re.compile(
    r"^(cudaLaunchKernel|cudaLaunchKernelExC|cuLaunchKernel|cuLaunchKernelEx|"
    r"cudaLaunchCooperativeKernel|cuLaunchCooperativeKernel|cudaGraphLaunch|cuGraphLaunch|"
    r"hipLaunchKernel|hipExtLaunchKernel|hipModuleLaunchKernel|hipExtModuleLaunchKernel|"
    r"hipGraphLaunch)(_v\d+|_ptsz)*( \(.*\))?$")
GRAPH_LAUNCH = re.compile(r"^(cuda|cu|hip)GraphLaunch")
# the project's step marks: ProfilerStep#N (Kineto), "step N" ranges (NVTX and others)
STEP = re.compile(r"^(ProfilerStep#|step[ _#]?)\d+$", re.I)
# input calls: the DataLoader's __next__ (Kineto); tf.data's get-next ops and the _Recv
# nodes that wait for their batch ("IteratorGetNextAsOptional_1/_2:_Recv"; not the _Send
# nodes, which hand over a batch already there), and the iterator's outer ranges (not the
# per-dataset ranges under them, "Iterator::Model::ParallelMapV2::...", which run on
# tf.data's own threads); JAX's DevicePut; traceviz's own "data" range
INPUT = re.compile(r"DataLoader.*__next__|IteratorGetNext(?!.*:_Send$)|DevicePut|"
                   r"^(Iterator::Model|Iterator::Root|data)$")
# collective and point-to-point kernels: NCCL/RCCL, DeepEP's dispatch/combine/notify, NVLS
# multimem reductions, vLLM's custom all-reduce, XLA's collective ops
COMM = re.compile(r"nccl|rccl|ep::.*(dispatch|combine|notify)|multimem|cross_device_reduce|"
                  r"all[-_]?reduce|all[-_]?gather|reduce[-_]scatter|all[-_]?to[-_]?all|"
                  r"collective[-_]permute", re.I)
SOFTMAX = re.compile(r"softmax", re.I)

Intervals = np.ndarray
_NONE = np.empty((0, 2), np.int64)


# ---------------------------------------------------------------- interval algebra


def union(starts, ends) -> Intervals:
    """The sorted, disjoint union of ``[start, end)`` ranges."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return _NONE.copy()
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    groups = np.cumsum(new) - 1
    ends = np.zeros(groups[-1] + 1, np.int64)
    np.maximum.at(ends, groups, e)
    return np.column_stack([s[new], ends])


def join(*sets: Intervals) -> Intervals:
    """The union of interval sets."""
    both = np.concatenate([_NONE, *sets])
    return union(both[:, 0], both[:, 1])


def length(a: Intervals) -> int:
    return int((a[:, 1] - a[:, 0]).sum()) if len(a) else 0


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Where two interval sets (each disjoint) both hold."""
    if not len(a) or not len(b):
        return _NONE.copy()
    t = np.r_[a[:, 0], a[:, 1], b[:, 0], b[:, 1]]
    d = np.r_[np.ones(len(a)), -np.ones(len(a)), np.ones(len(b)), -np.ones(len(b))]
    order = np.lexsort((d, t))  # ends before starts at one instant: [s, e) ranges
    t, depth = t[order], np.cumsum(d[order])
    both = depth[:-1] == 2
    return union(t[:-1][both], t[1:][both])


def complement(a: Intervals) -> Intervals:
    """Everything ``a`` does not cover (to the ends of int64)."""
    edges = np.r_[np.iinfo(np.int64).min, a.ravel(), np.iinfo(np.int64).max]
    return union(edges[0::2], edges[1::2])


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The parts of ``a`` that ``b`` does not cover."""
    return intersect(a, complement(b)) if len(b) else a


def minus(a: Intervals, b: Intervals) -> int:
    """Length of ``a`` not covered by ``b``."""
    return length(a) - length(intersect(a, b))


def per_window(a: Intervals, windows: Intervals) -> np.ndarray:
    """The length of ``a`` inside each of ``windows`` (disjoint, sorted)."""
    inside = intersect(a, windows)
    out = np.zeros(len(windows), np.int64)
    if len(inside):
        k = np.searchsorted(windows[:, 0], inside[:, 0], side="right") - 1
        np.add.at(out, k, inside[:, 1] - inside[:, 0])
    return out


# ---------------------------------------------------------------- the events


@dataclass
class Spans:
    """Host spans of one kind: runtime calls, host ranges, OS calls. ``thread`` is a
    per-trace thread number, ``process`` a per-trace process number; ``op`` marks a
    framework op among host ranges (Kineto ``cpu_op``, a TF op, an ``aten::`` NVTX range)."""
    start: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    name: np.ndarray  # object
    process: np.ndarray
    op: np.ndarray  # bool

    @classmethod
    def of(cls, rows: list[tuple]) -> Spans:
        """From ``(start, end, thread, name, process, op)`` tuples."""
        cols = list(zip(*rows, strict=True)) if rows else [()] * 6
        return cls(np.array(cols[0], np.int64), np.array(cols[1], np.int64),
                   np.array(cols[2], np.int64), np.array(cols[3], object),
                   np.array(cols[4], np.int64), np.array(cols[5], bool))

    def __len__(self) -> int:
        return len(self.start)

    def pick(self, pattern: re.Pattern) -> Intervals:
        """The union of the spans whose name matches."""
        hit = np.array([bool(pattern.search(str(n))) for n in self.name], bool)
        return union(self.start[hit], self.end[hit]) if len(hit) else _NONE.copy()


def _no_spans() -> Spans:
    return Spans.of([])


@dataclass
class Events:
    """The raw facts a diagnosis needs, one format's reading."""
    dev_start: np.ndarray  # device work: kernels, memcpy, memset
    dev_end: np.ndarray
    dev_id: np.ndarray
    dev_kernel: np.ndarray  # bool: a kernel (not a copy or set)
    dev_name: np.ndarray  # object
    dev_launched: np.ndarray  # when the call that launched the row returned (-1: not seen)
    steps: Intervals  # step-mark host ranges (maybe empty)
    inputs: Intervals  # input-pipeline host ranges, unioned
    launches: int
    graph_launches: int
    host_span: tuple[int, int] | None  # first start, last end of any host range
    softmax_seq: int = 0  # the largest S of a softmax op over an [..., S, S] input (Kineto)
    gpu_steps: Intervals | None = None  # Kineto's device-side ProfilerStep ranges, if any
    device_steps: dict[int, Intervals] | None = None  # XSpace: each GPU's "Steps" line
    calls: Spans = field(default_factory=_no_spans)  # runtime and driver calls
    dev_call: np.ndarray | None = None  # each device row's launch call in ``calls`` (-1)
    ranges: Spans = field(default_factory=_no_spans)  # every other host range
    os: Spans = field(default_factory=_no_spans)  # OS calls and off-CPU stretches (nsys)
    first_host_ns: int | None = None  # the trace's first host event


def linked_events(ev: Events) -> Events:
    """``dev_launched`` from ``dev_call`` (every reader links rows to calls)."""
    if ev.dev_call is None:
        ev.dev_call = np.full(len(ev.dev_start), -1, np.int64)
    ok = ev.dev_call >= 0
    ev.dev_launched = np.where(ok, ev.calls.end[np.where(ok, ev.dev_call, 0)]
                               if len(ev.calls) else -1, -1).astype(np.int64)
    starts = [a.start.min() for a in (ev.calls, ev.ranges, ev.os) if len(a)]
    ev.first_host_ns = int(min(starts)) if starts else None
    return ev


def _ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value())


KINETO_DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
KINETO_RUNTIME = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
KINETO_OPS = {"cpu_op", "operator"}


def _kineto(path: Path) -> Events:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=str)  # exact: Kineto writes µs with 3 decimals
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    evs = [e for e in evs if e.get("ph") == "X" and "dur" in e]
    cat = [str(e.get("cat", "")).lower() for e in evs]
    dev = [e for e, c in zip(evs, cat, strict=True) if c in KINETO_DEVICE]
    host = [(e, c) for e, c in zip(evs, cat, strict=True)
            if c not in KINETO_DEVICE and not c.startswith("gpu_")]
    start = np.array([_ns(e["ts"]) for e in dev], np.int64)
    dur = np.array([_ns(e["dur"]) for e in dev], np.int64)
    threads: dict = {}
    processes: dict = {}
    calls, ranges, corr = [], [], {}
    for e, c in host:
        s = _ns(e["ts"])
        row = (s, s + _ns(e["dur"]), threads.setdefault((e.get("pid"), e.get("tid")), len(threads)),
               e.get("name", ""), processes.setdefault(e.get("pid"), len(processes)))
        if c in KINETO_RUNTIME:
            if (k := e.get("args", {}).get("correlation")) is not None:
                corr[k] = len(calls)
            calls.append((*row, False))
        else:  # a ProfilerStep is the step, not an op
            ranges.append((*row, c in KINETO_OPS and not STEP.match(row[3])))
    launch = [n for _, _, _, n, _, _ in calls if LAUNCH.match(n)]
    # a softmax over [..., S, S] is attention's scores: its S from the op's recorded shapes
    square = [d[0][-1] for e, _ in host if e.get("name") in ("aten::softmax", "aten::_softmax")
              and (d := e.get("args", {}).get("Input Dims")) and len(d[0]) >= 2
              and d[0][-1] == d[0][-2]]
    spans = Spans.of(calls + ranges)
    ranges = Spans.of(ranges)
    gpu = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e, c in zip(evs, cat, strict=True)
           if c == "gpu_user_annotation" and STEP.match(e.get("name", ""))]
    return linked_events(Events(
        dev_start=start, dev_end=start + dur,
        dev_id=np.array([int(e.get("args", {}).get("device", e.get("pid", 0)) or 0)
                         for e in dev], np.int64),
        dev_kernel=np.array([str(e["cat"]).lower() == "kernel" for e in dev], bool),
        dev_name=np.array([e["name"] for e in dev], object), dev_launched=np.empty(0),
        steps=ranges.pick(STEP), inputs=ranges.pick(INPUT), launches=len(launch),
        graph_launches=sum(bool(GRAPH_LAUNCH.match(c)) for c in launch),
        host_span=(int(spans.start.min()), int(spans.end.max())) if len(spans) else None,
        softmax_seq=max(square, default=0),
        gpu_steps=union([s for s, _ in gpu], [e for _, e in gpu]),
        calls=Spans.of(calls), ranges=ranges,
        dev_call=np.array([corr.get(e.get("args", {}).get("correlation"), -1) for e in dev],
                          np.int64)))


@functools.cache
def read(path: Path) -> Events:
    """The events of one trace file, read once per process."""
    from tests import diagnosis_formats as formats

    name = path.name
    if name.endswith((".json", ".json.gz")):
        return _kineto(path)
    if name.endswith(".sqlite"):
        return formats.nsys(path)
    if name.endswith((".qdrep", ".nsys-rep")):
        return formats.nsys(formats.exported(path))
    if ".xplane.pb" in name:
        return formats.xplane(path)
    raise ValueError(f"not a trace this test bed reads: {path}")
