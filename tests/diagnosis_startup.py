"""Start-up, each window's time by what the device does, and the host wait by what the host
did, from the raw events (``tests/diagnosis_events.py``; no traceviz import).

Every moment of a device's window is the first of: ``startup`` (inside an autotuning
stretch whatever the device does, or inside a start-up call while the device runs nothing
and nothing launched is pending), ``busy`` (a device row runs), ``input`` (inside an input
call), ``queued`` (launched work pending), ``host`` (the rest). The host wait (the device
idle, nothing pending) splits into ``startup``, ``input`` and, for the rest, what the thread
that launched the next device row was doing then (``THREAD_CAUSES``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tests.diagnosis_events import (
    GRAPH_LAUNCH,
    LAUNCH,
    Events,
    Intervals,
    complement,
    intersect,
    join,
    length,
    per_window,
    subtract,
    union,
)
from tests.diagnosis_formats import OFF_CPU

# A start-up call takes at least a millisecond: below that, it costs less than one
# typical step's launch overhead and no remedy (warm-up, lazy loading off) is worth naming.
STARTUP_MIN_NS = 1_000_000
# ... and, for calls that also run in the steady state (launches, queries, allocations,
# creations), 20 times its usual time: a cold call (module loading, a context, a cache
# miss in the allocator) is orders of magnitude slower; a busy host stretches a warm
# call by a few times at most.
STARTUP_FACTOR = 20
# an untraced stretch shorter than this is the host issuing work (Python between ops);
# a longer one is host work of its own that the profiler did not see
LONG_UNTRACED_NS = 1_000_000

BUDGET = ("startup", "busy", "input", "queued", "host")
API_KINDS = ("sync_copy", "sync", "alloc", "create", "launch", "setup", "other_api")
OS_KINDS = ("sleep", "io", "lock", "other_os", "offcpu")
THREAD_CAUSES = (*API_KINDS, *OS_KINDS, "ops", "gaps", "untraced")
CAUSES = ("startup", "input", *THREAD_CAUSES)
# the host cause's groups (``bound.cause``): what a remedy would change
GROUPS = {"launch": ("launch", "ops", "gaps", "other_api", "setup"),
          "untraced": ("untraced",), "os": OS_KINDS, "sync_copy": ("sync_copy",),
          "sync": ("sync",), "alloc": ("alloc", "create")}

SYNC = re.compile(r"Synchronize$")
COPY = re.compile(r"Memcpy|Memset")
ASYNC = re.compile(r"Async|WithStream")
ALLOC = re.compile(r"Malloc|Free|HostAlloc|MemAlloc|MemFree|MemCreate|MemRelease|MemMap|"
                   r"MemUnmap|MemAddress(Reserve|Free)|HostRegister|HostUnregister|MemPool")
CREATE = re.compile(r"(Stream|Event|Graph)(Create|Destroy)|GraphInstantiate|GraphExecDestroy")
CONTEXT = re.compile(r"^(cuInit|cuCtxCreate\w*|cuDevicePrimaryCtxRetain|cudaSetDevice|"
                     r"cudaDeviceReset|hipInit|hipSetDevice|hipCtxCreate)$")
MODULE = re.compile(r"^(cuModuleLoad\w*|cuLibraryLoad\w*|hipModuleLoad\w*|cuLink\w*)$")
QUERY = re.compile(r"^(cuda|cu|hip)(FuncGetAttributes?|FuncSetAttribute|FuncSetCacheConfig|"
                   r"Occupancy\w*|ModuleGetFunction|ModuleGetGlobal|LibraryGetKernel|"
                   r"KernelGetFunction|GetFuncBySymbol|GetDeviceProperties|DeviceGetAttribute|"
                   r"GetSymbolAddress|GetSymbolSize)$")
SETUP = re.compile(r"^(cuda|cu|hip)(GetDevice\w*|DeviceGet\w*|DriverGetVersion|"
                   r"RuntimeGetVersion|CtxGet\w*|CtxSetCurrent|CtxPushCurrent|CtxPopCurrent|"
                   r"GetProcAddress\w*|GetDriverEntryPoint\w*|ModuleGetLoadingMode|"
                   r"DeviceSetLimit|DeviceSetCacheConfig|DeviceCanAccessPeer|"
                   r"DeviceEnablePeerAccess)$")
SLEEP = re.compile(r"^(nanosleep|usleep|clock_nanosleep|sleep)$")
IO = re.compile(r"^(read|write|readv|writev|pread\w*|pwrite\w*|fread|fwrite|fgets|fputs|"
                r"fflush|open\w*|close|fopen\w*|fclose|poll|ppoll|select|pselect\w*|"
                r"epoll_wait|epoll_pwait|recv\w*|send\w*|accept\w*|connect|fsync|fdatasync)$")
LOCK = re.compile(r"^(pthread_mutex_\w+|pthread_cond_\w+|pthread_rwlock_\w+|pthread_spin_\w+|"
                  r"sem_\w+|futex)$")
# host ranges of a compiler (XLA, torch.compile's backend)
COMPILE = re.compile(r"(^|::)(backend_compile|XlaCompile|Compile|compile_and_load)$")
# autotuning marks among host ranges (XLA's autotuner and algorithm pickers, cuDNN's Find)
AUTOTUNE = re.compile(r"utotun|AlgorithmPicker|cudnnFind")
# a Python stack frame Kineto records ("flashinfer/autotuner.py(400): choose_one"): its
# name is a source file, not a range anyone named; flashinfer's autotuner looks up its
# cache this way every forward (h4: 376 frames over 78 of 85 ms), without tuning anything
PY_FRAME = re.compile(r"\.py\(\d+\): ")


def base(name: str) -> str:
    """An API's name without nsys' version suffixes, ``_ptsz`` and Kineto's ``(...)``."""
    name = name.split(" (", 1)[0]
    while (cut := re.sub(r"(_v\d+|_ptsz|_ptds)$", "", name)) != name:
        name = cut
    return name


