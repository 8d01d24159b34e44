"""Property-based fuzzing: structure-aware mutations of real traces never crash traceviz.

Every mutated Kineto JSON, nsys SQLite export and XSpace protobuf ends in exit 0 or in
exit 2 with one ``traceviz: error:`` line; never an internal error (exit 3) or a value
wrapped with a RuntimeWarning. ``TRACEVIZ_FUZZ_EXAMPLES`` sets the examples per target
and ``TRACEVIZ_FUZZ_RANDOM=1`` draws new ones each run (CI replays a fixed set)
(default 150: about two minutes in all); a failure leaves its (shrunk) input in
``tests/corpus/regressions/``, which the corpus test replays from then on.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import os
import shutil
import sqlite3
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED_TRACES
from tests.corpus.generate import REGRESSIONS
from traceviz.cli import main

EXAMPLES = int(os.environ.get("TRACEVIZ_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get(
    "TRACEVIZ_FUZZ_RANDOM"), suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])

# JSON values of every kind, with the edges numbers and text have
LEAVES = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.sampled_from([0, -1, 2 ** 31, 2 ** 63 - 1, 2 ** 63, 2 ** 64, 10 ** 21]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e30, 1e300, -1e300, 0.5, 1e-300]),
    st.text(max_size=30),
    st.sampled_from(["", "0x0", "ProfilerStep#99999999999999999999", "aten::_to_copy",
                     "cudaLaunchKernel", "hipGraphLaunch", "kernel", "cpu_op", "X"]),
)
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


class Blob(bytes):
    """Input bytes that print short: a failing example names its size and digest."""

    def __repr__(self) -> str:
        import hashlib

        return f"Blob({len(self)} bytes, sha1 {hashlib.sha1(self).hexdigest()[:12]})"


def _analyze(data: bytes, name: str, label: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        _run(path, label)


def _run(path: Path, label: str) -> None:
    """Analyze ``path`` (and, where analyze reads it, replay it and advise on it); on an
    internal error keep the input as a regression case."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    for command in ("analyze", "whatif", "advise"):
        err = io.StringIO()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with redirect_stdout(io.StringIO()), redirect_stderr(err):
                code = main([command, str(path), "--json"])
        _check(path, label, code, err.getvalue())
        if code != 0:
            return


def _check(path: Path, label: str, code: int, text: str) -> None:
    lines = [line for line in text.splitlines() if line.startswith("traceviz: error:")]
    ok = code == 0 and not lines or code == 2 and len(lines) == 1
    if not ok or "Traceback" in text:
        REGRESSIONS.mkdir(parents=True, exist_ok=True)
        # overwritten while hypothesis shrinks: what stays is the smallest failing input
        target = REGRESSIONS / f"fuzz-{label}{''.join(path.suffixes)}.gz"
        target.write_bytes(gzip.compress(path.read_bytes()))
    assert ok and "Traceback" not in text, text


# --- Kineto JSON ------------------------------------------------------------------------

MI250 = SHARED_TRACES / "kineto" / "mi250_rocm_train.json.gz"


@functools.cache
def _kineto_events() -> dict:
    with gzip.open(MI250) as f:
        return json.load(f)


FIELDS = st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"])
ARGS = st.sampled_from(["correlation", "device", "stream", "bytes", "grid", "block",
                        "Input type", "Concrete Inputs", "registers per thread"])


@st.composite
def kineto_files(draw) -> bytes:
    doc = copy.deepcopy(_kineto_events())
    events = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 6))):
        e = events[draw(st.integers(0, len(events) - 1))]
        action = draw(st.sampled_from(["set", "delete", "arg", "copy"]))
        if action == "set":
            e[draw(FIELDS)] = draw(VALUES)
        elif action == "delete":
            e.pop(draw(FIELDS), None)
        elif action == "arg" and isinstance(e.get("args"), dict):
            e["args"][draw(ARGS)] = draw(VALUES)
        elif action == "copy":
            events.append(copy.deepcopy(e))
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["deviceProperties", "distributedInfo", "traceName"]))] = \
            draw(VALUES)
    data = json.dumps(doc).encode()
    damage = draw(st.sampled_from(["none", "none", "truncate", "flip", "insert"]))
    at = draw(st.integers(0, len(data) - 1))
    if damage == "truncate":
        data = data[:at]
    elif damage == "flip":
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    elif damage == "insert":
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return Blob(data)


@pytest.mark.shared(MI250)
@FUZZ
@given(kineto_files())
def test_fuzz_kineto(data):
    _analyze(data, "t.json", "kineto")


# --- nsys SQLite ------------------------------------------------------------------------

NSYS = SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"
SQL_VALUES = st.one_of(st.none(), st.integers(-(2 ** 63), 2 ** 63 - 1),
                       st.floats(allow_nan=False), st.text(max_size=20),
                       st.binary(max_size=20), st.sampled_from([1e30, 2 ** 62, -1, 0]))


