"""Why the device waits: the host wait split by cause, start-up told apart, OS rows read from
nsys exports, and the verdict they give, each against figures computed from the raw trace
(plain JSON, SQL on the export) by this file's own code."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import SHARED_TRACES, missing, shared, shared_traces
from traceviz import load
from traceviz.analyses.advice.advising import advise_full
from traceviz.analyses.summary.figures import summarize
from traceviz.analyses.summary.startup_calls import startup_calls
from traceviz.analyses.summary.waits import BUDGET, CAUSES
from traceviz.analyses.whatif.engine import busiest_stream_work, whatif

FOREIGN = SHARED_TRACES / "foreign"
LLAMA = FOREIGN / "nsys" / "llama_real_inference_simulation.sqlite"
A4000 = FOREIGN / "kineto" / "a4000_vit_cold.json"
MOE = FOREIGN / "kineto" / "a100_switch_moe_cold.json"
DLPROF = FOREIGN / "nsys" / "dlprof_lenet_nsys_profile.sqlite"
GH200 = FOREIGN / "kineto" / "gh200_transformer_steps.pt.trace.json"


def _union(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Sorted disjoint [start, end) rows of the union, by a plain sweep."""
    out: list[list[int]] = []
    for a, b in sorted(zip(s.tolist(), e.tolist(), strict=True)):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def _intersect(a: np.ndarray, b: np.ndarray) -> int:
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i, 0], b[j, 0]), min(a[i, 1], b[j, 1])
        total += max(hi - lo, 0)
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return int(total)


# ---------------------------------------------------------------- nsys OS rows


def test_off_cpu_rows_are_the_launching_thread_s_switches(tmp_path):
    """llama_real: the main thread's switch-out to switch-in stretches, from SQL on the
    export, are the trace's [off-CPU] rows, one for one."""
    db = sqlite3.connect(shared(LLAMA))
    (gtid,) = db.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    ev = db.execute("SELECT start, isSchedIn FROM SCHED_EVENTS WHERE globalTid = ? "
                    "ORDER BY start", (gtid,)).fetchall()
    stretches = [(a[0], b[0]) for a, b in zip(ev, ev[1:], strict=False)
                 if a[1] == 0 and b[1] == 1]
    t = load(LLAMA)
    rows = t.events[t.events["kind"] == "os"]
    assert len(rows) == len(stretches) == 640
    assert int(rows["dur_ns"].sum()) == sum(b - a for a, b in stretches)
    assert set(rows["name"].astype(str)) == {"[off-CPU]"}
    assert set(rows["tid"]) == {gtid & 0xFFFFFF}


def test_sleep_inside_weight_ranges_is_the_host_cause():
    """llama_real: the device waits for a host that sleeps (time.sleep in
    ensure_layer_*_weights): the host wait's off-CPU part equals the raw intersection of
    the idle-with-nothing-pending time with the main thread's off-CPU stretches, less what
    runtime calls on that thread cover; the verdict is host, cause os."""
    db = sqlite3.connect(shared(LLAMA))
    k = np.array(db.execute(
        "SELECT k.start, k.end, r.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN "
        "CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "UNION ALL SELECT m.start, m.end, r.end FROM CUPTI_ACTIVITY_KIND_MEMSET m JOIN "
        "CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId").fetchall())
    first_launch = db.execute(
        "SELECT MIN(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
        "CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId").fetchone()[0]
    lo, hi = min(first_launch, int(k[:, 0].min())), int(k[:, 1].max())
    occupied = _union(np.r_[k[:, 0], np.minimum(k[:, 2], k[:, 0])], np.r_[k[:, 1], k[:, 0]])
    edges = np.r_[lo, occupied.ravel(), hi]
    idle = _union(np.maximum(edges[0::2], lo), np.minimum(edges[1::2], hi))
    ev = db.execute("SELECT start, isSchedIn FROM SCHED_EVENTS WHERE globalTid = (SELECT "
                    "globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1) ORDER BY start"
                    ).fetchall()
    off = _union(np.array([a[0] for a, b in zip(ev, ev[1:], strict=False)
                           if a[1] == 0 and b[1] == 1]),
                 np.array([b[0] for a, b in zip(ev, ev[1:], strict=False)
                           if a[1] == 0 and b[1] == 1]))
    calls = _union(*np.array(db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME"
                                        ).fetchall()).T)
    # off the CPU and idle, less the moments inside a runtime call (a call outranks it)
    off_idle = _union(*np.array([(max(a, c), min(b, d)) for a, b in off for c, d in idle
                                 if min(b, d) > max(a, c)]).T)
    expected = _intersect(off_idle, np.array([[lo, hi]])) - _intersect(off_idle, calls)
    s = summarize(load(LLAMA))
    w = s.host_wait_split
    assert w.causes["offcpu"] == pytest.approx(expected, rel=0.01)
    assert w.causes["offcpu"] > 0.8 * s.host_wait_ns  # 559 of 659 ms
    ranges = w.ranges[w.ranges["cause"] == "offcpu"]
    assert ranges["range"].str.startswith("ensure_layer_").all()
    assert s.bound.by == "host" and s.bound.cause == "os"