def api_kind(name: str) -> str:
    n = base(name)
    if SYNC.search(n):
        return "sync"
    if COPY.search(n):  # an async copy or set is issued like a launch
        return "launch" if ASYNC.search(n) else "sync_copy"
    if LAUNCH.match(n):
        return "launch"
    if ALLOC.search(n):
        return "alloc"
    if CREATE.search(n):
        return "create"
    if CONTEXT.match(n) or MODULE.match(n) or QUERY.match(n) or SETUP.match(n):
        return "setup"
    return "other_api"


def os_kind(name: str) -> str:
    for kind, pattern in (("sleep", SLEEP), ("io", IO), ("lock", LOCK)):
        if pattern.match(name):
            return kind
    return "offcpu" if name == OFF_CPU else "other_os"


# ---------------------------------------------------------------- start-up


@dataclass(frozen=True)
class Startup:
    calls: Intervals  # start-up calls and compiler ranges (union)
    parts: dict[str, int]  # their summed durations by part
    marks: np.ndarray  # (n, 2) autotuning marks (not unioned)


def startup_of(ev: Events) -> Startup:
    c = ev.calls
    names = np.array([base(n) for n in c.name], object)
    dur = c.end - c.start
    kinds = np.array([api_kind(n) for n in names], object)
    sync_or_copy = np.isin(kinds, ("sync", "sync_copy")) | np.array(
        [bool(COPY.search(n)) for n in names], bool)
    part = np.full(len(c), "", object)
    kernel = np.array([bool(LAUNCH.match(n)) for n in names], bool)
    graph = np.array([bool(GRAPH_LAUNCH.match(n)) for n in names], bool)
    # a call the device held (half its time or more with device work running: a launch
    # behind a full queue) is the device's time, not start-up
    busy = union(ev.dev_start, ev.dev_end)
    before = np.concatenate([[0], np.cumsum(busy[:, 1] - busy[:, 0])])

    def covered(t: np.ndarray) -> np.ndarray:  # device-busy time before each t
        k = np.searchsorted(busy[:, 0], t, side="right") - 1
        inside = np.clip(t - busy[np.maximum(k, 0), 0], 0,
                         (busy[:, 1] - busy[:, 0])[np.maximum(k, 0)]) if len(busy) else 0
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)

    held = 2 * (covered(c.end) - covered(c.start)) >= np.maximum(dur, 1)
    for p in np.unique(c.process):
        mine = np.flatnonzero(c.process == p)
        steady_calls = mine[~sync_or_copy[mine]]
        usual_all = np.median(dur[steady_calls]) if len(steady_calls) else np.inf
        by_name: dict[str, np.ndarray] = {}
        for i in mine:
            by_name.setdefault(names[i], []).append(dur[i])  # type: ignore[attr-defined]
        # the lower quartile of a name's calls is its usual time (its few cold first
        # calls do not move it); a name called once or twice may be all first calls:
        # the process's median then, unless it is a graph launch (its time is the graph's)
        quartile = {n: float(np.quantile(np.array(v, np.int64), 0.25))
                    for n, v in by_name.items()}
        count = {n: len(v) for n, v in by_name.items()}
        for i in mine:
            n = names[i]
            if sync_or_copy[i] or dur[i] < STARTUP_MIN_NS or held[i]:
                continue
            usual = quartile[n] if count[n] >= 3 or graph[i] else min(quartile[n], usual_all)
            if CONTEXT.match(n):
                part[i] = "context"
            elif MODULE.match(n):
                part[i] = "module"
            elif dur[i] >= STARTUP_FACTOR * max(usual, 1.0) and (
                    kernel[i] or QUERY.match(n) or kinds[i] in ("alloc", "create")):
                part[i] = "launch" if kernel[i] else (
                    "query" if QUERY.match(n) else str(kinds[i]))
        first = mine[np.argmin(c.start[mine])]
        if not sync_or_copy[first] and not graph[first] and dur[first] >= STARTUP_MIN_NS \
                and not held[first]:
            part[first] = "first_call"  # context creation (or module loading: a launch)
    hit = part != ""
    r = ev.ranges
    compiling = np.array([bool(COMPILE.search(str(n))) for n in r.name], bool)
    parts = {str(k): int(dur[hit][part[hit] == k].sum()) for k in np.unique(part[hit])}
    if compiling.any():
        parts["compile"] = int((r.end - r.start)[compiling].sum())
    red = ev.dev_name == "redzone_checker" if len(ev.dev_name) else np.zeros(0, bool)
    linked = ev.dev_call >= 0
    red_start = np.where(red & linked, c.start[np.where(linked, ev.dev_call, 0)]
                         if len(c) else 0, ev.dev_start)
    tuning = np.array([bool(AUTOTUNE.search(str(n))) and not PY_FRAME.search(str(n))
                       for n in r.name], bool)
    marks = np.concatenate([np.column_stack([red_start[red], ev.dev_end[red]]),
                            np.column_stack([r.start[tuning], r.end[tuning]])]).astype(np.int64)
    return Startup(join(union(c.start[hit], c.end[hit]),
                        union(r.start[compiling], r.end[compiling])), parts, marks)