@functools.cache
def _schema() -> dict[str, list[str]]:
    db = sqlite3.connect(f"file:{NSYS}?mode=ro", uri=True)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    out = {t: [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    db.close()
    return out


INTERESTING = ["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
               "CUPTI_ACTIVITY_KIND_MEMCPY", "TARGET_INFO_GPU", "META_DATA_EXPORT"]


@st.composite
def nsys_edits(draw) -> list[tuple]:
    edits = []
    for _ in range(draw(st.integers(1, 5))):
        table = draw(st.sampled_from([t for t in INTERESTING if t in _schema()]))
        kind = draw(st.sampled_from(["set", "set", "drop_column", "drop_table"]))
        column = draw(st.sampled_from(_schema()[table]))
        edits.append((kind, table, column, draw(SQL_VALUES), draw(st.integers(0, 3))))
    return edits


def _apply(db: sqlite3.Connection, kind: str, table: str, column: str, value, row: int):
    present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if table not in present:
        return
    cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
    if kind == "drop_table":
        db.execute(f'DROP TABLE "{table}"')
        return
    if column not in cols:
        return
    keep = [c for c in cols if kind != "drop_column" or c != column]
    if not keep:
        return
    # rebuild untyped and unconstrained, so any value fits any column
    db.execute(f'CREATE TABLE _t ({", ".join(keep)})')
    db.execute(f'INSERT INTO _t SELECT {", ".join(keep)} FROM "{table}"')
    db.execute(f'DROP TABLE "{table}"')
    db.execute(f'ALTER TABLE _t RENAME TO "{table}"')
    if kind == "set":
        db.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid IN (SELECT rowid FROM '
                   f'"{table}" LIMIT 1 OFFSET ?)', (value, row))


@pytest.mark.shared(NSYS)
@FUZZ
@given(nsys_edits())
def test_fuzz_nsys(edits):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.sqlite"
        shutil.copyfile(NSYS, path)
        db = sqlite3.connect(path)
        for edit in edits:
            _apply(db, *edit)
        db.commit()
        db.close()
        _run(path, "nsys")


# --- XSpace -----------------------------------------------------------------------------

BERT = SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"


@functools.cache
def _small_space() -> bytes:
    """The shared BERT profile cut to its first events per line (fast to fuzz)."""
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    space.ParseFromString(gzip.decompress(
        BERT.read_bytes()))
    for plane in space.planes:
        for line in plane.lines:
            del line.events[40:]
    return space.SerializeToString()


@st.composite
def xspace_files(draw) -> bytes:
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    space.ParseFromString(_small_space())
    planes = [p for p in space.planes if p.lines]
    for _ in range(draw(st.integers(1, 6))):
        plane = draw(st.sampled_from(planes))
        line = draw(st.sampled_from(list(plane.lines)))
        what = draw(st.sampled_from(["time", "stat", "name", "line", "plane"]))
        big = st.integers(-(2 ** 63), 2 ** 63 - 1)
        if what == "time" and line.events:
            e = line.events[draw(st.integers(0, len(line.events) - 1))]
            setattr(e, draw(st.sampled_from(["offset_ps", "duration_ps"])), draw(big))
        elif what == "stat" and line.events:
            e = line.events[draw(st.integers(0, len(line.events) - 1))]
            if e.stats:
                s = e.stats[draw(st.integers(0, len(e.stats) - 1))]
                field = draw(st.sampled_from(["int64_value", "uint64_value", "double_value",
                                              "str_value", "ref_value"]))
                value = {"int64_value": draw(big),
                         "uint64_value": draw(st.integers(0, 2 ** 64 - 1)),
                         "double_value": draw(st.floats(allow_nan=False)),
                         "str_value": draw(st.text(max_size=20)),
                         "ref_value": draw(st.integers(0, 2 ** 64 - 1))}[field]
                setattr(s, field, value)
        elif what == "name":
            line.name = draw(st.sampled_from(["Stream #99999999999(x)", "Steps", "XLA Ops",
                                              "", "Stream #-1"]))
        elif what == "line":
            line.timestamp_ns = draw(big)
        else:
            plane.name = draw(st.sampled_from(["/device:GPU:99999999999", "/device:TPU:0",
                                               "/host:CPU", "/device:GPU:-1", ""]))
    data = space.SerializeToString()
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1:]
    return Blob(data)


@pytest.mark.shared(BERT)
@FUZZ
@given(xspace_files())
def test_fuzz_xspace(data):
    _analyze(data, "h.xplane.pb", "xspace")


def test_regressions_folder_is_replayed():
    """Saved failures are read by the corpus (tests/corpus/generate.py)."""
    from tests.corpus.generate import regression_cases

    saved = [f for f in REGRESSIONS.glob("*") if not f.name.startswith(".")
             and f.suffix != ".md"] if REGRESSIONS.is_dir() else []
    assert len(regression_cases()) == len(saved)