# ---------------------------------------------------------------- the split adds up


@pytest.mark.parametrize("path", [p for p in shared_traces("kineto") + shared_traces("nsys")
                                  if "cpu_only" not in p.name], ids=lambda p: p.name)
def test_the_parts_add_up(path):
    """Every window's budget adds up to it; the host wait's causes to the host wait."""
    s = summarize(load(path))
    w = s.host_wait_split
    if w is None:
        assert s.host_wait_ns is None or s.cpu_trace
        return
    steps = w.steps
    window = (steps["end_ns"] - steps["start_ns"]).to_numpy()
    assert (steps[[f"{b}_ns" for b in BUDGET]].sum(axis=1).to_numpy() == window).all()
    assert sum(w.causes.values()) == s.host_wait_ns
    assert set(w.causes) == set(CAUSES)
    # the budget's host part is the host wait less its start-up and input parts
    assert w.total("host_ns") == s.host_wait_ns - w.causes["startup"] - w.causes["input"]


# ---------------------------------------------------------------- start-up


def _raw_kineto(path: Path) -> list[dict]:
    doc = json.loads(Path(path).read_text(), parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def test_cold_vit_context_and_module_loading_from_the_raw_json():
    """a4000 ViT: the slow cudaFree calls (cudaFree(0) makes the context), the stream made
    in 564 ms and the 8 launch calls of seconds (median 6 us) are start-up, as the raw
    events list them; the verdict is start-up."""
    ev = _raw_kineto(shared(A4000))
    rt = [e for e in ev if str(e.get("cat", "")).lower() in ("cuda_runtime", "runtime")]
    dur = {n: sorted(int(Decimal(e["dur"]) * 1000) for e in rt if e["name"] == n)
           for n in {e["name"] for e in rt}}
    launches = dur["cudaLaunchKernel"]
    median = launches[len(launches) // 2]
    slow_launches = [d for d in launches if d >= 1_000_000 and d >= 20 * median]
    t = load(A4000)
    calls = startup_calls(t)
    got = t.events.iloc[calls["row"].to_numpy()].assign(part=calls["part"].to_numpy())
    launched = got[got["name"].astype(str) == "cudaLaunchKernel"]
    assert sorted(launched["dur_ns"].tolist()) == sorted(slow_launches)
    assert len(slow_launches) == 8 and sum(slow_launches) > 5.5e9
    frees = got[got["name"].astype(str) == "cudaFree"]
    assert sorted(frees["dur_ns"].tolist()) == [d for d in dur["cudaFree"] if d >= 100e6]
    assert set(frees["part"]) == {"context"}
    s = summarize(t)
    assert s.bound.by == "startup"
    assert s.bound.share > 0.8


def test_a_context_made_before_the_first_launch_counts():
    """DLProf LeNet: the first cudaMalloc (2,078.8 ms) comes before any launch, outside the
    window of 5.35 ms; it is the trace's start-up all the same."""
    db = sqlite3.connect(shared(DLPROF))
    first = db.execute("SELECT start, end - start FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                       "ORDER BY start LIMIT 1").fetchone()
    t = load(DLPROF)
    s = summarize(t)
    w = s.host_wait_split
    assert w.before_ns == first[1]
    assert s.bound.by == "startup"
    a = advise_full(t)
    assert a.findings[0].rule == "startup"
    assert "cudaMalloc" in " ".join(a.findings[0].evidence)


def test_launch_scenarios_keep_start_up_calls():
    """Switch-MoE cold: a scenario that removes launch calls keeps the start-up calls'
    time (a module loaded on first use is loaded by a fused kernel or a graph too): what
    fuse_pointwise saves is at most the steady launch calls and gaps it removes."""
    t = load(shared(MOE))
    w = whatif(t, ("fuse_pointwise",))
    s = w.scenario("fuse_pointwise")
    assert s.applies
    assert any("start-up calls" in a for a in s.assumptions)
    # the recorded host time the scenario can remove: the steady launch calls' durations
    # and gaps; start-up calls (hundreds of ms) are none of it
    start = startup_calls(t)
    assert int(t.events.iloc[start["row"]]["dur_ns"].sum()) > 600e6
    assert s.saving_ns < 0.05 * w.replayed_ns


def test_no_replay_beats_the_busiest_stream():
    """Every scenario's prediction is at least the work left on each device's busiest
    stream (summed over devices)."""
    t = load(shared(GH200))
    w = whatif(t)
    from traceviz.analyses.replay.graph import build
    from traceviz.analyses.work import analysis_windows

    floor = busiest_stream_work(build(t), analysis_windows(t))
    for s in w.scenarios:
        if s.applies and s.parts == ("host_speedup",):
            assert s.predicted_ns >= floor


def test_host_cause_launch_on_an_eager_transformer():
    """GH200 transformer block, 3 steps: the host issues 16 small kernels a step; the
    verdict is host, cause launch (framework ops, launch calls and the Python between
    them), and the first finding prices CUDA graphs."""
    a = advise_full(load(shared(GH200)))
    assert a.bound.by == "host" and a.bound.cause == "launch"
    first = a.findings[0]
    assert first.rule == "host_bound" and first.figures["cause"] == "launch"
    assert first.saving_scenario == "cuda_graphs" and first.saving_ns > 0


# ---------------------------------------------------------------- what a call is


@pytest.mark.parametrize("name,kind", [
    ("cudaLaunchKernel", "launch"), ("cudaLaunchKernel_v7000", "launch"),
    ("cuLaunchKernelEx", "launch"), ("cudaGraphLaunch", "launch"),
    ("cudaMemcpyAsync", "launch"), ("hipMemcpyWithStream", "launch"),
    ("cudaMemcpy", "sync_copy"), ("cudaMemcpy_v3020", "sync_copy"),
    ("cuMemcpyHtoD_v2", "sync_copy"), ("cudaMemset", "sync_copy"),
    ("cudaStreamSynchronize", "sync"), ("cuCtxSynchronize", "sync"),
    ("cudaMalloc", "alloc"), ("cudaFree_v3020", "alloc"), ("cudaHostAlloc", "alloc"),
    ("cuMemAlloc_v2", "alloc"), ("hipMalloc", "alloc"),
    ("cudaStreamCreateWithFlags", "create"), ("cudaEventCreate", "create"),
    ("cudaGraphInstantiate", "create"),
    ("cuInit", "setup"), ("cudaGetDeviceProperties_v2_v12000", "setup"),
    ("cudaFuncGetAttributes", "setup"), ("cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                                         "setup"),
    ("cuLibraryLoadData", "setup"), ("cuModuleGetFunction", "setup"),
    ("cudaEventRecord", "other_api"), ("cudaStreamIsCapturing", "other_api"),
])
def test_runtime_calls_by_kind(name, kind):
    from traceviz.table.host_calls import api_kind

    assert api_kind(name) == kind


@pytest.mark.parametrize("name,kind", [
    ("nanosleep", "sleep"), ("clock_nanosleep", "sleep"), ("usleep", "sleep"),
    ("read", "io"), ("fread", "io"), ("open64", "io"), ("poll", "io"), ("fwrite", "io"),
    ("pthread_mutex_lock", "lock"), ("pthread_cond_timedwait", "lock"),
    ("sem_timedwait", "lock"), ("ioctl", "other_os"), ("[off-CPU]", "offcpu"),
    ("[off-CPU] Nanosleep", "sleep"), ("[off-CPU] Mutex", "lock"),
])
def test_os_calls_by_kind(name, kind):
    from traceviz.table.host_calls import os_kind

    assert os_kind(name) == kind


# ---------------------------------------------------------------- CPU samples


DARKNET = FOREIGN / "nsys" / "darknet_xavier_report1.qdrep"


def test_samples_name_the_untraced_host_work(tmp_path):
    """darknet on a Jetson: the launching thread's CPU samples, each named by the deepest
    frame of its stack outside the C library, the loader, the kernel, CUDA and the
    profiler (SQL on the export), are the trace's sample rows; the host verdict's untraced
    time is named by them (rand_normal: building the network on the CPU)."""
    import shutil
    import subprocess

    if not shutil.which("nsys"):
        missing("nsys is not on PATH: a .qdrep is read through `nsys export`")
    src = shared(DARKNET)
    out = tmp_path / "report.sqlite"
    subprocess.run(["nsys", "export", "--type", "sqlite", "-o", str(out), str(src)],
                   check=True, capture_output=True, timeout=600)
    db = sqlite3.connect(out)
    (gtid,) = db.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME"
                         ).fetchone()
    system = ("[kernel", "[Max depth", "vmlinux", "/libc.", "/libc-", "/libm.", "/libm-",
              "libpthread", "/ld-", "ld-linux", "libstdc++", "libgcc", "libdl.", "libdl-",
              "librt.", "librt-", "libcuda.", "libcudart", "libcupti", "libToolsInjection",
              "libnvToolsExt", "vdso")
    rows = db.execute(
        "SELECT k.id, k.stackDepth, s.value, m.value FROM COMPOSITE_EVENTS c JOIN "
        "SAMPLING_CALLCHAINS k ON k.id = c.id JOIN StringIds s ON s.id = k.symbol JOIN "
        "StringIds m ON m.id = k.module WHERE c.globalTid = ? AND c.start >= 0 "
        "ORDER BY k.id, k.stackDepth",
        (gtid,)).fetchall()
    label: dict[int, str] = {}
    for sid, _, sym, mod in rows:
        if sid in label or not sym or sym.startswith("0x") or any(x in mod for x in system):
            continue
        label[sid] = sym
    t = load(out)
    got = t.events[t.events["kind"] == "sample"]["name"].astype(str).str.removeprefix(
        "[sample] ").value_counts()
    want = pd.Series(list(label.values())).value_counts()
    assert got["rand_normal"] == want["rand_normal"] > 10_000
    # a C program: no frame in a Python interpreter, every label as SQL finds it
    assert got.sort_index().to_dict() == want.sort_index().to_dict()
    a = advise_full(t)
    assert a.bound.by == "host" and a.bound.cause == "untraced"
    first = a.findings[0]
    assert first.rule == "host_bound" and "rand_normal" in " ".join(first.evidence)
    assert first.saving_scenario == "drop_host_stalls"


def test_the_python_api_gives_the_split_and_the_verdict():
    """Trace.host_wait() is the analyze section as a table, largest cause first, adding up
    to the host wait; Trace.bound() is analyze --json's bound."""
    t = load(shared(LLAMA))
    table = t.host_wait()
    s = summarize(t)
    assert table["ns"].sum() == s.host_wait_ns
    assert table.iloc[0]["cause"] == "offcpu" and table["ns"].is_monotonic_decreasing
    assert table["share"].sum() == pytest.approx(1.0)
    assert t.bound()["by"] == "host" and t.bound()["cause"] == "os"
