"""The meaning of the headline figures, on real traces: windows, host wait vs queued idle,
launch populations, graph launches, the launch link, formats, kernel identity.

Expected figures come from the raw files by another path: plain-Python sweeps over the
raw JSON (tests/rawref.py), SQL over the nsys exports, ``nsys stats`` itself.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
import sqlite3
import statistics
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import KINETO, SHARED_TRACES, shared, shared_traces
from tests.handmade import row, trace
from tests.rawref import Reference, ns, split_by_sweep
from traceviz import load
from traceviz.analyses import summarize
from traceviz.analyses.summary.launch import launch_table
from traceviz.analyses.summary.tables import export_tables
from traceviz.analyses.work import analysis_windows, work_rows
from traceviz.cli import main
from traceviz.table.launch_apis import is_graph_launch, launch_kind

NSYS = SHARED_TRACES / "nsys"
PROCESS = "& -16777216"  # globalTid & 0xFFFFFFFFFF000000: the process of a call
ALL_SHARED = [str(p.relative_to(SHARED_TRACES)) for p in shared_traces()]


@pytest.fixture(scope="module")
def loaded() -> dict:
    return {}


def _load(loaded: dict, rel: str):
    if rel not in loaded:
        loaded[rel] = load(shared(SHARED_TRACES / rel))
    return loaded[rel]


# --- invariants on every shared trace ---------------------------------------------------

@pytest.mark.parametrize("rel", ALL_SHARED)
def test_invariants_on_every_shared_trace(loaded, rel):
    t = _load(loaded, rel)
    s = summarize(t)
    assert 0 <= s.busy_ns <= s.trace_busy_ns
    windows = analysis_windows(t, work_rows(t))
    for w in windows.values():  # sorted, disjoint, non-empty
        start, end = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        assert (end >= start).all() and (start[1:] >= end[:-1]).all()
    for d in s.devices:
        w = windows[d.device]
        assert d.span_ns == int((w["end_ns"] - w["start_ns"]).sum())
        assert d.span_ns <= int(w["end_ns"].max() - w["start_ns"].min())
        if d.host_wait_ns is not None:
            assert d.host_wait_ns >= 0 and d.queued_idle_ns >= 0
            assert d.busy_ns + d.host_wait_ns + d.queued_idle_ns == d.span_ns
            assert d.per_step["host_wait_ns"].sum() == d.host_wait_ns
            assert d.queue_max >= 0 and d.queue_mean >= 0
    if s.launch_bound_fraction is not None:
        assert 0 <= s.launch_bound_fraction <= s.idle_fraction <= 1
    lo = s.launches
    for share in (lo.kernel.api_share, lo.copies.api_share):
        assert share is None or 0 <= share <= 1
    assert lo.kernel.matched <= lo.kernel.count and lo.copies.matched <= lo.copies.count
    json.dumps(s.to_dict())


# --- host wait vs queued idle, by another path ------------------------------------------

def _nsys_rows(db: sqlite3.Connection) -> dict:
    """Per device: (start, end, launch start, (launch end, stream)) of every device row,
    joined to its runtime call within its process, straight from SQL."""
    rows: dict = {}
    present = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table not in present:
            continue
        for dev, stream, s, e, ls, le in db.execute(f"""
                SELECT d.deviceId, d.streamId, d.start, d.end, r.start, r.end FROM {table} d
                LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = d.correlationId
                  AND (r.globalTid {PROCESS}) = d.globalPid"""):
            rows.setdefault(dev, []).append((s, e, ls, (le, stream)))
    return rows


@pytest.mark.parametrize("name", ["h100_2gpu_mfu_before", "h100_2gpu_mfu_after",
                                  "h100_2gpu_window", "rtx3080_tiny"])
def test_nsys_host_wait_and_queued_match_sql(loaded, name):
    """No steps: each device's window runs from its first launch (or first row) to its
    last row end; the split is recomputed by a plain-Python sweep over SQL rows."""
    db = sqlite3.connect(f"file:{shared(NSYS / f'{name}.sqlite')}?mode=ro", uri=True)
    expected = {}
    for dev, items in _nsys_rows(db).items():
        first = min(min(s for s, _, _, _ in items),
                    min((ls for _, _, ls, _ in items if ls is not None), default=10 ** 30))
        expected[dev] = split_by_sweep(items, [(first, max(e for _, e, _, _ in items))])
    s = summarize(_load(loaded, f"nsys/{name}.sqlite"))
    got = {d.device: (d.span_ns, d.busy_ns, d.host_wait_ns, d.queued_idle_ns)
           for d in s.devices}
    assert got == expected


def test_gpu_running_behind_its_host_is_queued_not_launch_bound():
    """The vLLM-decode shape: the host launches a burst, the GPU starts 7.8 ms later and
    then runs back to back. Idle 98% of the span from first launch to last end, of which
    nothing is waiting for the host."""
    rows = [row("runtime", "hipLaunchKernel", 1_000 * i, 500, corr=i) for i in range(5)]
    rows += [row("kernel", f"k{i}", 7_800_000 + 20_000 * i, 20_000, corr=i) for i in range(5)]
    t = trace(*rows)
    s = summarize(t)
    assert s.span_ns == 7_900_000 and s.busy_ns == 100_000
    assert s.host_wait_ns == 500  # [0, 500): the first call has not returned
    assert s.queued_idle_ns == 7_800_000 - 500
    assert s.launch_bound_fraction == pytest.approx(500 / 7_900_000)
    assert s.devices[0].queue_max == 5
    assert list(t.kernels()["launch_api"].astype(str)) == ["hipLaunchKernel"] * 5


def test_a_launch_bound_gpu_waits_for_its_host():
    """Launch calls of 10 µs each, kernels of 2 µs that start as their call returns."""
    rows = []
    for i in range(4):
        rows.append(row("runtime", "cudaLaunchKernel", 10_000 * i, 10_000, corr=i))
        rows.append(row("kernel", f"k{i}", 10_000 * i + 9_000, 2_000, corr=i))
    s = summarize(trace(*rows))
    assert (s.span_ns, s.busy_ns, s.queued_idle_ns) == (41_000, 8_000, 0)
    assert s.host_wait_ns == 33_000
    assert s.launches.short_kernels == 4


def test_rows_launched_before_the_trace_are_queued():
    """A kernel with no launch row that runs before its stream's first launched kernel was
    queued when recording began; one after it (a lost record) is not counted pending."""
    s = summarize(trace(
        row("kernel", "early", 1_000, 100, corr=90, stream=7),
        row("runtime", "cudaLaunchKernel", 0, 50, corr=1),
        row("kernel", "k", 2_000, 100, corr=1, stream=7),
        row("kernel", "late", 5_000, 100, corr=91, stream=7),
    ))
    # window [0, 5100); pending: early [0, 1000), k [50, 2000)
    assert s.queued_idle_ns == 2_000 - 100
    assert s.host_wait_ns == 5_100 - 300 - 1_900
    assert s.launches.unlaunched_kernels == 2


def test_device_without_any_launch_has_no_split():
    s = summarize(trace(row("kernel", "k", 0, 10, corr=1), row("kernel", "k", 20, 10, corr=2)))
    assert s.host_wait_ns is None and s.launch_bound_fraction is None
    assert s.idle_fraction == pytest.approx(10 / 30)
    assert any("cannot be split" in n for n in s.notes)


# --- launches: populations, graphs, duplicates, the one link ------------------------------

def test_launch_populations_and_graph_launches_match_raw():
    """a100_80gb_queue: kernel launches, copy/set calls and 70 cudaGraphLaunch calls counted
    from the raw JSON; graph kernels kept out of the short-kernel figure, their delay
    taken from the graph's rows before them."""
    path = shared(KINETO / "a100_80gb_queue.json.gz")
    ref = Reference(path)
    s = summarize(load(path))
    lo = s.launches
    names = Counter(e["name"] for e in ref.launches)
    graph_calls = [e for e in ref.launches if is_graph_launch(e["name"])]
    assert lo.graphs.count == len(graph_calls) == 70
    assert lo.kernel.count == sum(n for k, n in names.items()
                                  if launch_kind(k) == "kernel" and not is_graph_launch(k))
    assert lo.copies.count == sum(n for k, n in names.items() if launch_kind(k) != "kernel")
    launch = ref.launch_of()
    graph_corr = {e["args"]["correlation"] for e in graph_calls}
    graph_kernels = [k for k in ref.kernels if k["args"].get("correlation") in graph_corr]
    assert lo.graphs.kernels == len(graph_kernels) == 135
    assert lo.graphs.kernel_ns == sum(ns(k["dur"]) for k in graph_kernels)
    single = [(k, launch[k["args"]["correlation"]]) for k in ref.kernels
              if k["args"].get("correlation") in launch
              and k["args"]["correlation"] not in graph_corr]
    assert lo.short_kernels == sum(ns(k["dur"]) < ns(la["dur"]) for k, la in single)
    delays = [max(0, ns(k["ts"]) - ns(la["ts"]) - ns(la["dur"])) for k, la in single]
    # a graph's kernels: the first waits for the call, the others for the graph's rows
    # before them (its kernels and copies, the latest end)
    for call in graph_calls:
        corr = call["args"]["correlation"]
        rows = sorted((ns(d["ts"]), ns(d["ts"]) + ns(d["dur"]), d.get("cat") == "kernel")
                      for d in ref.device if d["args"].get("correlation") == corr)
        latest = ns(call["ts"]) + ns(call["dur"])
        for i, (start, end, is_kernel) in enumerate(rows):
            if is_kernel:
                delays.append(max(0, start - latest))
            latest = end if i == 0 else max(latest, end)
    assert lo.delay.count == len(delays)
    assert lo.delay.median_ns == statistics.median(delays)
    # one row per graph launch, with its kernel count and first-kernel delay
    table = launch_table(load(path))
    graphs = table[table["population"] == "graph"].set_index("correlation")
    for call in graph_calls[:10]:  # a graph's nodes are kernels and copies
        corr = call["args"]["correlation"]
        mine = [k for k in ref.device if k["args"].get("correlation") == corr]
        r = graphs.loc[corr]
        assert r["device_count"] == len(mine)
        if mine:
            first = min(ns(k["ts"]) for k in mine)
            assert r["delay_ns"] == max(0, first - ns(call["ts"]) - ns(call["dur"]))


