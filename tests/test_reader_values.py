"""Wrong or oversized values in what the readers take: each case ends in exit 0 with one
``note:`` naming the field and what was left out, or in exit 2 with one ``traceviz:
error:`` line naming the file and the field; never an internal error (exit 3).

Cases: XSpace profiles whose every event is dropped (a GPU plane or a stream numbered past
32 bits, a plane of instant events only: the communication section saw no names at all);
NCCL messages past 64-bit figures (Kineto's "Group size", "In msg nelems"); nsys exports
with a table name that is not UTF-8, an NVTX payload holding a BLOB, no StringIds."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import SHARED_TRACES, shared
from traceviz.cli import main
from traceviz.parsers.xspace.messages import xspace_class

TINY = SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
DROPPED = ("3 events dropped: a time beyond 64-bit nanoseconds, or a device or stream "
           "number beyond 32 bits")
BAD_MESSAGE = ('1 event with a collective\'s "In msg nelems", "Out msg nelems" or "Group '
               "size\" that is no count or is past 64-bit figures (its message size left "
               "unknown)")


def _run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    """Exit status, stdout and the lines of stderr of one command."""
    code = main([*argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err.splitlines()


def _analyze(capsys, path: Path) -> dict:
    code, out, err = _run(capsys, "analyze", str(path), "--json")
    assert code == 0 and err == [], err
    return json.loads(out)


# --- XSpace: every event dropped -------------------------------------------------------

def _space(plane: str, line: str, dur_ns: int):
    """One plane (``plane``), one line (``line``) of three events of ``dur_ns``."""
    space = xspace_class()()
    p = space.planes.add(name=plane)
    p.stat_metadata[1].id, p.stat_metadata[1].name = 1, "correlation_id"
    p.event_metadata[1].id, p.event_metadata[1].name = 1, "gemm_kernel"
    stream = p.lines.add(id=9, name=line, timestamp_ns=1_000)
    for i in range(3):
        e = stream.events.add(metadata_id=1, offset_ps=i * 1_000_000, duration_ps=dur_ns * 1000)
        if plane.startswith("/device:"):  # a kernel's launch id (on the host: a call)
            e.stats.add(metadata_id=1).int64_value = i + 1
    return space


XSPACES = {
    "gpu plane past 32 bits": (("/device:GPU:99999999999", "Stream #9(Kernel)", 500), DROPPED),
    "stream past 32 bits": (("/device:GPU:0", "Stream #99999999999(x)", 500), DROPPED),
    # host events of no duration are marks, not kept: the profile holds no rows
    "instant events only": (("/host:CPU", "python", 0), None),
}


@pytest.mark.parametrize("case", list(XSPACES))
def test_xspace_with_every_event_dropped(tmp_path, capsys, case):
    """The communication section sees a table with no names (it once ended in "could not
    convert string to float: 'other'"): no collectives; the drop is the one note the
    parser adds; report writes Markdown and HTML."""
    args, note = XSPACES[case]
    path = tmp_path / "p.xplane.pb"
    path.write_bytes(_space(*args).SerializeToString())
    d = _analyze(capsys, path)
    assert d["communication"] is None and d["ranges"] == [] and d["kernels"]["count"] == 0
    parser_notes = [n for n in d["notes"] if "dropped" in n]
    assert parser_notes == ([note] if note else [])
    for command in ("whatif", "advise"):
        code, _, err = _run(capsys, command, str(path))
        assert code in (0, 2) and len(err) <= 1, err
    for out in ("r.md", "r.html"):
        code, _, err = _run(capsys, "report", str(path), "-o", str(tmp_path / out))
        assert code == 0 and (tmp_path / out).stat().st_size > 0, err


def test_per_distinct_of_no_names():
    """No distinct values: the answer takes the fill's type (a text fill is no float)."""
    from traceviz.algos.categorical import each, per_distinct

    kinds = per_distinct(pd.Series([], dtype="category"), each(str.upper), fill="other")
    assert kinds.dtype == object and len(kinds) == 0
    missing = per_distinct(pd.Categorical([None, None]), each(str.upper), fill="other")
    assert missing.tolist() == ["other", "other"]
    assert per_distinct(pd.Categorical([]), each(len)).dtype.kind == "f"  # as before


# --- Kineto: NCCL messages past 64-bit figures -----------------------------------------

def _nccl(tmp_path: Path, *kernels: dict) -> Path:
    """A Kineto trace of one step holding NCCL all-reduce kernels with these args."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000, "args": {}}]
    for i, args in enumerate(kernels, 1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5, "args": {"correlation": i}})
        events.append({"ph": "X", "cat": "kernel", "name": NCCL, "pid": 0, "tid": 7,
                       "ts": 100 + 200 * i, "dur": 100,
                       "args": {"correlation": i, "device": 0, "stream": 7, "dtype": "Float",
                                "Process Group Name": "0", **args}})
    path = tmp_path / "nccl.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("args", [
    {"In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 2 ** 63},
    {"In msg nelems": 2 ** 64, "Out msg nelems": 1024, "Group size": 8},
    {"In msg nelems": 1024, "Out msg nelems": 2 ** 62, "Group size": 8},  # 2^64 bytes
    {"In msg nelems": -1024, "Out msg nelems": 1024, "Group size": 8},
    {"In msg nelems": 1024.5, "Out msg nelems": 1024, "Group size": 8},
    {"In msg nelems": 1024, "Out msg nelems": 1024, "Group size": "8"},
    {"In msg nelems": 1024, "Out msg nelems": [1024], "Group size": True},
], ids=["group 2^63", "nelems 2^64", "bytes past 2^63", "negative", "a fraction", "text",
        "a list"])
def test_nccl_message_that_is_no_count_is_dropped_with_a_note(tmp_path, capsys, args):
    """The collective stays (counted, timed); its message is unknown (not sized), and the
    one note names the fields (an oversized one once ended in an OverflowError)."""
    path = _nccl(tmp_path, args, {"In msg nelems": 256, "Out msg nelems": 256,
                                  "Group size": 4})
    d = _analyze(capsys, path)
    assert d["notes"] == [BAD_MESSAGE]
    kind, = d["communication"]["kinds"]
    assert (kind["kind"], kind["count"], kind["total_ns"]) == ("all_reduce", 2, 200_000)
    # the other kernel's message alone: 256 floats, 4 ranks
    assert (kind["sized"], kind["bytes"], kind["group"]) == (1, 256 * 4, 4)
    code, out, err = _run(capsys, "analyze", str(path), "--width", "200")
    assert code == 0 and err == []
    assert [x for x in out.splitlines() if "msg nelems" in x] == [f"note: {BAD_MESSAGE}"]


def test_nccl_message_of_nulls_is_no_message(tmp_path, capsys):
    """null counts are no values (nothing to note): the collective is not sized."""
    d = _analyze(capsys, _nccl(tmp_path, {"In msg nelems": None, "Out msg nelems": None,
                                          "Group size": None}))
    kind, = d["communication"]["kinds"]
    assert d["notes"] == [] and (kind["count"], kind["sized"]) == (1, 0)


def test_nccl_sizes_summed_past_int64_are_not_wrapped(tmp_path, capsys):
    """Three messages of 2^63 - 16 bytes each (2^59 - 1 ComplexDouble elements, the
    largest count kept): their sum, past int64, is exact, never wrapped."""
    big = {"In msg nelems": 2 ** 59 - 1, "Out msg nelems": 0, "Group size": 2,
           "dtype": "ComplexDouble"}
    d = _analyze(capsys, _nccl(tmp_path, big, big, big))
    kind, = d["communication"]["kinds"]
    assert d["notes"] == [] and kind["sized"] == 3
    assert kind["bytes"] == 3 * 16 * (2 ** 59 - 1) > 2 ** 63
    assert kind["algbw_gbs"] == pytest.approx(3 * 16 * (2 ** 59 - 1) / 300_000)


def test_message_text_past_int64_reads_as_unknown():
    """A details text not made by the parser (a Parquet table's) may hold any digits."""
    from traceviz.analyses.summary.collectives import message

    assert message(f"msg:{2 ** 64},0 dtype:Float group:{2 ** 63} pg:0") == \
        (-1, "Float", -1, "0", "")
    assert message("msg:8,4 dtype:Half group:2 pg:0 coll:allreduce") == \
        (16, "Half", 2, "0", "allreduce")


# --- nsys exports ----------------------------------------------------------------------

def _export(tmp_path: Path, *sql: tuple) -> Path:
    """The tiny RTX 3080 export, copied and changed by these statements."""
    path = tmp_path / "r.sqlite"
    shutil.copyfile(shared(TINY), path)
    db = sqlite3.connect(path)
    for statement in sql:
        db.execute(*statement)
    db.commit()
    db.close()
    return path


def test_nsys_table_name_not_utf8(tmp_path, capsys):
    """A table whose name is not UTF-8 (no nsys table's is) is left unread, said in one
    note; the export's figures are those of the export without it."""
    path = _export(tmp_path, ('CREATE TABLE "odd" (a)',), ("PRAGMA writable_schema=ON",),
                   ("UPDATE sqlite_master SET name = CAST(X'ff41' AS TEXT), tbl_name = "
                    "CAST(X'ff41' AS TEXT), sql = 'CREATE TABLE \"' || CAST(X'ff41' AS TEXT) "
                    "|| '\" (a)' WHERE name = 'odd'",))
    d = _analyze(capsys, path)
    assert d["notes"][0] == ("1 table whose name is not UTF-8 text left unread (no Nsight "
                             "Systems table's is): '\ufffdA'")
    plain = _analyze(capsys, shared(TINY))
    db = sqlite3.connect(shared(TINY))
    kernels = db.execute("SELECT count(*), sum(end - start) FROM "
                         "CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    db.close()
    assert (d["kernels"]["count"], d["kernels"]["total_ns"]) == kernels
    assert d["kernels"] == plain["kernels"] and d["notes"][1:] == plain["notes"]


def test_nsys_schema_with_a_name_not_utf8_that_does_not_parse(tmp_path, capsys):
    """The schema's name and its CREATE statement disagree: SQLite cannot read the file,
    and its message quotes the bytes (once a UnicodeDecodeError). One line, exit 2."""
    path = _export(tmp_path, ('CREATE TABLE "odd" (a)',), ("PRAGMA writable_schema=ON",),
                   ("UPDATE sqlite_master SET name = CAST(X'ff41' AS TEXT), "
                    "tbl_name = CAST(X'ff41' AS TEXT) WHERE name = 'odd'",))
    code, _, err = _run(capsys, "analyze", str(path))
    assert code == 2 and err == [
        f"traceviz: error: {path}: not a readable SQLite database (its schema, sqlite_master, "
        "names a table in bytes that are not UTF-8 and does not parse)"]


@pytest.mark.parametrize("column, value", [("int64Value", b"\xff\xfe\x00blob"),
                                           ("doubleValue", "twelve"),
                                           ("category", b"\x80")])
def test_nsys_nvtx_value_that_is_no_number(tmp_path, capsys, column, value):
    """An NVTX range whose payload or category column holds a BLOB or text: the range is
    kept (its time and name), that value left out and counted in one note."""
    tiny = shared(TINY)
    db = sqlite3.connect(tiny)
    k0, k1 = db.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    tid, = db.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()
    db.close()
    path = _export(tmp_path, (
        "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER "
        "NOT NULL, text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER, "
        "category INTEGER, int64Value INTEGER, doubleValue REAL)",), (
        f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, {column}) "
        "VALUES (?, ?, 59, 'forward', ?, ?)", (k0 - 1000, k1 + 1000, tid, value)))
    d = _analyze(capsys, path)
    assert d["notes"][0] == (f"1 NVTX range with NVTX_EVENTS.{column} holding no number "
                             "(a BLOB or text): that value left out")
    r, = d["ranges"]
    assert (r["name"], r["instances"], r["total_ns"]) == ("forward", 1, k1 - k0 + 2000)
    ev = _ranges_details(path)
    assert ev == ["style:PushPop"]  # no payload:, no category: written


def _ranges_details(path: Path) -> list[str]:
    from traceviz.parsers import load

    e = load(path).events
    return e.loc[np.asarray(e["kind"] == "annotation"), "details"].astype(str).tolist()


@pytest.mark.parametrize("change, why", [("DROP TABLE StringIds", "is missing"),
                                         ("DELETE FROM StringIds",
                                          "holds no string with an id")])
def test_nsys_without_strings_says_the_names_are_missing(tmp_path, capsys, change, why):
    """Kernels and CUDA calls name themselves by string ids only: without StringIds the
    export cannot say which kernel ran or which call launched it (it once read as "No
    launch call", exit 0). One line, exit 2."""
    path = _export(tmp_path, (change,))
    for command in ("analyze", "report"):
        extra = ["-o", str(tmp_path / "r.md")] if command == "report" else []
        code, _, err = _run(capsys, command, str(path), *extra)
        assert code == 2 and err == [
            f"traceviz: error: {path}: table StringIds {why}, so the rows of "
            "CUPTI_ACTIVITY_KIND_KERNEL and CUPTI_ACTIVITY_KIND_RUNTIME have no names (an "
            "incomplete export; export the report again)"]


def test_nsys_arrow_table_name_not_utf8(tmp_path, capsys):
    """The Arrow export (IPC streams back to back, each naming its table in its schema's
    metadata): a name that is not UTF-8 is left unread and said in one note (it once
    ended in a UnicodeDecodeError)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    db = sqlite3.connect(shared(TINY))
    path = tmp_path / "r.arrow"
    with path.open("wb") as f:
        for name in (b"StringIds", b"CUPTI_ACTIVITY_KIND_KERNEL",
                     b"CUPTI_ACTIVITY_KIND_RUNTIME", b"\xffA"):
            table = "StringIds" if name == b"\xffA" else name.decode()
            cur = db.execute(f'SELECT * FROM "{table}"')
            cols = [d[0] for d in cur.description]
            t = pa.Table.from_pylist([dict(zip(cols, r, strict=True)) for r in cur])
            t = t.replace_schema_metadata({b"table_name": name})
            with ipc.new_stream(f, t.schema) as w:
                w.write_table(t)
    kernels = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    db.close()
    d = _analyze(capsys, path)
    assert d["notes"][0] == ("1 table whose name is not UTF-8 text left unread (no Nsight "
                             "Systems table's is): '\ufffdA'")
    assert d["kernels"]["count"] == kernels