def autotuning(marks: np.ndarray, windows: Intervals) -> Intervals:
    """Per window, from its first autotuning mark to its last (the marks it overlaps)."""
    out = []
    for w0, w1 in windows:
        m = marks[(marks[:, 0] < w1) & (marks[:, 1] > w0)] if len(marks) else marks
        if len(m):
            out.append((max(w0, m[:, 0].min()), min(w1, m[:, 1].max())))
    return union([a for a, _ in out], [b for _, b in out])


# ---------------------------------------------------------------- the windows' budget


def window_of(ev: Events, on: np.ndarray) -> Intervals:
    """A device's window without steps: its first launch call (or first row) to the end of
    its last row."""
    if not on.any():
        return union([], [])
    linked = on & (ev.dev_call >= 0)
    first = ev.dev_start[on].min()
    if linked.any():
        first = min(first, ev.calls.start[ev.dev_call[linked]].min())
    return union([first], [ev.dev_end[on].max()])


@dataclass(frozen=True)
class Budget:
    """One device's windows: per window, its time by ``BUDGET`` part and its host wait
    by ``CAUSES`` (arrays, one entry a window), and start-up before the first window."""
    windows: Intervals
    parts: dict[str, np.ndarray]
    causes: dict[str, np.ndarray]
    before_ns: int