def test_export_launches_is_per_process_on_two_gpu_exports(tmp_path, loaded):
    """Correlation ids repeat across the two processes: each launch row counts only its
    own process's device rows (SQL), and there is one row per launch call."""
    name = "h100_2gpu_mfu_before"
    db = sqlite3.connect(f"file:{shared(NSYS / f'{name}.sqlite')}?mode=ro", uri=True)
    rows = db.execute(f"""
        WITH dev AS (
          SELECT globalPid p, correlationId c FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL
          SELECT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL
          SELECT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET)
        SELECT r.correlationId, s.value,
               (SELECT count(*) FROM dev WHERE dev.p = (r.globalTid {PROCESS})
                AND dev.c = r.correlationId)
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId""").fetchall()
    calls = [(c, n) for c, v, n in rows if launch_kind(v) is not None]
    assert main(["analyze", str(shared(NSYS / f"{name}.sqlite")), "--export", str(tmp_path)]) == 0
    table = pd.read_parquet(tmp_path / "launches.parquet")
    assert len(table) == len(calls)
    assert Counter(zip(table["correlation"], table["device_count"], strict=True)) == \
        Counter(calls)
    repeated = Counter(c for c, _ in calls)
    assert any(n > 1 for n in repeated.values())  # the case the link must get right
    # every exported table agrees on the link
    kernels = pd.read_parquet(tmp_path / "kernels.parquet")
    linked = kernels[kernels["launch_id"] >= 0]
    assert set(linked["launch_id"]) <= set(table["launch_id"])


