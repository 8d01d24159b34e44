"""A corpus of bad and odd inputs for every reader and every command that reads or
writes a file, each with its expected outcome.

``cases()`` builds the list; a case writes its inputs into a fresh folder (``setup``),
runs ``argv`` there (``{d}`` stands for the folder) and expects exit 0 or 2; on 2 the one
``traceviz: error:`` line must hold the words in ``says``. Inputs are derived from the
real traces in ``../shared/traces`` (a few kilobytes each), so the corpus is rebuilt on
every run rather than committed; without them a reader's cases are one case that the
test skips, naming the missing file. ``python tests/corpus/generate.py DIR`` writes the
inputs into DIR to look at.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import shutil
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tests.conftest import SHARED_TRACES, shared_parquet

ROOT = Path(__file__).resolve().parents[2]
_RANDOM = random.Random(14)  # junk bytes, the same on every run


def _junk(n: int) -> bytes:
    return _RANDOM.randbytes(n)


# the real traces the inputs are derived from
MI250 = SHARED_TRACES / "kineto" / "mi250_rocm_train.json.gz"
TINY = SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"
BERT = SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"

OK, ERR = 0, 2


@dataclass
class Case:
    id: str
    argv: list[str]
    setup: Callable[[Path], None]
    expect: int
    says: str = ""                       # words the error line must hold (exit 2)
    outputs: tuple[str, ...] = ()        # files the run may leave behind
    keep: tuple[str, ...] = field(default=())  # files that must be unchanged afterwards
    needs: tuple[Path, ...] = ()         # the files of ../shared it is derived from


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return setup


def _both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        for s in setups:
            s(d)
    return setup


# --- Kineto JSON ------------------------------------------------------------------------

def _kineto_doc() -> dict:
    """A small real trace (MI250, ROCm): 14 kernels, launches, ops, steps."""
    with gzip.open(MI250) as f:
        return json.load(f)


def _dump(doc: object) -> bytes:
    return json.dumps(doc).encode()


def _with(doc: dict, pick: Callable[[dict], bool], **fields) -> bytes:
    d = copy.deepcopy(doc)
    for e in d["traceEvents"]:
        if pick(e):
            for k, v in fields.items():
                if v is _DELETE:
                    e.pop(k, None)
                else:
                    e[k] = v
    return _dump(d)


_DELETE = object()


def _is(cat: str) -> Callable[[dict], bool]:
    return lambda e: e.get("cat") == cat


def kineto_cases() -> list[Case]:
    doc = _kineto_doc()
    raw = _dump(doc)
    gz = gzip.compress(raw)
    out: list[Case] = []

    def add(id_: str, data: bytes, expect: int, says: str = "", name: str = "t.json",
            argv: list[str] | None = None) -> None:
        out.append(Case(f"kineto/{id_}", argv or ["analyze", "{d}/" + name, "--json"],
                        _write(name, data), expect, says))

    add("valid", raw, OK)
    add("valid-gz", gz, OK, name="t.json.gz")
    for i, frac in enumerate((0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999)):
        add(f"truncated-{i}", raw[: int(len(raw) * frac)], ERR, "JSON")
    for i, frac in enumerate((0.05, 0.3, 0.6, 0.9, 0.999)):
        add(f"truncated-gz-{i}", gz[: int(len(gz) * frac)], ERR, "gzip", name="t.json.gz")
    add("gz-of-truncated", gzip.compress(raw[: len(raw) // 2]), ERR, "JSON", name="t.json.gz")
    flipped = bytearray(gz)
    flipped[len(flipped) // 2] ^= 0xFF
    add("gz-corrupt", bytes(flipped), ERR, "gzip", name="t.json.gz")

    # a wrong value in every field the parser reads, on every event of a category
    values = {"null": None, "true": True, "list": [], "dict": {}, "text": "abc",
              "float": 1.5, "negative": -7, "int64max+1": 2 ** 63, "2^70": 2 ** 70,
              "empty": ""}
    for fld, cat in (("ph", "kernel"), ("cat", "kernel"), ("name", "kernel"),
                     ("pid", "cpu_op"), ("tid", "cpu_op"), ("ts", "kernel"),
                     ("dur", "kernel"), ("args", "kernel")):
        for label, v in values.items():
            expect, says = OK, ""
            if fld in ("ph", "cat", "name") and not isinstance(v, str) and v is not None:
                expect, says = ERR, "unexpected event layout"
            if fld == "args" and v is not None and not isinstance(v, dict):
                expect, says = ERR, "unexpected event layout"
            if fld in ("pid", "tid") and isinstance(v, list | dict):
                expect, says = ERR, "unexpected event layout"
            add(f"field-{fld}-{label}", _with(doc, _is(cat), **{fld: v}), expect, says)
    for arg, v in (("correlation", 2 ** 64), ("device", 2 ** 40), ("stream", -(2 ** 40)),
                   ("correlation", "0x12"), ("device", "gpu0"), ("bytes", 1e300),
                   ("grid", "not a list"), ("grid", [1, 2]), ("block", {"x": 1}),
                   ("registers per thread", "many"), ("Input type", 5),
                   ("Concrete Inputs", [None]), ("correlation", None)):
        d = copy.deepcopy(doc)
        for e in d["traceEvents"]:
            if e.get("cat") in ("kernel", "cpu_op"):
                e.setdefault("args", {})[arg] = v
        add(f"arg-{arg.replace(' ', '_')}-{str(v)[:12]}", _dump(d), OK)

    text = raw.decode()
    for label, old, new in (
            ("ts-21-digits", '"ts": 4203669603771.648', '"ts": 123456789012345678901'),
            ("ts-1e30", '"ts": 4203669603771.648', '"ts": 1e30'),
            ("dur-1e300", '"dur": 6.88', '"dur": 1e300'),
            ("ts-negative", '"ts": 4203669603771.648', '"ts": -4203669603771.648'),
            ("ts-exponent", '"ts": 4203669603771.648', '"ts": 4.203669603771648e12'),
            ("dur-negative", '"dur": 6.88', '"dur": -6.88'),
            ("ts-many-decimals", '"ts": 4203669603771.648', '"ts": 4203669603771.6481234567'),
            ("ts-string", '"ts": 4203669603771.648', '"ts": "4203669603771.648"')):
        assert old in text, label
        add(f"value-{label}", text.replace(old, new, 1).encode(), OK)
    add("nan-literal", text.replace('"dur": 6.88', '"dur": NaN', 1).encode(), ERR, "JSON")
    add("infinity-literal", text.replace('"dur": 6.88', '"dur": Infinity', 1).encode(),
        ERR, "JSON")

    step = copy.deepcopy(doc)
    step["traceEvents"].append({"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1,
                                "name": "ProfilerStep#123456789012345678901", "ts": 1,
                                "dur": 1})
    add("step-number-20-digits", _dump(step), OK)

    # text encodings
    name = next(e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel")
    enc = name.encode()
    add("utf8-invalid-in-name", raw.replace(enc, enc[:5] + b"\xff" + enc[6:], 1), ERR,
        "UTF-8")
    add("utf8-invalid-in-key", raw.replace(b'"dur"', b'"d\xffur"', 1), ERR, "UTF-8")
    add("utf8-invalid-in-skipped-field", raw.replace(b'"External id"', b'"Ext\xfe id"', 1),
        ERR, "UTF-8")
    add("utf8-invalid-in-cat", raw.replace(b'"kernel"', b'"ker\xc0nel"', 1), ERR, "UTF-8")
    add("utf8-bom", b"\xef\xbb\xbf" + raw, ERR, "")
    add("utf16", raw.decode().encode("utf-16"), ERR, "")
    add("utf8-valid-non-ascii", raw.replace(enc, "λ-核".encode() + enc, 1), OK)
    add("latin1-name", raw.replace(enc, b"caf\xe9" + enc, 1), ERR, "UTF-8")

    # nesting, structure, white space
    events = _dump(doc["traceEvents"])
    add("deep-nesting-in-event", b'{"traceEvents": ' + events[:-1] + b", "
        + b"[" * 100_000 + b"]" * 100_000 + b"]}", ERR, "JSON")
    add("deep-nesting-in-metadata", b'{"x": ' + b"[" * 100_000 + b"]" * 100_000
        + b', "traceEvents": ' + events + b"}", ERR, "nested")
    deep_after = (b'{"traceEvents": ' + events + b', "traceName": ' + b"[" * 100_000
                  + b"]" * 100_000 + b"}")
    add("deep-nesting-in-metadata-after-events", deep_after, ERR, "nested too deeply")
    add("deep-nesting-in-metadata-after-events-gz", gzip.compress(deep_after), ERR,
        "nested too deeply", name="t.json.gz")
    add("deep-nesting-in-args", _with(doc, _is("kernel"), args=json.loads(
        "[" * 50 + "]" * 50)), ERR, "unexpected event layout")
    for label, props in (("int", 5), ("text", "abc"), ("dict", {"id": 0}),
                         ("list-of-ints", [1, 2]), ("list-without-keys", [{"x": 1}]),
                         ("null", None)):
        d = copy.deepcopy(doc)
        d["deviceProperties"] = props
        add(f"deviceProperties-{label}", _dump(d), OK)
    add("leading-whitespace-70k", b" " * 70_000 + raw, OK)
    add("leading-newlines-200k", b"\n" * 200_000 + raw, OK)
    add("only-whitespace", b" \n\t" * 1000, ERR, "empty")
    add("empty", b"", ERR, "empty")
    add("trailing-garbage", raw + b"garbage", ERR, "JSON")
    add("two-documents", raw + raw, ERR, "JSON")
    add("empty-array", b'{"traceEvents": []}', ERR, "no profiler events")
    add("metadata-only", _dump({"traceEvents": [{"ph": "M", "name": "process_name",
                                                 "pid": 1, "args": {"name": "x"}}]}),
        ERR, "no profiler events")
    add("bare-array", events, OK)
    add("no-traceEvents", _dump({"schemaVersion": 1}), ERR, "traceEvents")
    add("traceEvents-number", b'{"traceEvents": 5}', ERR, "traceEvents")
    add("traceEvents-object", b'{"traceEvents": {"a": 1}}', ERR, "traceEvents")
    add("traceEvents-strings", b'{"traceEvents": ["a", "b"]}', ERR, "JSON")
    add("json-number", b"12345", ERR, "format")
    add("json-string", b'"hello"', ERR, "format")
    add("binary-junk", bytes(range(256)) * 8, ERR, "")
    add("duplicate-keys", raw.replace(b'"dur": 6.88', b'"dur": 6.88, "dur": 7.0', 1), OK)
    cpu = {"traceEvents": [e for e in doc["traceEvents"]
                           if e.get("cat") in ("cpu_op", "user_annotation")]}
    add("no-gpu-rows", _dump(cpu), OK)
    add("unknown-fields-everywhere", _with(doc, lambda e: True, zzz={"a": [1, 2, 3]},
                                           **{"weird key": None}), OK)
    add("missing-ts-everywhere", _with(doc, lambda e: True, ts=_DELETE), ERR,
        "no profiler events")
    big_ids = {"traceEvents": [dict(e, pid=2 ** 64, tid=2 ** 64) for e in doc["traceEvents"]]}
    add("every-id-out-of-range", _dump(big_ids), ERR, "no")
    out += _shape_cases(doc, add)
    return out


def _shape_cases(doc: dict, add: Callable) -> list[Case]:
    """The efficiency figures' inputs: recorded shapes and dtypes of every op, the device
    name, allocator events. A figure that cannot be computed is absent, never a crash."""
    shapes = {"negative": [[-4, 5], [5, 6]], "past-int64": [[2 ** 40, 2 ** 40],
                                                            [2 ** 40, 2 ** 40]],
              "beyond-64-bits": [[2 ** 70, 3], [3, 4]], "floats": [[1.5, 2], [2, 3]],
              "nested-deep": json.loads("[" * 40 + "]" * 40), "text": "not dims",
              "empty": [], "null": None, "scalars": [5, 6], "mismatched": [[2, 3], [4, 5]]}
    for label, dims in shapes.items():
        add(f"op-dims-{label}", _with(doc, _is("cpu_op"), args={
            "Input Dims": dims, "Input type": ["float", "float"]}), OK)
    for label, types in (("unknown", ["c10::Mystery", "c10::Mystery"]), ("ints", [1, 2]),
                         ("short", ["float"]), ("null", None), ("nested", [["float"]])):
        add(f"op-types-{label}", _with(doc, _is("cpu_op"), args={
            "Input Dims": [[2, 3], [3, 4]], "Input type": types}), OK)
    add("op-concrete-odd", _with(doc, _is("cpu_op"), name="aten::_cudnn_rnn", args={
        "Input Dims": [[5, 2, 3], [[8, 3], [8, 2]], [], [], [1, 2, 2], [1, 2, 2]],
        "Input type": ["float", "TensorList", "Scalar", "", "float", "float"],
        "Concrete Inputs": ["", "", "x", "", "", "", "many", "-1"]}), OK)
    for label, name in (("unknown", "Imaginary Accelerator 9000"), ("empty", ""),
                        ("number", 7), ("huge", "H100" * 10_000)):
        d = copy.deepcopy(doc)
        d["deviceProperties"] = [{"id": 0, "name": name}]
        add(f"device-name-{label}", _dump(d), OK)
    for label, margs in (("valid", {"Bytes": 512, "Total Allocated": 512, "Device Id": 0}),
                         ("free-first", {"Bytes": -512, "Total Allocated": 0,
                                         "Device Id": 0}),
                         ("no-total", {"Bytes": 512, "Device Id": -1}),
                         ("text-bytes", {"Bytes": "lots", "Total Allocated": 1}),
                         ("huge", {"Bytes": 2 ** 70, "Total Allocated": 2 ** 70}),
                         ("no-args", None)):
        d = copy.deepcopy(doc)
        first = min(e["ts"] for e in d["traceEvents"] if "ts" in e)
        d["traceEvents"].append({"ph": "i", "cat": "cpu_instant_event", "s": "t",
                                 "name": "[memory]", "pid": 1, "tid": 1, "ts": first + 1,
                                 **({"args": margs} if margs is not None else {})})
        add(f"memory-event-{label}", _dump(d), OK)
    d = copy.deepcopy(doc)
    first = min(e["ts"] for e in d["traceEvents"] if "ts" in e)
    d["traceEvents"] += [{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                          "pid": 1, "tid": 1, "ts": first + 1 + i / 1000,
                          "args": {"Bytes": 2 ** 52, "Total Allocated": 2 ** 52,
                                   "Device Id": 0}} for i in range(1100)]
    add("memory-events-sum-past-int64", _dump(d), OK)
    return []


# --- MXNet JSON -------------------------------------------------------------------------

def mxnet_cases() -> list[Case]:
    runs = sorted((ROOT / "sample_traces" / "mxnet").glob("*/trace.mxnet.json*"))
    if not runs:
        return []
    data = runs[0].read_bytes()
    raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    out = []

    def add(id_: str, body: bytes, expect: int, says: str = "") -> None:
        out.append(Case(f"mxnet/{id_}", ["analyze", "{d}/p.json", "--json"],
                        _write("p.json", body), expect, says))

    add("valid", raw, OK)
    add("truncated", raw[: len(raw) // 2], ERR, "")
    add("utf8-invalid", raw.replace(b'"operator"', b'"oper\xffator"', 1), ERR, "")
    doc = json.loads(raw)
    ops = {"traceEvents": [e for e in doc["traceEvents"] if e.get("cat") != "operator"]}
    add("no-operators", _dump(ops), OK)  # step tasks only: a profile without work
    bad_ts = copy.deepcopy(doc)
    for e in bad_ts["traceEvents"]:
        if e.get("cat") == "operator":
            e["ts"] = "soon"
    add("ts-text", _dump(bad_ts), ERR, "")
    huge = copy.deepcopy(doc)
    for e in huge["traceEvents"]:
        if e.get("cat") == "operator":
            e["ts"] = 10 ** 30
    add("ts-huge", _dump(huge), OK)  # dropped, with a note
    return out


# --- Nsight Systems ---------------------------------------------------------------------

def _sqlite_case(edit: Callable[[sqlite3.Connection], None],
                 src: str = "rtx3080_tiny") -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        dst = d / "r.sqlite"
        shutil.copyfile(SHARED_TRACES / "nsys" / f"{src}.sqlite", dst)
        db = sqlite3.connect(dst)
        edit(db)
        db.commit()
        db.close()
    return setup


def _drop_column(table: str, column: str) -> Callable[[sqlite3.Connection], None]:
    return _drop_columns(table, column)


def _drop_columns(table: str, *columns: str) -> Callable[[sqlite3.Connection], None]:
    def edit(db: sqlite3.Connection) -> None:
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")
                if r[1] not in columns]
        db.execute(f"CREATE TABLE _t AS SELECT {', '.join(cols)} FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE _t RENAME TO {table}")
    return edit


def _sql(*statements: str) -> Callable[[sqlite3.Connection], None]:
    def edit(db: sqlite3.Connection) -> None:
        for st in statements:
            db.execute(st)
    return edit


def _untyped(table: str, *statements: str) -> Callable[[sqlite3.Connection], None]:
    """Copy ``table`` into one without types or constraints, then run ``statements``."""
    def edit(db: sqlite3.Connection) -> None:
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        db.execute(f"CREATE TABLE _t ({', '.join(cols)})")
        db.execute(f"INSERT INTO _t SELECT * FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE _t RENAME TO {table}")
        for st in statements:
            db.execute(st)
    return edit


def nsys_cases() -> list[Case]:
    out = []
    src = TINY.read_bytes()

    def add(id_: str, setup: Callable[[Path], None], expect: int, says: str = "",
            name: str = "r.sqlite") -> None:
        out.append(Case(f"nsys/{id_}", ["analyze", "{d}/" + name, "--json"], setup,
                        expect, says))

    add("valid", _sqlite_case(lambda db: None), OK)
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "TARGET_INFO_GPU", "META_DATA_EXPORT"):
        add(f"no-table-{t}", _sqlite_case(_sql(f"DROP TABLE {t}")), OK)
    # kernels and calls are named through StringIds alone: without it, nothing is named
    add("no-table-StringIds", _sqlite_case(_sql("DROP TABLE StringIds")), ERR,
        "table StringIds is missing, so the rows of CUPTI_ACTIVITY_KIND_KERNEL and "
        "CUPTI_ACTIVITY_KIND_RUNTIME have no names")
    add("no-column-StringIds.id", _sqlite_case(_drop_column("StringIds", "id")), ERR,
        "table StringIds holds no string with an id")
    add("no-activity-tables", _sqlite_case(_sql(
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME",
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY")), ERR, "no CUDA activity")
    for table, col in (("StringIds", "value"),
                       ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"),
                       ("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId"),
                       ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
                       ("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"),
                       ("CUPTI_ACTIVITY_KIND_KERNEL", "start"),
                       ("CUPTI_ACTIVITY_KIND_KERNEL", "deviceId"),
                       ("CUPTI_ACTIVITY_KIND_KERNEL", "gridX"),
                       ("CUPTI_ACTIVITY_KIND_MEMCPY", "bytes"),
                       ("META_DATA_EXPORT", "value"), ("TARGET_INFO_GPU", "name"),
                       ("TARGET_INFO_GPU", "cuDevice")):
        add(f"no-column-{table}.{col}", _sqlite_case(_drop_column(table, col)), OK)
    add("no-name-columns", _sqlite_case(_drop_columns(
        "CUPTI_ACTIVITY_KIND_KERNEL", "demangledName", "shortName", "mangledName")), ERR,
        "has no name column")
    add("stringids-duplicate", _sqlite_case(_untyped(
        "StringIds", "INSERT INTO StringIds SELECT id, 'other ' || value FROM StringIds")), OK)
    add("stringids-null-id", _sqlite_case(_untyped(
        "StringIds", "UPDATE StringIds SET id = NULL WHERE rowid % 2 = 0")), OK)
    add("stringids-blob", _sqlite_case(_untyped(
        "StringIds", "UPDATE StringIds SET value = CAST(value AS BLOB)")), OK)
    add("stringids-invalid-utf8", _sqlite_case(_untyped(
        "StringIds", "UPDATE StringIds SET value = CAST(X'6b65726e656cff00' AS TEXT)")), OK)
    add("stringids-numbers", _sqlite_case(_untyped(
        "StringIds", "UPDATE StringIds SET value = 12345")), OK)
    for col, v in (("start", "1e30"), ("end", "1e30"), ("start", "-1e30"),
                   ("start", "'soon'"), ("end", "NULL"), ("deviceId", "99999999999"),
                   ("streamId", "1e20"), ("correlationId", "'x'"), ("globalPid", "1.5"),
                   ("start", "9223372036854775807")):
        add(f"kernel-{col}-{v.strip(chr(39))}", _sqlite_case(_untyped(
            "CUPTI_ACTIVITY_KIND_KERNEL", f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET {col} = {v}")),
            OK)
    add("runtime-times-huge", _sqlite_case(_untyped(
        "CUPTI_ACTIVITY_KIND_RUNTIME", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = 1e300")),
        OK)
    add("runtime-nameId-text", _sqlite_case(_untyped(
        "CUPTI_ACTIVITY_KIND_RUNTIME", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 'x'")),
        OK)
    add("view-on-dropped-table", _sqlite_case(_sql(
        "CREATE TABLE z (x)", "CREATE VIEW NVTX_EVENTS AS SELECT x FROM z", "DROP TABLE z")),
        ERR, "cannot read table")
    add("nvtx-junk", _sqlite_case(_sql(
        "CREATE TABLE NVTX_EVENTS (start, end, eventType, text, textId, globalTid, domainId)",
        "INSERT INTO NVTX_EVENTS VALUES ('a', X'00', 59, X'ff', 'x', 1e300, NULL)",
        "INSERT INTO NVTX_EVENTS VALUES (5, 3, 59, 'step 99999999999999999999', NULL, 1, 0)")),
        OK)
    add("every-time-out-of-range", _sqlite_case(_untyped(
        "CUPTI_ACTIVITY_KIND_KERNEL", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 1e30"),
        ), OK)
    for i, frac in enumerate((0.01, 0.2, 0.5, 0.9)):
        add(f"truncated-{i}", _write("r.sqlite", src[: int(len(src) * frac)]), ERR, "")
    corrupt = bytearray(src)
    for k in range(4096, len(corrupt), 4096):
        corrupt[k + 100: k + 140] = b"\xde\xad" * 20
    add("corrupt-pages", _write("r.sqlite", bytes(corrupt)), ERR, "")
    add("not-nsys-sqlite", _sqlite_case(_sql(*[f"DROP TABLE {r}" for r in _tables(src)]
                                             + ["CREATE TABLE t (x)"])), ERR, "Nsight")
    add("arrow-truncated", _write("r.arrow", b"\xff\xff\xff\xff" + b"\x00" * 40), ERR, "Arrow",
        name="r.arrow")
    add("arrow-junk", _write("r.arrow", b"\xff\xff\xff\xff" + _junk(200)), ERR, "",
        name="r.arrow")
    add("arrow-empty-name", _write("x.arrow", b"hello"), ERR, "", name="x.arrow")
    add("parquetdir-broken", _both(_write("r.parquetdir/StringIds.parquet", b"PAR1junk"),
                                   _write("r.parquetdir/CUPTI_ACTIVITY_KIND_KERNEL.parquet",
                                          b"PAR1")), ERR, "", name="r.parquetdir")
    add("nsys-rep-fake", _write("r.nsys-rep", b"NVIDIA Tegra Profiler Report 1.\n"
                                + _junk(300)), ERR, "", name="r.nsys-rep")
    add("qdrep-junk", _write("r.qdrep", _junk(300)), ERR, "", name="r.qdrep")
    return out


def _tables(sqlite_bytes: bytes) -> list[str]:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".sqlite") as f:
        f.write(sqlite_bytes)
        f.flush()
        db = sqlite3.connect(f.name)
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        db.close()
    return names


# --- XSpace -----------------------------------------------------------------------------

def xplane_cases() -> list[Case]:
    sys.path.insert(0, str(ROOT))
    from traceviz.parsers.xspace.messages import xspace_class

    raw_gz = BERT.read_bytes()
    raw = gzip.decompress(raw_gz)
    out = []

    def add(id_: str, setup: Callable[[Path], None], expect: int, says: str = "",
            name: str = "h.xplane.pb") -> None:
        out.append(Case(f"xplane/{id_}", ["analyze", "{d}/" + name, "--json"], setup,
                        expect, says))

    add("valid", _write("h.xplane.pb", raw), OK)
    for i, frac in enumerate((0.001, 0.1, 0.5, 0.9, 0.999)):
        add(f"truncated-{i}", _write("h.xplane.pb", raw[: int(len(raw) * frac)]), ERR, "")
    add("truncated-gz", _write("h.xplane.pb.gz", raw_gz[: len(raw_gz) // 2]), ERR, "gzip",
        name="h.xplane.pb.gz")
    add("empty", _write("h.xplane.pb", b""), ERR, "empty")
    add("junk", _write("h.xplane.pb", _junk(1000)), ERR, "")
    add("json-named-xplane", _write("h.xplane.pb", b'{"traceEvents": []}'), ERR, "")

    def mutated(edit: Callable[[object], None]) -> Callable[[Path], None]:
        def setup(d: Path) -> None:
            space = xspace_class()()
            space.ParseFromString(raw)
            edit(space)
            (d / "h.xplane.pb").write_bytes(space.SerializeToString())
        return setup

    def stats_as(kind: str) -> Callable[[object], None]:
        def edit(space) -> None:
            for plane in space.planes:
                for line in plane.lines[:3]:
                    for e in line.events[:50]:
                        for s in e.stats:
                            if kind == "text":
                                s.str_value = "abc"
                            elif kind == "double":
                                s.double_value = 1e300
                            elif kind == "huge":
                                s.uint64_value = 2 ** 64 - 1
                            else:
                                s.ClearField("value")
        return edit

    for kind in ("text", "double", "huge", "empty"):
        add(f"stats-{kind}", mutated(stats_as(kind)), OK)

    def times(edit_line) -> Callable[[object], None]:
        def edit(space) -> None:
            for plane in space.planes:
                for line in plane.lines:
                    edit_line(line)
        return edit

    add("timestamps-over-int64", mutated(times(
        lambda line: setattr(line, "timestamp_ns", 2 ** 62))), OK)
    add("durations-huge", mutated(times(
        lambda line: [setattr(e, "duration_ps", 2 ** 63 - 1) for e in line.events[:5]])), OK)
    add("offsets-negative", mutated(times(
        lambda line: [setattr(e, "offset_ps", -(2 ** 60)) for e in line.events[:5]])), OK)

    def rename(pattern: str) -> Callable[[object], None]:
        def edit(space) -> None:
            for plane in space.planes:
                if plane.name.startswith("/device:GPU"):
                    plane.name = pattern
                    for line in plane.lines:
                        if line.name.startswith("Stream #"):
                            line.name = "Stream #99999999999(Compute)"
        return edit

    add("device-number-over-int32", mutated(rename("/device:GPU:99999999999")), OK)
    add("no-planes", mutated(lambda space: space.ClearField("planes")), ERR, "no events")
    add("only-host-plane", mutated(lambda space: [space.planes.remove(p) for p in
                                                  list(space.planes)
                                                  if p.name != "/host:CPU"]), OK)
    add("logdir-without-runs", _write("logs/plugins/profile/.keep", b""), ERR, "directory",
        name="logs")
    add("logdir-junk-file", _write("logs/plugins/profile/run1/h.xplane.pb", b"junk"), ERR, "",
        name="logs")
    return out


# --- Parquet, sweeps --------------------------------------------------------------------

def _parquet_case(edit: Callable) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        import pyarrow.parquet as pq

        table = pq.read_table(shared_parquet("kineto", "mi250_rocm_train.json.gz"))
        table = edit(table)
        pq.write_table(table, d / "t.parquet")
    return setup


def parquet_cases() -> list[Case]:
    import pyarrow as pa

    src = (shared_parquet("kineto", "mi250_rocm_train.json.gz")).read_bytes()
    out = []

    def add(id_: str, setup: Callable[[Path], None], expect: int, says: str = "") -> None:
        out.append(Case(f"parquet/{id_}", ["analyze", "{d}/t.parquet", "--json"], setup,
                        expect, says))

    def meta(value: bytes) -> Callable:
        return lambda t: t.replace_schema_metadata({b"traceviz": value})

    def col(name: str, array) -> Callable:
        def edit(t):
            i = t.schema.get_field_index(name)
            return t.set_column(i, name, array(t.num_rows))
        return edit

    add("valid", _write("t.parquet", src), OK)
    add("truncated", _write("t.parquet", src[: len(src) // 2]), ERR, "Parquet")
    add("not-traceviz", _parquet_case(lambda t: t.replace_schema_metadata({})), ERR,
        "not written by traceviz")
    add("metadata-bad-json", _parquet_case(meta(b"{not json")), ERR, "metadata")
    add("metadata-list", _parquet_case(meta(b"[1, 2]")), ERR, "metadata")
    add("metadata-deep", _parquet_case(meta(b"[" * 100_000 + b"]" * 100_000)), ERR, "metadata")
    add("schema-version-99", _parquet_case(meta(b'{"schema_version": 99}')), ERR, "version")
    add("ts-as-text", _parquet_case(col("ts_ns", lambda n: pa.array(["x"] * n))), ERR, "column")
    add("nan-in-int", _parquet_case(col("dur_ns", lambda n: pa.array([float("nan")] * n))),
        ERR, "column")
    # a null in an int32 column reads as a float column with NaN: the column is named
    add("null-in-step", _parquet_case(col("step", lambda n: pa.array(
        [None] + [0] * (n - 1), pa.int32()))), ERR, "column step has 1 missing value")
    add("missing-column", _parquet_case(lambda t: t.drop(["kind"])), ERR, "lacks columns")
    add("kind-unknown", _parquet_case(col("kind", lambda n: pa.array(["zzz"] * n))), ERR,
        "unknown values")
    add("zero-rows", _parquet_case(lambda t: t.slice(0, 0)), ERR, "no rows")
    out.append(Case("parquet/zero-rows-amp", ["amp", "{d}/t.parquet", "{d}/t.parquet"],
                    _parquet_case(lambda t: t.slice(0, 0)), ERR, "no rows"))
    # a column of another type than the schema's: named before any analysis meets it
    for name, label, array in (
            ("launch_id", "text", lambda n: pa.array(["12"] * n)),
            ("launch_id", "bool", lambda n: pa.array([True] * n)),
            ("launch_ts_ns", "text", lambda n: pa.array(["x"] * n)),
            ("launch_delay_ns", "nan", lambda n: pa.array([float("nan")] * n)),
            ("pid", "nan-in-one-row", lambda n: pa.array([float("nan")] + [1.0] * (n - 1))),
            ("kind", "int", lambda n: pa.array([5] * n)),
            ("name", "float", lambda n: pa.array([1.5] * n)),
            ("is_cast", "text", lambda n: pa.array(["yes"] * n)),
            ("category", "int", lambda n: pa.array([3] * n))):
        add(f"wrong-type-{name}-{label}", _parquet_case(col(name, array)), ERR,
            f"column {name} holds")
    add("name-missing", _parquet_case(col("name", lambda n: pa.nulls(n, pa.string()))), ERR,
        "column name has")
    add("category-missing-on-kernels", _parquet_case(col(
        "category", lambda n: pa.nulls(n, pa.string()))), ERR, "column category has")
    add("details-missing", _parquet_case(col("details", lambda n: pa.nulls(n, pa.string()))),
        OK)
    add("launch-id-repeated", _parquet_case(col("launch_id", lambda n: pa.array([5] * n))),
        OK)
    add("details-junk", _parquet_case(col("details", lambda n: pa.array(
        ["dims:[[", "xla_flops:abc", "dims:[[1e999]] types:[]", "\x00"] * (n // 4)
        + ["dims:[[2]]"] * (n % 4)))), OK)
    return out


def sweep_cases() -> list[Case]:
    import pandas as pd

    src = ROOT / "sample_traces" / "cpu_sweep" / "sweep.parquet"
    full = pd.read_parquet(src)
    out = []

    def table(df) -> Callable[[Path], None]:
        def setup(d: Path) -> None:
            (d / "s").mkdir()
            df.to_parquet(d / "s" / "sweep.parquet")
        return setup

    def add(id_: str, setup, argv: list[str], expect: int, says: str = "",
            outputs: tuple[str, ...] = ()) -> None:
        out.append(Case(f"sweep/{id_}", argv, setup, expect, says, outputs))

    plot = ["sweep-plot", "{d}/s/sweep.parquet", "--out", "{d}/plots"]
    report = ["report", "{d}/s", "-o", "{d}/r.md"]
    add("plot-valid", table(full), plot, OK, outputs=("plots/*",))
    add("report-valid", table(full), report, OK, outputs=("r.md", "r_files/*"))
    for label, df in (("some-columns", full[["point", "status"]]),
                      ("no-time-column", full.drop(columns=["time_per_batch_s"])),
                      ("empty", full.iloc[:0]),
                      ("all-failed", full.assign(status="failed"))):
        expect_plot = ERR
        expect_report = OK if label in ("empty", "all-failed") else ERR
        add(f"plot-{label}", table(df), plot, expect_plot)
        add(f"report-{label}", table(df), report, expect_report,
            outputs=("r.md", "r_files/*"))
    add("plot-junk", _write("s/sweep.parquet", b"junk"), plot, ERR, "sweep table")
    add("report-junk", _write("s/sweep.parquet", b"PAR1junkPAR1"), report, ERR, "")
    return out


# --- commands that write ----------------------------------------------------------------

def output_cases() -> list[Case]:
    trace = MI250.read_bytes()
    inp = _write("in.json.gz", trace)
    out = []

    def add(id_: str, setup, argv: list[str], expect: int, says: str = "",
            outputs: tuple[str, ...] = (), keep: tuple[str, ...] = ()) -> None:
        out.append(Case(f"output/{id_}", argv, setup, expect, says, outputs, keep))

    imp = ["import", "{d}/in.json.gz", "-o"]
    add("import-new", inp, [*imp, "{d}/o.parquet"], OK, outputs=("o.parquet",))
    add("import-new-subdir", inp, [*imp, "{d}/a/b/o.parquet"], OK, outputs=("a/b/o.parquet",))
    add("import-existing", _both(inp, _write("o.parquet", b"precious")),
        [*imp, "{d}/o.parquet"], ERR, "already exists", keep=("o.parquet",))
    add("import-existing-force", _both(inp, _write("o.parquet", b"old")),
        [*imp, "{d}/o.parquet", "--force"], OK, outputs=("o.parquet",))
    add("import-onto-dir", _both(inp, _write("o.parquet/x", b"")),
        [*imp, "{d}/o.parquet", "--force"], ERR, "directory", keep=("o.parquet/x",))
    add("import-onto-fifo-force", _both(inp, lambda d: os.mkfifo(d / "o.parquet")),
        [*imp, "{d}/o.parquet", "--force"], ERR, "not a regular file")
    add("import-onto-dev-null-force", inp, [*imp, "/dev/null", "--force"], ERR,
        "not a regular file")
    add("import-dir-as-input", _write("d/x", b""), ["import", "{d}/d", "-o", "{d}/o.parquet"],
        ERR, "directory")
    add("import-missing-input", lambda d: None, ["import", "{d}/none.json", "-o",
                                                 "{d}/o.parquet"], ERR, "no such file")
    add("import-bad-input-keeps-output", _both(_write("in.json", b"{\"traceEvents\": ["),
                                                _write("o.parquet", b"precious")),
        ["import", "{d}/in.json", "-o", "{d}/o.parquet", "--force"], ERR, "JSON",
        keep=("o.parquet",))
    exp = ["analyze", "{d}/in.json.gz", "--export", "{d}/x"]
    add("export-new", inp, exp, OK, outputs=("x/*",))
    add("export-existing", _both(inp, _write("x/kernels.parquet", b"keep")), exp, ERR,
        "already exists", keep=("x/kernels.parquet",))
    add("export-into-file", _both(inp, _write("x", b"a file")), exp, ERR, "", keep=("x",))
    plot = ["analyze", "{d}/in.json.gz", "--plot", "{d}/p"]
    add("plot-new", inp, plot, OK, outputs=("p/*",))
    add("plot-existing", _both(inp, _write("p/kernels_pie.png", b"keep")), plot, ERR,
        "already exists", keep=("p/kernels_pie.png",))
    add("analyze-top-0", inp, ["analyze", "{d}/in.json.gz", "--top", "0"], ERR, "--top")
    for width in ("0", "-5", "39", "wide"):
        add(f"analyze-width-{width}", inp, ["analyze", "{d}/in.json.gz", "--width", width],
            ERR, "--width:")
    add("advise-width-0", inp, ["advise", "{d}/in.json.gz", "--width=0"], ERR, "--width:")
    rep = ["report", "{d}/in.json.gz", "-o", "{d}/r.md"]
    add("report-new", inp, rep, OK, outputs=("r.md", "r_files/*"))
    add("report-existing-files-dir", _both(inp, _write("r_files/pie_in.png", b"keep")), rep,
        ERR, "already exists", keep=("r_files/pie_in.png",))
    add("report-existing", _both(inp, _write("r.md", b"keep")), rep, ERR, "already exists",
        keep=("r.md",))
    add("report-html-onto-fifo", _both(inp, lambda d: os.mkfifo(d / "r.html")),
        ["report", "{d}/in.json.gz", "-o", "{d}/r.html", "--force"], ERR, "not a regular")
    add("report-bad-suffix", inp, ["report", "{d}/in.json.gz", "-o", "{d}/r.txt"], ERR,
        ".md or .html")
    add("compare-one", inp, ["compare", "{d}/in.json.gz"], ERR, "at least two")
    add("compare-bad-second", _both(inp, _write("bad.json", b"[1,2")),
        ["compare", "{d}/in.json.gz", "{d}/bad.json"], ERR, "JSON")
    add("compare-plot-existing", _both(inp, _write("p/categories.png", b"keep")),
        ["compare", "{d}/in.json.gz", "{d}/in.json.gz", "--plot", "{d}/p"], ERR,
        "already exists", keep=("p/categories.png",))
    add("amp-bad", _both(inp, _write("e.json", b"")), ["amp", "{d}/in.json.gz", "{d}/e.json"],
        ERR, "empty")
    add("amp-same", inp, ["amp", "{d}/in.json.gz", "{d}/in.json.gz"], OK)
    for fmt, setup, name in (
            ("nsys", lambda d: shutil.copyfile(TINY, d / "r.sqlite"), "r.sqlite"),
            ("xplane", lambda d: shutil.copyfile(BERT, d / "h.xplane.pb.gz"), "h.xplane.pb.gz"),
            ("parquet", lambda d: shutil.copyfile(
                shared_parquet("kineto", "mi250_rocm_train.json.gz"), d / "t.parquet"),
             "t.parquet")):
        add(f"import-{fmt}", setup, ["import", "{d}/" + name, "-o", "{d}/o.parquet"], OK,
            outputs=("o.parquet",))
    add("sweep-out-is-file", _write("s", b"a file"),
        ["sweep", "--models", "cudnn_torch", "--device", "cpu", "--out", "{d}/s"], ERR, "",
        keep=("s",))
    add("sweep-plot-out-is-file", _both(
        lambda d: (d / "sw").mkdir() or shutil.copyfile(
            ROOT / "sample_traces" / "cpu_sweep" / "sweep.parquet", d / "sw" / "sweep.parquet"),
        _write("plots", b"a file")),
        ["sweep-plot", "{d}/sw/sweep.parquet", "--out", "{d}/plots"], ERR, "", keep=("plots",))
    add("capture-out-is-file", _write("run", b"a file"),
        ["capture", "--model", "cudnn_torch", "--device", "cpu", "--out", "{d}/run"], ERR, "",
        keep=("run",))
    return out


# --- rank folders and datasets ------------------------------------------------------------

def _ranks(*broken: tuple[str, bytes]) -> Callable[[Path], None]:
    """A folder ``ranks`` of two real rank traces, then ``broken`` files written into it."""
    trace = MI250.read_bytes()

    def setup(d: Path) -> None:
        (d / "ranks").mkdir()
        for k in (0, 1):
            (d / "ranks" / f"rank-{k}.json.gz").write_bytes(trace)
        for name, data in broken:
            (d / "ranks" / name).write_bytes(data)
    return setup


def _dataset(edit: Callable[[Path], None] = lambda ds: None) -> Callable[[Path], None]:
    """The two ranks imported into a dataset ``ds`` (by traceviz itself), then ``edit``ed."""
    def setup(d: Path) -> None:
        from traceviz.rankset.folder import import_folder

        _ranks()(d)
        import_folder(d / "ranks", d / "ds", workers=1)
        edit(d / "ds")
    return setup


def _set_meta(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(ds: Path) -> None:
        meta = json.loads((ds / "_traceviz.json").read_text())
        (ds / "_traceviz.json").write_text(json.dumps(change(meta)))
    return edit


def rank_cases() -> list[Case]:
    """``analyze DIR``, ``import DIR`` and ``analyze DATASET`` on damaged folders and
    datasets: a bad rank is named, a damaged dataset says to import again, and an earlier
    dataset survives a failed import."""
    gz = MI250.read_bytes()
    out = []

    def add(id_: str, setup, argv: list[str], expect: int, says: str = "",
            outputs: tuple[str, ...] = (), keep: tuple[str, ...] = ()) -> None:
        out.append(Case(f"ranks/{id_}", argv, setup, expect, says, outputs, keep))

    folder = ["analyze", "{d}/ranks", "--json"]
    add("dir-valid", _ranks(), folder, OK)
    add("dir-truncated-rank", _ranks(("rank-1.json.gz", gz[: len(gz) // 2])), folder, ERR,
        "rank-1.json.gz: truncated gzip")
    add("dir-empty-rank", _ranks(("rank-2.json", b"")), folder, ERR, "rank-2.json: file is empty")
    add("dir-not-a-trace-rank", _ranks(("rank-2.json", b'{"a": 1}')), folder, ERR,
        "traceEvents")
    add("dir-junk-rank", _ranks(("rank-2.json.gz", _junk(3000))), folder, ERR, "rank-2.json.gz")
    add("dir-no-events-rank", _ranks(("rank-2.json", b'{"traceEvents": []}')), folder, ERR,
        "no profiler events")
    add("dir-empty", lambda d: (d / "ranks").mkdir(), folder, ERR, "no trace files")
    imp = ["import", "{d}/ranks", "-o", "{d}/ds"]
    add("import-new", _ranks(), imp, OK, outputs=("ds/*",))
    add("import-bad-rank", _ranks(("rank-1.json.gz", gz[:999])), imp, ERR, "rank-1.json.gz")
    add("import-existing", _dataset(), imp, ERR, "already exists",
        keep=("ds/_traceviz.json", "ds/rank=0/part-0.parquet"))
    add("import-bad-rank-keeps-dataset",
        _both(_dataset(), lambda d: (d / "ranks" / "rank-1.json.gz").write_bytes(gz[:999])),
        [*imp, "--force"], ERR, "rank-1.json.gz",
        keep=("ds/_traceviz.json", "ds/rank=0/part-0.parquet", "ds/rank=1/part-0.parquet"))
    add("import-workers-0", _ranks(), [*imp, "--workers", "0"], ERR, "--workers")
    add("import-empty-folder-onto-dataset",
        _both(_dataset(), lambda d: (d / "none").mkdir()),
        ["import", "{d}/none", "-o", "{d}/ds"], ERR, "no trace files",
        keep=("ds/_traceviz.json",))
    # a folder is traceviz's only by its marker; --force replaces only what traceviz wrote
    add("import-onto-a-user-s-folder", _both(_ranks(), _write("ds/rank=5/notes.txt", b"x")),
        imp, ERR, "not a traceviz dataset", keep=("ds/rank=5/notes.txt",))
    add("import-force-onto-a-user-s-rank-folder",
        _both(_ranks(), _write("ds/rank=1/notes.txt", b"x")), [*imp, "--force"], ERR,
        "ds/rank=1: holds files traceviz did not write", keep=("ds/rank=1/notes.txt",))
    add("import-force-onto-a-symlinked-rank", _dataset(_symlinked_rank), [*imp, "--force"],
        ERR, "ds/rank=1: a symbolic link",
        keep=("ds/_traceviz.json", "ds/rank=0/part-0.parquet", "elsewhere/keep.txt"))
    ds = ["analyze", "{d}/ds", "--json"]
    add("dataset-valid", _dataset(), ds, OK)
    add("dataset-stray-partition", _dataset(lambda p: shutil.copytree(p / "rank=1",
                                                                      p / "rank=7")), ds, OK)
    add("dataset-missing-partition", _dataset(lambda p: shutil.rmtree(p / "rank=1")), ds, ERR,
        "rank 1's partition is missing")
    add("dataset-truncated-partition", _dataset(lambda p: (p / "rank=0" / "part-0.parquet")
                                                .write_bytes(b"PAR1" + _junk(500))), ds, ERR,
        "rank 0's partition is unreadable")
    add("dataset-foreign-partition", _dataset(_foreign_parquet), ds, ERR,
        "not a traceviz events table")
    add("dataset-meta-bad-json", _dataset(lambda p: (p / "_traceviz.json").write_text("{x")),
        ds, ERR, "unreadable dataset metadata")
    add("dataset-meta-list", _dataset(lambda p: (p / "_traceviz.json").write_text("[1]")),
        ds, ERR, "not a traceviz rank dataset")
    add("dataset-meta-nested-deeply", _dataset(lambda p: (p / "_traceviz.json").write_text(
        '{"ranks": ' + "[" * 100_000 + "]" * 100_000 + "}")), ds, ERR, "nested too deeply")
    add("dataset-meta-no-ranks", _dataset(_set_meta(lambda m: {**m, "ranks": {}})), ds, ERR,
        "malformed")
    add("dataset-meta-rank-not-a-number",
        _dataset(_set_meta(lambda m: {**m, "ranks": {"x": m["ranks"]["0"]}})), ds, ERR,
        "malformed (rank 'x'")
    add("dataset-meta-rank-without-meta",
        _dataset(_set_meta(lambda m: {**m, "ranks": {"0": {"file": "a"}}})), ds, ERR,
        "malformed (rank '0'")
    return out


def _symlinked_rank(ds: Path) -> None:
    """Rank 1's folder replaced by a link to a folder of the user's."""
    elsewhere = ds.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("the user's")
    shutil.rmtree(ds / "rank=1")
    (ds / "rank=1").symlink_to(elsewhere)


def _foreign_parquet(ds: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1, 2]}), ds / "rank=1" / "part-0.parquet")


def regression_cases() -> list[Case]:
    """Inputs the fuzzer once broke traceviz with, kept as cases (exit 0 or 2)."""
    out = []
    for f in sorted(REGRESSIONS.glob("*")) if REGRESSIONS.is_dir() else []:
        if f.name.startswith(".") or f.suffix == ".md":
            continue
        data = f.read_bytes()
        out.append(Case(f"regression/{f.name}", ["analyze", "{d}/" + f.name, "--json"],
                        _write(f.name, data), -1))  # -1: 0 or 2
    return out


def replay_cases(readers: list[Case]) -> list[Case]:
    """``whatif`` and ``advise`` on every reader case's input: they read as analyze does,
    then replay the trace and run the rules, which odd inputs (device rows without their
    launch calls, no host rows at all) must not break (exit 0 or 2)."""
    out = []
    for case in readers:
        if case.argv[:1] != ["analyze"] or "--json" not in case.argv:
            continue
        for command in ("whatif", "advise"):
            argv = [command, case.argv[1], "--json"]
            out.append(Case(f"{command}/{case.id}", argv, case.setup, -1, needs=case.needs))
    return out


def _derived(prefix: str, make: Callable[[], list[Case]], *needs: Path) -> list[Case]:
    """``make()``'s cases, each needing the files ``needs`` of ../shared; where one is
    missing, a single case ``PREFIX/needs-shared`` stands for them (the test skips it, naming
    the file): the cases are built from the files' contents."""
    if not all(p.exists() for p in needs):
        return [Case(f"{prefix}/needs-shared", [], lambda d: None, OK, needs=needs)]
    return [replace(c, needs=needs) for c in make()]


def cases() -> list[Case]:
    readers = (_derived("kineto", kineto_cases, MI250) + mxnet_cases()
               + _derived("nsys", nsys_cases, TINY) + _derived("xplane", xplane_cases, BERT)
               + _derived("parquet", parquet_cases, MI250) + regression_cases())
    from tests.corpus.hostile import hostile_cases

    return (readers + sweep_cases() + _derived("output", output_cases, MI250, TINY, BERT)
            + _derived("ranks", rank_cases, MI250) + replay_cases(readers)
            + _derived("hostile", hostile_cases, MI250, TINY))


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "corpus-out")
    for case in cases():
        d = target / case.id
        d.mkdir(parents=True, exist_ok=True)
        case.setup(d)
        (d / "ARGV").write_text(" ".join(case.argv).replace("{d}", str(d)) + "\n")
    print(f"{len(cases())} cases in {target}")