def budget(ev: Events, on: np.ndarray, windows: Intervals, s: Startup) -> Budget:
    """The budget of the device whose rows are ``on`` over ``windows``."""
    busy = union(ev.dev_start[on], ev.dev_end[on])
    waits = on & (ev.dev_launched >= 0)
    queued = union(ev.dev_launched[waits], ev.dev_start[waits])
    calls = subtract(subtract(s.calls, busy), queued)  # the device waiting for them
    startup = intersect(join(autotuning(s.marks, windows), calls), windows)
    busy_w = subtract(intersect(busy, windows), startup)
    inputs = subtract(subtract(intersect(ev.inputs, windows), startup), busy)
    queued_w = subtract(subtract(subtract(intersect(queued, windows), startup), busy), ev.inputs)
    host = subtract(subtract(subtract(subtract(windows, startup), busy), ev.inputs), queued)
    parts = {k: per_window(v, windows) for k, v in zip(
        BUDGET, (startup, busy_w, inputs, queued_w, host), strict=True)}
    before = 0
    if len(windows) and ev.first_host_ns is not None:
        before = length(intersect(calls, union([ev.first_host_ns], [windows[0, 0]])))
    wait = subtract(subtract(windows, busy), queued)  # idle, nothing launched pending
    causes = {"startup": per_window(intersect(wait, startup), windows),
              "input": per_window(subtract(intersect(wait, ev.inputs), startup), windows)}
    for cause, where in _thread_causes(ev, on, host, windows).items():
        causes[cause] = per_window(where, windows)
    return Budget(windows, parts, causes, before)


# ---------------------------------------------------------------- the host wait's causes


def _thread_causes(ev: Events, on: np.ndarray, host: Intervals,
                   windows: Intervals) -> dict[str, Intervals]:
    """The host wait ``host`` split by what the thread that launched the next device row
    (the last launched, where none follows) was doing."""
    rows = np.flatnonzero(on & (ev.dev_call >= 0))
    out = {k: union([], []) for k in THREAD_CAUSES}
    if not len(host):
        return out
    if not len(rows):  # nothing launched from a known thread: nothing recorded to say why
        out["untraced"] = host
        return out
    rows = rows[np.argsort(ev.dev_start[rows], kind="stable")]
    nxt = np.searchsorted(ev.dev_start[rows], host[:, 1], side="left")
    thread = ev.calls.thread[ev.dev_call[rows[np.minimum(nxt, len(rows) - 1)]]]
    for t in np.unique(thread):
        mine = host[thread == t]
        for cause, where in _activity(ev, int(t), windows).items():
            out[cause] = join(out[cause], intersect(mine, where))
    return out


def _activity(ev: Events, thread: int, windows: Intervals) -> dict[str, Intervals]:
    """What a thread was doing inside ``windows``, each moment once: runtime calls by
    kind, OS calls by kind, off the CPU, framework ops, else untraced: a stretch with
    nothing recorded, as long as it lasts inside its window (a window's edge is where the
    step's work begins), short (``gaps``) or long (``untraced``)."""
    layers: list[tuple[str, Intervals]] = []
    c = ev.calls
    mine = c.thread == thread
    kinds = np.array([api_kind(n) for n in c.name[mine]], object)
    for k in API_KINDS:
        layers.append((k, union(c.start[mine][kinds == k], c.end[mine][kinds == k])))
    o = ev.os
    mine = o.thread == thread
    kinds = np.array([os_kind(n) for n in o.name[mine]], object)
    for k in OS_KINDS:
        layers.append((k, union(o.start[mine][kinds == k], o.end[mine][kinds == k])))
    r = ev.ranges
    mine = (r.thread == thread) & r.op
    layers.append(("ops", union(r.start[mine], r.end[mine])))
    out, seen = {}, union([], [])
    for k, where in layers:
        out[k] = subtract(where, seen)
        seen = join(seen, where)
    rest = intersect(complement(seen), windows)
    long = rest[:, 1] - rest[:, 0] >= LONG_UNTRACED_NS
    out["untraced"], out["gaps"] = rest[long], rest[~long]
    return out