def _copy(src: Path, tmp_path: Path) -> sqlite3.Connection:
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    return sqlite3.connect(dst)


def test_a_call_recorded_twice_is_one_call(tmp_path):
    """nsys records some calls twice under one correlation id, one nested in the other
    (cudaMemcpy around cudaMemcpy_v3020): one call, named by the outer record."""
    db = _copy(shared(NSYS / "rtx3080_tiny.sqlite"), tmp_path)
    start, end, tid, corr = db.execute(
        "SELECT r.start, r.end, r.globalTid, r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r"
        " JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaMemcpyAsync%'").fetchone()
    sid = db.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
    db.execute("INSERT INTO StringIds (id, value) VALUES (?, 'cudaMemcpy_v3020')", (sid,))
    cols = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
    values = {c: None for c in cols}
    values.update(start=start - 100, end=end + 100, globalTid=tid, correlationId=corr,
                  nameId=sid, eventClass=0, returnValue=0)
    values = {c: v for c, v in values.items() if c in cols}
    db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME ({', '.join(values)}) VALUES "
               f"({', '.join('?' * len(values))})", list(values.values()))
    db.commit()
    before = summarize(load(NSYS / "rtx3080_tiny.sqlite"))
    t = load(tmp_path / "rtx3080_tiny.sqlite")
    after = summarize(t)
    assert after.launches.copies.count == before.launches.copies.count == 1
    assert after.launches.copies.matched == 1
    ev = t.events
    memcpy = ev[ev["kind"] == "memcpy"]
    assert list(memcpy["launch_api"].astype(str)) == ["cudaMemcpy"]  # the outer record
    calls = ev[(ev["kind"] == "runtime") & ev["name"].astype(str).str.startswith("cudaMemcpy")]
    assert len(calls) == 2 and sorted(calls["launch_id"] >= 0) == [False, True]
    assert len(launch_table(t)) == len(launch_table(load(NSYS / "rtx3080_tiny.sqlite")))


