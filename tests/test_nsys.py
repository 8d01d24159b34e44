"""Nsight Systems exports: the real ones in ../shared/traces/nsys, checked against SQL.

Every expected figure here comes from the test's own SQL over the export, not from
traceviz: counts per table, bytes, the (process, correlationId) join, NVTX ranges.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from tests.conftest import SHARED_TRACES, shared
from traceviz.analyses import summarize
from traceviz.analyses.compare.runs import kernel_diff, run_figures
from traceviz.cli import main
from traceviz.parsers import detect_format, load
from traceviz.trace import Trace

NSYS = SHARED_TRACES / "nsys"
EXPORTS = ["rtx3080_tiny", "h100_2gpu_window", "h100_2gpu_mfu_before", "h100_2gpu_mfu_after"]
PROCESS = "& -16777216"  # globalTid & 0xFFFFFFFFFF000000, as a signed 64-bit mask
DEVICE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                 "CUPTI_ACTIVITY_KIND_MEMSET")


def _db(name: str) -> sqlite3.Connection:
    path = shared(NSYS / f"{name}.sqlite")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _one(db: sqlite3.Connection, sql: str) -> int:
    return db.execute(sql).fetchone()[0] or 0


def _device_union(db: sqlite3.Connection) -> str:
    return " UNION ALL ".join(f"SELECT globalPid p, correlationId c, deviceId d FROM {t}"
                              for t in DEVICE_TABLES if t in _tables(db))


@pytest.fixture(scope="module")
def traces() -> dict[str, Trace]:
    return {name: load(shared(NSYS / f"{name}.sqlite")) for name in EXPORTS}


@pytest.mark.parametrize("name", EXPORTS)
def test_counts_match_sql(traces, name):
    db = _db(name)
    ev = traces[name].events
    kinds = ev["kind"].value_counts()
    kernels = ev[ev["kind"] == "kernel"]
    assert kinds["kernel"] == _one(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    per_device = dict(db.execute("SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                 "GROUP BY 1").fetchall())
    assert kernels["device"].value_counts().to_dict() == per_device
    assert kinds["runtime"] == _one(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    assert kinds["memcpy"] == _one(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    memcpy = ev[ev["kind"] == "memcpy"]
    assert memcpy["bytes"].sum() == _one(db, "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    if "CUPTI_ACTIVITY_KIND_MEMSET" in _tables(db):
        assert (ev["kind"] == "memset").sum() == _one(
            db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")
    # kernel time in ns, exactly
    assert kernels["dur_ns"].sum() == _one(
        db, "SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    # names through StringIds
    top = db.execute("SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s"
                     " ON s.id = k.demangledName GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1").fetchone()
    assert (kernels["name"].astype(str) == top[0]).sum() == top[1]


@pytest.mark.parametrize("name", EXPORTS)
def test_kernel_launch_details_match_sql(traces, name):
    with _db(name) as db:
        want = Counter(f"regs:{r} shm:{s} grid:{gx},{gy},{gz} block:{bx},{by},{bz}"
                       for r, s, gx, gy, gz, bx, by, bz in db.execute(
                           "SELECT registersPerThread, staticSharedMemory + dynamicSharedMemory,"
                           " gridX, gridY, gridZ, blockX, blockY, blockZ"
                           " FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    ev = traces[name].events
    got = ev.loc[ev["kind"] == "kernel", "details"].astype(str).value_counts().to_dict()
    assert got == dict(want)
    ranges = (ev["kind"] == "annotation").to_numpy()
    assert set(ev.loc[(ev["kind"] != "kernel").to_numpy() & ~ranges, "details"].astype(str)) \
        <= {""}
    # an NVTX range's details: its style, then its domain, category, payload where set
    assert ev.loc[ranges, "details"].astype(str).str.match(r"style:(PushPop|StartEnd)\b").all()


@pytest.mark.parametrize("name", EXPORTS)
def test_launch_join_is_per_process(traces, name):
    db = _db(name)
    ev = traces[name].events
    device = ev[ev["kind"].isin(["kernel", "memcpy", "memset"])]
    matched = _one(db, f"""
        WITH rt AS (SELECT globalTid {PROCESS} p, correlationId c FROM CUPTI_ACTIVITY_KIND_RUNTIME),
             dev AS ({_device_union(db)})
        SELECT count(*) FROM dev WHERE EXISTS (SELECT 1 FROM rt WHERE rt.p = dev.p AND rt.c = dev.c)
    """)
    assert device["launch_ts_ns"].notna().sum() == matched
    # the launch call really is the one of that correlation id: launch start checked
    # against SQL for the kernel rows
    ref = db.execute(f"""
        SELECT k.start - r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.correlationId = k.correlationId AND (r.globalTid {PROCESS}) = k.globalPid
    """).fetchall()
    k = ev[(ev["kind"] == "kernel") & ev["launch_ts_ns"].notna()]
    got = (k["ts_ns"] - k["launch_ts_ns"]).to_numpy(np.int64)
    assert sorted(got) == sorted(r[0] for r in ref)
    assert set(k["launch_api"].astype(str)) <= {"cudaLaunchKernel", "cudaLaunchKernelExC",
                                                "cuLaunchKernel", "cuLaunchKernelEx"}


def test_window_cut_launches(traces):
    """h100_2gpu_window: a 1 s cut; kernels whose launch fell before it have no launch."""
    db = _db("h100_2gpu_window")
    ev = traces["h100_2gpu_window"].events
    kernels = ev[ev["kind"] == "kernel"]
    orphans = _one(db, f"""
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE NOT EXISTS (
          SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId
          AND (r.globalTid {PROCESS}) = k.globalPid)""")
    assert orphans > 0
    assert kernels["launch_ts_ns"].isna().sum() == orphans
    s = summarize(traces["h100_2gpu_window"])
    assert s.launches.unlaunched_kernels == orphans
    assert s.kernel_count == len(kernels) and len(s.devices) == 2


@pytest.mark.parametrize("name", [n for n in EXPORTS if n != "rtx3080_tiny"])
def test_nvtx_ranges(traces, name):
    db = _db(name)
    ev = traces[name].events
    ranges = _one(db, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                      "AND end IS NOT NULL")
    host = ev[ev["kind"].isin(["op", "annotation", "step"])]
    assert len(host) == ranges
    texts = "COALESCE(n.text, s.value)"
    join = "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE eventType IN (59, 60)"
    aten = _one(db, f"SELECT count(*) {join} AND {texts} LIKE 'aten::%'")
    assert (host["name"].astype(str).str.startswith("aten::")).sum() == aten
    mm = _one(db, f"SELECT count(*) {join} AND ({texts} = 'aten::mm' OR {texts} LIKE 'aten::mm,%')")
    assert (host["name"].astype(str) == "aten::mm").sum() == mm
    # kernels get their op from the enclosing NVTX op range on the launching thread
    linked = ev[(ev["kind"] == "kernel") & ev["launch_ts_ns"].notna()]
    assert linked["op"].notna().mean() > 0.9


def test_device_names_and_meta(traces):
    t = traces["rtx3080_tiny"]
    assert t.meta["devices"] == {"0": "NVIDIA GeForce RTX 3080"}
    assert t.meta["source_format"] == "nsys-sqlite"
    assert traces["h100_2gpu_window"].meta["nsys_version"].startswith("2026.2")
    assert traces["h100_2gpu_window"].meta["devices"] == {}  # no TARGET_INFO_GPU there


def test_before_after_shows_the_change(traces, capsys):
    before, after = traces["h100_2gpu_mfu_before"], traces["h100_2gpu_mfu_after"]
    fb, fa = run_figures(before, "before"), run_figures(after, "after")
    nb = _one(_db("h100_2gpu_mfu_before"), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    na = _one(_db("h100_2gpu_mfu_after"), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert (fb.kernel_count, fa.kernel_count) == (nb, na) and nb != na
    diff = kernel_diff(before, after)  # kernels, memcpy and memset by name
    devb, deva = (sum(_one(_db(n), f"SELECT count(*) FROM {t}") for t in DEVICE_TABLES)
                  for n in ("h100_2gpu_mfu_before", "h100_2gpu_mfu_after"))
    assert diff["calls_a"].sum() == devb and diff["calls_b"].sum() == deva
    code = main(["compare", str(shared(NSYS / "h100_2gpu_mfu_before.sqlite")),
                 str(shared(NSYS / "h100_2gpu_mfu_after.sqlite"))])
    out = capsys.readouterr().out
    assert code == 0 and f"{nb:,}" in out and f"{na:,}" in out
    for name in ("h100_2gpu_mfu_before", "h100_2gpu_mfu_after"):
        assert main(["analyze", str(shared(NSYS / f"{name}.sqlite")), "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "flash_fwd_kernel" in out and "launch-bound" in out


def _same_events(a: Trace, b: Trace) -> None:
    ea, eb = a.events, b.events
    assert len(ea) == len(eb)
    for col in ("kind", "name", "op", "launch_api"):
        assert list(ea[col].astype(str)) == list(eb[col].astype(str))
    for col in ("ts_ns", "dur_ns", "device", "correlation", "bytes", "launch_delay_ns"):
        assert ea[col].equals(eb[col])


@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
def test_table_folder_exports(tmp_path, traces, suffix):
    """parquetdir / arrowdir: one file per table, named after it."""
    db = _db("h100_2gpu_window")
    folder = tmp_path / f"report.{suffix}dir"
    folder.mkdir()
    for table in _tables(db):
        cur = db.execute(f'SELECT * FROM "{table}"')
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
        data = pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)}) if rows else \
            pa.table({c: pa.array([], pa.int64()) for c in cols})
        if suffix == "parquet":
            pq.write_table(data, folder / f"{table}.parquet")
        else:
            with ipc.new_file(folder / f"{table}.arrow", data.schema) as w:
                w.write_table(data)
    assert detect_format(folder) == "nsys-dir"
    _same_events(load(folder), traces["h100_2gpu_window"])


def test_missing_tables_mean_no_rows(tmp_path):
    """An export with only some tables (as older nsys or other --trace choices give)."""
    src = _db("rtx3080_tiny")
    path = tmp_path / "kernels_only.sqlite"
    dst = sqlite3.connect(path)
    for table in ("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL"):
        cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
        keep = [c for c in cols if c not in ("shortName", "mangledName", "gridId")]
        dst.execute(f"CREATE TABLE {table} ({', '.join(keep)})")
        dst.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(keep))})",
                        src.execute(f"SELECT {', '.join(keep)} FROM {table}").fetchall())
    dst.commit()
    dst.close()
    ev = load(path).events
    assert (ev["kind"] == "kernel").sum() == 2 and len(ev) == 2
    assert ev["launch_ts_ns"].isna().all()


def test_bad_nsys_inputs(tmp_path, capsys):
    not_nsys = tmp_path / "other.sqlite"
    db = sqlite3.connect(not_nsys)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    truncated = tmp_path / "cut.sqlite"
    truncated.write_bytes(shared(NSYS / "rtx3080_tiny.sqlite").read_bytes()[:5000])
    bad_arrow = tmp_path / "report.arrow"
    bad_arrow.write_bytes(b"\xff\xff\xff\xff" + b"\x00" * 40)
    nvtx_free = tmp_path / "empty.sqlite"
    db = sqlite3.connect(nvtx_free)
    db.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    db.commit()
    db.close()
    for path, words in ((not_nsys, "no Nsight Systems tables"), (truncated, "SQLite"),
                        (bad_arrow, "Arrow"), (nvtx_free, "no CUDA activity")):
        assert main(["analyze", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err, err


@pytest.mark.skipif(shutil.which("nsys") is not None, reason="nsys is installed here")
def test_nsys_rep_without_nsys(tmp_path, capsys):
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 1.\n" + b"\x00" * 64)
    assert main(["analyze", str(rep)]) == 2
    assert "needs Nsight Systems" in capsys.readouterr().err


def _kernel_table(db: Path, edit: str) -> int:
    """Rewrite the kernel table through ``edit`` (a SELECT list over its columns, ``{cols}``
    standing for every column but the names); its row count."""
    con = sqlite3.connect(db)
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    n = con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({t})")
            if r[1] not in ("demangledName", "shortName", "mangledName")]
    con.execute(f"CREATE TABLE _k AS SELECT {edit.format(cols=', '.join(cols))} FROM {t}")
    con.execute(f"DROP TABLE {t}")
    con.execute(f"ALTER TABLE _k RENAME TO {t}")
    con.commit()
    con.close()
    return n


def test_a_kernel_table_without_name_columns_is_an_error(tmp_path, capsys):
    """An export whose kernel table lacks every name column cannot say what ran: one
    error line and exit 2 (it once read as a success with every kernel unnamed)."""
    db = tmp_path / "r.sqlite"
    shutil.copy(shared(SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"), db)
    _kernel_table(db, "{cols}")
    assert main(["analyze", str(db), "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CUPTI_ACTIVITY_KIND_KERNEL has no name column" in err[0], err


def test_kernels_without_names_are_noted(tmp_path):
    """Name columns present but empty (NULL string ids): the kernels are kept, shown as
    <unknown kernel>, and a note says how many."""
    db = tmp_path / "r.sqlite"
    shutil.copy(shared(SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"), db)
    n = _kernel_table(db, "{cols}, NULL AS demangledName, NULL AS shortName, "
                          "NULL AS mangledName")
    s = summarize(load(db))
    assert s.kernel_count == n
    assert any(f"{n:,} kernels have no name in the export" in x for x in s.notes)


def test_nvtx_range_texts_read_as_python_reads_them():
    """The Arrow string kernels read each range text as Python's regexes do: step marks
    (nine digits at most), ops (plain ATen names, emit_nvtx's ranges), names cut at the
    first comma, recorded shapes as details."""
    import re

    import pandas as pd

    from traceviz.parsers.nvtx_text import read_ranges
    from traceviz.table.steps import step_numbers

    texts = ["aten::mm, seq = 4, op_id = 7, sizes = [[2, 3], [3, 4]], input_op_ids = [1]",
             "step 3", "ProfilerStep#12", "STEP_7", "step 1234567890", "forward",
             "aten::add", " aten::x, seq = 1", "MyModule::forward, op_id = 3",
             "aten::bmm, sizes = []", "x, sizes = [[1]]", "aten::é", "aten::", "", "a,b"]
    step, kind, name, details = read_ranges(pd.Series(texts, dtype=object))
    ref_step = step_numbers(np.array(texts, dtype=object))[0]
    sizes = re.compile(r", sizes = (\[(?:\[[-\d, ]*\](?:, )?)*\])")
    for i, t in enumerate(texts):
        is_op = bool(re.match(r"^aten::\w", t) or re.search(r", (?:seq|op_id) = \d+", t)) \
            and ref_step[i] < 0
        assert step[i] == ref_step[i], t
        assert kind[i] == ("step" if ref_step[i] >= 0 else "op" if is_op else "annotation"), t
        assert name[i] == (t.split(",", 1)[0].strip() if is_op else t), t
        m = sizes.search(t)
        assert details[i] == (f"dims:{m.group(1)} types:[]" if is_op and m else ""), t
