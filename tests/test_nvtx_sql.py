"""An export of NVTX ranges alone read by SQL into the Ranges section's columns
(``parsers/nsys/ranges_sql.py``, what ``analyze`` asks for): the same rows, figures and
output as the export read row by row, and nvtxsum's figures by raw SQL and by ``nsys
stats``, on real exports and on a generated one."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_nvtx_ranges import _export, _ranges, nsys_stats, own_nvtxsum
from traceviz import load
from traceviz.algos.intervals import innermost_enclosing, sorted_parents
from traceviz.analyses.summary.ranges import range_figures
from traceviz.analyses.summary.ranges.instances import range_rows
from traceviz.cli import main
from traceviz.parsers.nsys.ranges_sql import ranges_apart

RANGE_ONLY = ("ecf_baseline", "ecf_poolformer")  # real exports of NVTX ranges alone
NVTX_COLUMNS = ("start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
                "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, "
                "globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
                "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
                "uint32Value INTEGER, int32Value INTEGER, floatValue REAL, "
                "jsonTextId INTEGER, jsonText TEXT")


def gtid(pid: int, tid: int) -> int:
    return (1 << 56) | (pid << 24) | tid


# (start, end, eventType, text, textId, globalTid, domainId); 59 push/pop, 60 start/end,
# 75 a domain created, 34 a mark (no range, but the export's last time may be its)
ROWS = [
    (0, None, 75, "MPI", None, gtid(100, 100), 1),
    (0, None, 75, "Torch", None, gtid(100, 101), 2),  # process 100, from another thread
    (0, None, 75, "Sched", None, gtid(200, 200), 1),  # id 1 again, in another process
    # thread 100: nesting three deep, a name twice in one parent, equal starts
    (10, 1_000, 59, "outer", None, gtid(100, 100), None),
    (100, 500, 59, "middle", None, gtid(100, 100), None),
    (150, 200, 59, "inner", None, gtid(100, 100), None),
    (250, 300, 59, "inner", None, gtid(100, 100), None),
    (600, 900, 59, "pack", None, gtid(100, 100), 1),  # MPI:pack
    (600, 700, 59, None, 1, gtid(100, 100), 1),  # MPI:registered_a
    (600, 650, 59, None, None, gtid(100, 100), None),  # <unnamed range>
    # thread 101: start/end ranges that overlap without nesting, a Torch domain range
    (0, 400, 60, "load", None, gtid(100, 101), None),
    (200, 600, 60, "decode", None, gtid(100, 101), None),
    (250, 300, 59, None, 2, gtid(100, 101), 2),  # Torch:registered_b inside both
    (450, 440, 59, "backwards", None, gtid(100, 101), None),  # ends before it starts
    # process 200: Sched ranges, a push never popped (lasts to the last NVTX time)
    (50, 150, 59, "gather_stats", None, gtid(200, 200), 1),
    (160, 170, 59, "gather_stats", None, gtid(200, 200), 1),
    (300, None, 59, "open", None, gtid(200, 200), None),
    (2_000, None, 34, "mark", None, gtid(200, 200), None),
]
STRINGS = [(1, "registered_a"), (2, "registered_b")]


def make_export(path: Path, rows: list[tuple] = ROWS, kernels: bool = False) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        db.executemany("INSERT INTO StringIds VALUES (?, ?)", STRINGS)
        db.execute(f"CREATE TABLE NVTX_EVENTS ({NVTX_COLUMNS})")
        db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, textId, "
                       "globalTid, domainId) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        if kernels:  # one kernel launched inside "inner": the export is no longer ranges alone
            db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, "
                       "globalTid INTEGER, correlationId INTEGER, nameId INTEGER)")
            db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, "
                       "deviceId INTEGER, streamId INTEGER, correlationId INTEGER, "
                       "globalPid INTEGER, demangledName INTEGER, shortName INTEGER, "
                       "mangledName INTEGER)")
            db.execute("INSERT INTO StringIds VALUES (3, 'cudaLaunchKernel'), (4, 'k')")
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (160, 170, ?, 1, 3)",
                       (gtid(100, 100),))
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (180, 190, 0, 7, 1, ?, "
                       "4, 4, 4)", (gtid(100, 100) & ~0xFFFFFF,))
    return path


def both_ways(path: Path):
    """(the trace read with the ranges apart, the trace read row by row)."""
    with ranges_apart():
        apart = load(path)
    return apart, load(path)


def brute_parents(rows: pd.DataFrame) -> list[int]:
    """Each range's tightest range around it on its thread (the latest-starting one that
    holds it whole), by looking at every other range."""
    out = []
    for i, r in enumerate(rows.itertuples()):
        around = [j for j, o in enumerate(rows.itertuples()) if j < i and o.pid == r.pid
                  and o.tid == r.tid and o.start_ns <= r.start_ns and o.end_ns >= r.end_ns]
        out.append(max(around, key=lambda j: (rows.start_ns[j], j)) if around else -1)
    return out


def test_generated_export_read_apart_equals_the_rows(tmp_path, capsys):
    path = make_export(tmp_path / "ranges.sqlite")
    apart, whole = both_ways(path)
    assert apart.nvtx_ranges is not None and apart.events.empty
    assert whole.nvtx_ranges is None
    assert apart.meta["origin_ns"] == whole.meta["origin_ns"] == 0
    a, w = range_rows(apart), range_rows(whole)
    pd.testing.assert_frame_equal(a, w, check_dtype=False, check_categorical=False)
    # the names as nsys' reports make them: domains per process, registered strings
    assert set(a["name"].astype(str)) == {
        "outer", "middle", "inner", "MPI:pack", "MPI:registered_a", "<unnamed range>",
        "load", "decode", "Torch:registered_b", "Sched:gather_stats", "open"}
    assert a["parent"].tolist() == brute_parents(a)
    assert a.loc[a["name"] == "inner", "depth"].tolist() == [2, 2]
    # the open push lasts to the export's last NVTX time (the mark at 2,000)
    assert a.loc[a["name"] == "open", "end_ns"].tolist() == [2_000]
    fa, fw = range_figures(apart), range_figures(whole)
    pd.testing.assert_frame_equal(fa.table, fw.table, check_dtype=False)
    assert fa.timeline == fw.timeline
    # nvtxsum by raw SQL (the range ending before it starts is no range of either)
    want = {(k[0] or "<unnamed range>", k[1]): v for k, v in own_nvtxsum(path).items()
            if k != ("backwards", "PushPop")}
    ours = {(r["name"], r["style"]): r for r in fa.table.to_dict("records")}
    assert set(ours) == set(want)
    for key, v in want.items():
        r = ours[key]
        assert (r["instances"], r["total_ns"], r["min_ns"], r["max_ns"]) == \
            (v["instances"], v["total_ns"], v["min_ns"], v["max_ns"]), key
        assert r["med_ns"] == v["med_ns"] and r["std_ns"] == pytest.approx(v["std_ns"])
    assert ours[("inner", "PushPop")]["parent"] == "middle"
    assert ours[("Torch:registered_b", "PushPop")]["parent"] == "decode"
    # analyze (which reads them apart) prints what the rows print
    assert main(["analyze", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # --export writes the events table: the rows are read
    assert main(["analyze", str(path), "--json", "--export", str(tmp_path / "tables")]) == 0
    rows_out = json.loads(capsys.readouterr().out.split("\nwrote ")[0])
    assert out == rows_out
    assert main(["analyze", str(path), "--width", "120"]) == 0
    text = capsys.readouterr().out
    assert "user ranges only: 13 ranges (11 names)" in text


def test_generated_export_against_nsys_stats(tmp_path):
    path = make_export(tmp_path / "ranges.sqlite")
    report = nsys_stats(path, "nvtxsum", tmp_path)
    if report is None:
        pytest.skip("nsys is not installed")
    with ranges_apart():
        table = range_figures(load(path)).table
    ours = {(r["name"], r["style"]): r for r in table.to_dict("records")}
    # nsys counts the range that ends before it starts, with a negative time
    report = [r for r in report if r["Range"] != "backwards"]

    def named(text: str) -> str:  # nsys writes a range without a text as "None"
        return "<unnamed range>" if text in ("", "None") else text

    assert {(named(r["Range"]), r["Style"]) for r in report} == set(ours)
    for row in report:
        r = ours[(named(row["Range"]), row["Style"])]
        assert (r["instances"], r["total_ns"], r["min_ns"], r["max_ns"]) == (
            int(row["Instances"]), int(row["Total Time (ns)"]), int(row["Min (ns)"]),
            int(row["Max (ns)"]))
        assert r["med_ns"] == pytest.approx(float(row["Med (ns)"]), abs=0.051)
        assert r["std_ns"] == pytest.approx(float(row["StdDev (ns)"]), abs=0.051)


@pytest.mark.parametrize("name", RANGE_ONLY)
def test_real_range_only_exports_read_apart(name):
    path = _export(name)
    apart, whole = both_ways(path)
    assert apart.nvtx_ranges is not None and len(apart.nvtx_ranges) == len(_ranges(path))
    pd.testing.assert_frame_equal(range_rows(apart), range_rows(whole), check_dtype=False,
                                  check_categorical=False)
    fa = range_figures(apart)
    pd.testing.assert_frame_equal(fa.table, range_figures(whole).table, check_dtype=False)
    want = own_nvtxsum(path)
    got = {(r["name"], r["style"]): (r["instances"], r["total_ns"], r["med_ns"])
           for r in fa.table.to_dict("records")}
    assert got == {k: (v["instances"], v["total_ns"], v["med_ns"]) for k, v in want.items()}


def _with(rows: list[tuple], *extra: tuple) -> list[tuple]:
    return [*rows, *extra]


@pytest.mark.parametrize("rows, kernels", [
    (_with(ROWS, (1_100, 1_200, 59, "step 3", None, gtid(100, 100), None)), False),
    (_with(ROWS, (1_100, 1_200, 59, "aten::mm, seq = 4, op_id = 7", None, gtid(100, 100),
                  None)), False),
    (_with(ROWS, (1_100, 1_200, 59, "ncclAllReduce", None, gtid(100, 100), None)), False),
    (_with(ROWS, (1_100, 1_200, 59, "DataLoader.__next__", None, gtid(100, 100), None)),
     False),
    (ROWS, True),
    (_with(ROWS, (1_100, 1_200.5, 59, "half", None, gtid(100, 100), None)), False),
    (_with(ROWS, ("soon", 1_200, 59, "text", None, gtid(100, 100), None)), False),
    (_with(ROWS, (0, None, 75, "Odd", None, gtid(100, 100), "x")), False),
], ids=["a step range", "an op range", "a collective", "an input call", "kernels",
        "a time that is no integer", "a time written as text", "a domain id as text"])
def test_other_exports_are_read_row_by_row(tmp_path, rows, kernels):
    """Step and op ranges, ranges the communication or input pipeline sections read, CUDA
    rows, values the reader checks: the export is read whole, and its figures are the
    same whichever way analyze asks."""
    path = make_export(tmp_path / "x.sqlite", rows, kernels)
    apart, whole = both_ways(path)
    assert apart.nvtx_ranges is None
    pd.testing.assert_frame_equal(apart.events, whole.events)
    if kernels:  # the kernel's range: "inner" (its launch call at 160-170)
        k = range_figures(apart).kernels
        assert k[["range", "kernel", "kernels"]].values.tolist() == [
            ["inner", "k", 1], ["middle", "k", 1], ["outer", "k", 1]]


def test_sorted_parents_is_innermost_enclosing():
    none = np.zeros(0, dtype=np.int64)
    assert sorted_parents(np.zeros(0, dtype=bool), none, none).tolist() == []
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 200))
        group = np.sort(rng.integers(0, 3, n))
        start, dur = rng.integers(0, 60, n), rng.integers(0, 25, n)
        order = np.lexsort((-dur, start, group))
        group, start, end = group[order], start[order], (start + dur)[order]
        want = innermost_enclosing(group, start, end, group, start, q_exclude=np.arange(n))
        new_group = np.r_[True, group[1:] != group[:-1]]
        assert sorted_parents(new_group, start, end).tolist() == want.tolist()


def test_a_million_style_export_keeps_its_names_per_thread(tmp_path):
    """Many ranges per name on several threads: counts per (name, thread) as SQL counts."""
    rows = [(i * 10, i * 10 + 5, 59, f"r{i % 3}", None, gtid(1, 1 + i % 4), None)
            for i in range(5_000)]
    path = make_export(tmp_path / "many.sqlite", rows)
    with ranges_apart():
        trace = load(path)
    got = trace.nvtx_ranges.groupby(["name", "tid"], observed=True).size().to_dict()
    want: dict[tuple[str, int], int] = defaultdict(int)
    with sqlite3.connect(path) as db:
        for text, count, tid in db.execute("SELECT text, count(*), globalTid & 16777215 FROM "
                                           "NVTX_EVENTS GROUP BY 1, 3"):
            want[(text, tid)] = count
    assert got == dict(want)


@pytest.mark.parametrize("where", ["WHERE n < 0", ""], ids=["no row ever", "rows for ever"])
def test_a_view_that_never_ends_stops_at_the_time_limit(tmp_path, where):
    """The queries run under the export's guard: a view of NVTX_EVENTS that never ends
    stops at the time limit, in one line."""
    path = make_export(tmp_path / "v.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE NVTX_EVENTS")
        db.execute("CREATE VIEW NVTX_EVENTS AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL "
                   "SELECT n + 1 FROM r) SELECT n AS start, n + 5 AS end, 59 AS eventType, "
                   "'r' AS text, NULL AS textId, 1 AS globalTid, NULL AS domainId, "
                   f"NULL AS category FROM r {where}")
    done = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(path), "--json"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TRACEVIZ_MAX_SQLITE_SECONDS": "1"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "reading table NVTX_EVENTS took past 1 s" in done.stderr