# --- formats --------------------------------------------------------------------------

def test_pytorch_1_9_steps_are_operators(tmp_path):
    """PyTorch <= 1.9 writes capitalised categories and ProfilerStep#N as an Operator."""
    events = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#7", "pid": 1, "tid": 1,
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1,
         "ts": 10, "dur": 20},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 12, "dur": 5, "args": {"correlation": 3}},
        {"ph": "X", "cat": "Kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7,
         "ts": 40, "dur": 30, "args": {"correlation": 3, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#8", "pid": 1, "tid": 1,
         "ts": 100, "dur": 50},
    ]
    path = tmp_path / "pt19.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    t = load(path)
    s = summarize(t)
    assert s.scope == "steps" and s.steps == 2
    assert list(t.events.loc[t.events["kind"] == "step", "name"].astype(str)) == [
        "ProfilerStep#7", "ProfilerStep#8"]
    assert t.kernels()["step"].tolist() == [7] and t.kernels()["op"].astype(str).tolist() == [
        "aten::mm"]
    assert s.span_ns == 150_000 and s.busy_ns == 30_000


def test_nsys_null_columns_of_older_reports(tmp_path, loaded):
    """Reports of older nsys exported by 2022.4 leave columns NULL
    (TARGET_INFO_GPU.cuDevice among them): read them, name devices by id."""
    db = _copy(shared(NSYS / "rtx3080_tiny.sqlite"), tmp_path)
    db.execute("UPDATE TARGET_INFO_GPU SET cuDevice = NULL")
    db.execute("UPDATE META_DATA_EXPORT SET value = NULL")
    # the nullable id columns too: one kernel loses its correlation and process
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = NULL, globalPid = NULL, "
               "mangledName = NULL WHERE rowid = (SELECT min(rowid) FROM "
               "CUPTI_ACTIVITY_KIND_KERNEL)")
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid = "
               "(SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME)")
    db.commit()
    assert main(["analyze", str(tmp_path / "rtx3080_tiny.sqlite"), "--json"]) == 0
    t = load(tmp_path / "rtx3080_tiny.sqlite")
    assert t.meta["devices"] == {"0": "NVIDIA GeForce RTX 3080"}
    original = _load(loaded, "nsys/rtx3080_tiny.sqlite")
    assert (t.events["kind"] == "kernel").sum() == (original.events["kind"] == "kernel").sum()
    assert summarize(t).launches.unlaunched_kernels == 1


def test_kernels_outside_op_ranges_take_the_innermost_nvtx_range(tmp_path):
    """TensorRT layers and user ranges: a kernel launched inside an NVTX range but no
    aten:: range takes that range as its op; an aten:: range still wins."""
    db = _copy(shared(NSYS / "rtx3080_tiny.sqlite"), tmp_path)
    launches = db.execute(
        "SELECT r.start, r.end, r.globalTid, r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r"
        " JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaLaunchKernel%'"
        " ORDER BY r.start").fetchall()
    assert len(launches) == 2
    db.execute("CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, "
               "text TEXT, globalTid INTEGER, domainId INTEGER, textId INTEGER)")
    (s0, e0, tid, _), (s1, e1, _, _) = launches
    for start, end, text in ((s0 - 10, e1 + 10, "ExecutionContext::enqueue"),
                             (s0 - 5, e0 + 5, "(Unnamed Layer* 0) [Convolution]"),
                             (s1 - 5, e1 + 5, "aten::conv2d")):
        db.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?, 0, NULL)",
                   (start, end, text, tid))
    db.commit()
    t = load(tmp_path / "rtx3080_tiny.sqlite")
    k = t.kernels().sort_values("ts_ns")
    assert k["op"].astype(str).tolist() == ["(Unnamed Layer* 0) [Convolution]", "aten::conv2d"]
    ev = t.events
    # "ns::name" ranges that are not ATen ops stay annotations
    assert ev.loc[ev["name"].astype(str) == "ExecutionContext::enqueue", "kind"].tolist() == [
        "annotation"]


# --- kernel identity and spread --------------------------------------------------------

def _nsys_stats(sqlite: Path) -> pd.DataFrame:
    out = subprocess.run(["nsys", "stats", "--report", "gpukernsum", "--format", "csv",
                          "--output", "-", str(sqlite)], capture_output=True, text=True,
                         check=True).stdout
    body = out[out.index("Time (%)"):]
    return pd.DataFrame(list(csv.DictReader(io.StringIO(body))))


@pytest.mark.requires(shutil.which("nsys") is None, "needs Nsight Systems (.ci/run "
                      "installs it)")
def test_kernel_table_by_config_matches_nsys_stats(tmp_path):
    """``nsys stats``' kernel summary groups by name, grid and block; so does --by config
    (plus registers and shared memory). Count, total, mean, median, min, max and the
    standard deviation agree per group."""
    sqlite = tmp_path / "before.sqlite"
    shutil.copyfile(shared(NSYS / "h100_2gpu_mfu_before.sqlite"), sqlite)  # nsys writes beside it
    peer = _nsys_stats(sqlite)
    s = summarize(load(sqlite), by_config=True)
    k = s.kernels
    grid = k["details"].str.extract(r"grid:(\S+) block:(\S+)")
    ours = {}
    for r, g, b in zip(k.itertuples(), grid[0], grid[1], strict=True):
        key = (r.name, g, b)
        assert key not in ours  # registers/shared memory never split an nsys group here
        ours[key] = r
    assert len(ours) == len(peer)
    for p in peer.itertuples():
        g = ",".join(p.GridXYZ.split())
        b = ",".join(p.BlockXYZ.split())
        r = ours[(p.Name, g, b)]
        assert r.count == int(p.Instances)
        assert r.total_ns == int(p._2)
        assert r.min_ns == int(p._6) and r.max_ns == int(p._7)
        assert r.mean_ns == pytest.approx(float(p._4), abs=0.1)
        assert r.median_ns == pytest.approx(float(p._5), abs=0.5)
        assert r.std_ns == pytest.approx(float(p._8), abs=0.1)
    # the flash kernel ran in two configurations, 7.85 ms and 0.155 ms on average
    flash = k[k["name"].str.contains("flash_fwd_kernel")]
    assert len(flash) == 2 and flash["mean_ns"].max() > 40 * flash["mean_ns"].min()
    assert (flash["category"] == "attention").all()


def test_kineto_launch_configuration_from_raw_args():
    ref = Reference(shared(KINETO / "a100_alexnet.json.gz"))
    want = Counter(
        (k["name"], f"regs:{k['args']['registers per thread']} "
                    f"shm:{k['args']['shared memory']} "
                    f"grid:{','.join(map(str, k['args']['grid']))} "
                    f"block:{','.join(map(str, k['args']['block']))}")
        for k in ref.kernels)
    s = summarize(load(KINETO / "a100_alexnet.json.gz"), by_config=True)
    assert dict(zip(zip(s.kernels["name"], s.kernels["details"], strict=True),
                    s.kernels["count"], strict=True)) == dict(want)
    by_name = summarize(load(KINETO / "a100_alexnet.json.gz")).kernels
    assert len(by_name) < len(s.kernels) and set(by_name["details"]) == {""}
    # min / median / max / std per name, from the raw durations
    durs: dict = {}
    for k in ref.kernels:
        durs.setdefault(k["name"], []).append(ns(k["dur"]))
    for r in by_name.itertuples():
        d = durs[r.name]
        assert (r.min_ns, r.max_ns) == (min(d), max(d))
        assert r.median_ns == statistics.median(d)
        assert r.std_ns == pytest.approx(statistics.stdev(d) if len(d) > 1 else 0.0)


def test_analyze_by_config_cli(capsys):
    assert main(["analyze", str(shared(KINETO / "a100_alexnet.json.gz")), "--by", "config",
                 "--json", "--top", "3"]) == 0
    top = json.loads(capsys.readouterr().out)["top_kernels"]
    assert all(k["config"].startswith("regs:") for k in top)
    assert {"min_ns", "median_ns", "max_ns", "std_ns"} <= set(top[0])


# --- casts ------------------------------------------------------------------------------

def test_nested_casts_count_once_and_casts_parquet_has_one_row_each(tmp_path):
    t = trace(
        row("op", "aten::to", 0, 100),
        row("op", "aten::_to_copy", 5, 90),
        row("op", "aten::copy_", 10, 80),
        row("op", "aten::_to_copy", 200, 50),
        row("op", "aten::copy_", 205, 40),
    )
    s = summarize(t)
    assert s.casts.cast_ops == 2
    assert s.casts.count == 2 and s.casts.total_ns == 80 + 40  # the copy_ units of work
    casts = export_tables(t)["casts"]
    assert len(casts) == 2 and casts["dur_ns"].sum() == 120


def test_gzip_round_trip_keeps_launch_ids(tmp_path):
    """The link survives import -> Parquet -> load, and a version-1 file is upgraded."""
    raw = shared(KINETO / "ampere_sampled_rank0.json.gz")
    out = tmp_path / "t.parquet"
    assert main(["import", str(raw), "-o", str(out)]) == 0
    a, b = load(raw), load(out)
    assert a.events["launch_id"].equals(b.events["launch_id"])
    with gzip.open(raw) as f:
        assert json.load(f)  # the raw file itself stays readable
    assert np.array_equal(launch_table(a)["device_count"], launch_table(b)["device_count"])
