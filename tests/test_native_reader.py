"""The compiled Kineto reader against the Python one, its oracle: the same base rows, meta
and notes on every real Kineto trace and every corpus case that imports, the same one-line
error on every case that does not, and on the inputs where the two could part: escapes,
surrogate pairs, repeated keys, absent against null, numbers at the int64 bounds, times
with exponents, deep nesting, a cut buffer. ``TRACEVIZ_READER`` picks the reader."""

from __future__ import annotations

import gzip
import re
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import SHARED_TRACES, missing, shared, shared_traces
from tests.corpus.generate import MI250, cases
from tests.diagnosis_paths import FOREIGN, FOREIGN_FILES
from tests.test_fuzz import FUZZ, kineto_files
from traceviz.errors import TraceVizError
from traceviz.parsers import kineto
from traceviz.parsers.kineto import native
from traceviz.parsers.kineto.columns import NO_NAME, NO_TIME, NOT_A_DURATION, OUT_OF_RANGE
from traceviz.parsers.kineto.times import raw_us_to_ns

try:
    from traceviz.parsers import _kineto_native
except ImportError as e:  # the package without its compiled reader (no C compiler)
    _kineto_native = None  # type: ignore[assignment]
    WHY = str(e)


@pytest.fixture(autouse=True)
def _built():
    if _kineto_native is None:
        missing(f"the compiled Kineto reader is not built ({WHY}); "
                "pip install --no-deps -e . with a C compiler")


def _parse(path: Path, reader: str, monkeypatch, **kw) -> object:
    monkeypatch.setenv("TRACEVIZ_READER", reader)
    try:
        t = kineto.parse(path, **kw)
    except TraceVizError as e:
        return str(e)
    return t.events, t.meta


def _assert_same(a: object, b: object, exact: bool) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, str):
        assert a == b
        return
    assert isinstance(a, tuple) and isinstance(b, tuple)
    x, y = a[0], b[0]
    if not exact:  # the categoricals as their values
        cats = {c: object for c in x.columns if isinstance(x[c].dtype, pd.CategoricalDtype)}
        x, y = x.astype(cats), y.astype(cats)
    pd.testing.assert_frame_equal(x, y, check_exact=True)
    assert a[1] == b[1]


def _both(path: Path, monkeypatch, **kw) -> object:
    """Both readers' table (or error) of ``path``: the same values. At each reader's own
    piece size (16 MB against 2 MB in process) the order of a categorical's categories may
    differ (pieces' categories are merged in order); at one piece size it may not."""
    py = _parse(path, "python", monkeypatch, **kw)
    nat = _parse(path, "native", monkeypatch, **kw)
    _assert_same(py, nat, exact="chunk_bytes" in kw)
    return nat


KINETO_TRACES = shared_traces("kineto") + [FOREIGN / "kineto" / name
                                           for name in FOREIGN_FILES["kineto"]]


@pytest.mark.parametrize("path", KINETO_TRACES, ids=lambda p: str(p.relative_to(SHARED_TRACES)))
def test_every_kineto_trace_reads_the_same(path, monkeypatch):
    _both(path, monkeypatch)


def test_the_parquet_is_the_same_file_for_file(monkeypatch, tmp_path):
    """The written tables hold the same values (Parquet, read back): the same table at the
    same piece size; at each reader's own (16 MB against 2 MB) the same values, the order
    of a dictionary's entries aside (pieces' dictionaries are merged in order)."""
    path = shared(SHARED_TRACES / "kineto" / "a100_nccl.json.gz")
    tables = {}
    for reader, chunk in (("python", 1 << 20), ("native", 1 << 20), ("python", None),
                          ("native", None)):
        monkeypatch.setenv("TRACEVIZ_READER", reader)
        out = tmp_path / f"{reader}{chunk}.parquet"
        kineto.parse(path, chunk_bytes=chunk).save(out)
        tables[reader, chunk] = pq.read_table(out)
    assert tables["python", 1 << 20].num_rows > 1000
    assert tables["python", 1 << 20].equals(tables["native", 1 << 20])
    assert tables["python", None].to_pandas().astype(str).equals(
        tables["native", None].to_pandas().astype(str))


def _corpus_inputs() -> list:
    """The corpus cases that analyze one Kineto JSON file."""
    out = []
    for case in cases():
        if case.argv[:1] != ["analyze"] or len(case.argv) < 2 or "ranks" in case.id:
            continue
        name = case.argv[1].removeprefix("{d}/")
        if name.endswith((".json", ".json.gz")) and "/" not in name:
            out.append(pytest.param(case, name, id=case.id))
    return out


@pytest.mark.shared(MI250)
@pytest.mark.parametrize(("case", "name"), _corpus_inputs())
def test_every_corpus_case_reads_the_same(case, name, monkeypatch, tmp_path):
    case.setup(tmp_path)
    if not (tmp_path / name).exists():
        pytest.skip("no file to read (the command's own error)")
    _both(tmp_path / name, monkeypatch)


@pytest.mark.shared(MI250)
@FUZZ
@given(kineto_files())
def test_fuzzed_traces_read_the_same(data):
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        path = Path(d) / "t.json"
        path.write_bytes(data)
        _both(path, mp)
        _both(path, mp, chunk_bytes=4096)  # streamed in pieces, not decoded whole
        _both(path, mp, chunk_bytes=1 << 20)  # decoded whole, by both


# --- targeted pieces: decode_piece, the same bytes either reader gets ------------------

class _Piece:
    def __init__(self, data: bytes) -> None:
        self.data, self.size = data, len(data)

    def read(self) -> bytes:
        return self.data


def _decode(data: bytes, monkeypatch) -> tuple[str, object]:
    """decode_piece by both readers: the same answer, returned."""
    out = []
    for reader in ("python", "native"):
        monkeypatch.setenv("TRACEVIZ_READER", reader)
        out.append(kineto.decode_piece(_Piece(data)))
    (s1, v1), (s2, v2) = out
    assert s1 == s2, (out, data)
    if s1 == "ok":
        (f1, c1), (f2, c2) = v1, v2
        pd.testing.assert_frame_equal(f1, f2, check_exact=True)
        assert c1 == c2
    else:
        assert v1 == v2
    return out[1]


def _kernel(**fields: str) -> bytes:
    base = {"ph": '"X"', "cat": '"kernel"', "name": '"k"', "pid": "0", "tid": "7",
            "ts": "1000.5", "dur": "2", "args": '{"device": 0, "stream": 7}'}
    base.update(fields)
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in base.items() if v is not None)
            + "}").encode()


def _accepted(data: bytes, monkeypatch) -> tuple[pd.DataFrame, Counter]:
    """Read natively (not declined) and the same as the Python reader's."""
    assert native.native_columns(data) is not None, data
    status, value = _decode(data, monkeypatch)
    assert status == "ok", value
    return value


def _declined(data: bytes, monkeypatch) -> tuple[str, object]:
    """Declined by the compiled reader: the Python reader's answer, by construction."""
    assert native.native_columns(data) is None, data
    return _decode(data, monkeypatch)


def test_escapes_and_surrogate_pairs_decode_to_the_same_text(monkeypatch):
    name = r'"a\"b\\c\/d\b\f\n\r\t \u00e9\u4E2D \ud83d\ude00 caf\u00c3"'
    frame, _ = _accepted(_kernel(name=name) + b"," + _kernel(name='"é中😀"'), monkeypatch)
    assert frame["name"].tolist() == ['a"b\\c/d\b\f\n\r\t é中 😀 cafÃ', "é中😀"]
    # a key spelled with escapes is the same key
    frame, _ = _accepted(_kernel(**{"n\\u0061me": '"esc"', "name": None}), monkeypatch)
    assert frame["name"].tolist() == ["esc"]


@pytest.mark.parametrize("text", [r'"\ud83d"', r'"\ude00"', r'"\ud83dx"', r'"\ud83d\u0041"',
                                  r'"\q"', r'"\u12"', r'"\u12G4"', '"a\x01"'])
def test_a_lone_surrogate_or_a_bad_escape_is_the_python_readers_error(text, monkeypatch):
    for field in ("name", "zz"):
        status, message = _declined(_kernel(**{field: text}), monkeypatch)
        assert status == "syntax" and "JSON is malformed" in str(message) \
            or "truncated" in str(message)


def test_repeated_keys_the_last_wins(monkeypatch):
    data = _kernel(name='"first"', ts="5", dur="1") \
        .replace(b"{", b'{"name": "zero", "ts": 1, "args": {"device": 3, "grid": [9]}, ', 1)
    frame, _ = _accepted(data, monkeypatch)
    assert frame["name"].tolist() == ["first"]
    assert frame["ts_ns"].tolist() == [5000]
    assert frame["device"].tolist() == [0]  # the last "args" as a whole
    assert frame["details"].tolist() == [""]


def test_absent_and_null_read_apart(monkeypatch):
    rows = [_kernel(dur=None), _kernel(dur="null"), _kernel(name="null"),
            _kernel(args="null"), _kernel(pid="null", args=None), _kernel(ts=None),
            _kernel(ts="null"), _kernel(dur='"20"')]
    frame, counts = _accepted(b",".join(rows), monkeypatch)
    assert counts[NO_NAME] == 1 and counts[NO_TIME] == 2 and counts[NOT_A_DURATION] == 2
    assert frame["dur_ns"].tolist() == [0, 2000, 2000]  # absent: an instant
    assert frame["device"].tolist() == [0, 0, -1]  # no args: the pid (here null: -1)


@pytest.mark.parametrize("values", [
    ["9223372036854775807", "-9223372036854775808", "5"],
    ["9223372036854775808", "5"],  # past int64: out of range, dropped
    ["-9223372036854775809", "18446744073709551616", "1"],
    ["1.5", "2"],  # pyarrow reads 1.5 as 1 beside integers: the Python reader's value
    ["1.5", '"0x0"'],  # beside text: unknown (-1)
    ["1e3", "true", "false", '"12"', '" 7 "', '"+3"', '"\\u0031"', "-0", "0.0"],
    ["1e-400", "2"], ["1e300", "3"], ["99999999999999999999999", "4"],
])
def test_numbers_read_as_the_python_reader_reads_them(values, monkeypatch):
    for field in ("correlation", "pid"):
        rows = [_kernel(args=f'{{"device": 0, "stream": 7, "correlation": {v}}}')
                if field == "correlation" else _kernel(pid=v) for v in values]
        _accepted(b",".join(rows), monkeypatch)


def test_a_number_msgspec_refuses_is_its_error(monkeypatch):
    data = _kernel(pid="1e400")
    assert _kineto_native.read_events(data) is not None  # read, then refused in decoding
    assert native.native_columns(data) is None
    status, message = _decode(data, monkeypatch)
    assert status == "invalid" and "Number out of range" in str(message)


@pytest.mark.parametrize("ts", ["1.5e3", "1E+2", "-0", "0.5E-3", "1e400", "123456789.123456",
                                "1e30", '"5"', "[1]", "{}", "true"])
def test_times_with_exponents_and_odd_spellings(ts, monkeypatch):
    frame, counts = _accepted(_kernel(ts=ts) + b"," + _kernel(ts="7"), monkeypatch)
    assert frame["ts_ns"].iloc[-1] == 7000


def test_time_values_are_exact(monkeypatch):
    frame, counts = _accepted(b",".join([_kernel(ts="1.5e3"), _kernel(ts="1700000000123456.789"),
                                         _kernel(ts="1e30")]), monkeypatch)
    assert frame["ts_ns"].tolist() == [1_500_000, 1_700_000_000_123_456_789]
    assert counts[OUT_OF_RANGE] == 1


_DIGITS = st.text("0123456789", min_size=1, max_size=18)
_US = st.builds(lambda sign, whole, frac, exp: sign + (whole.lstrip("0") or "0") + frac + exp,
                st.sampled_from(["", "-"]), _DIGITS,
                st.sampled_from(["", "."]).flatmap(
                    lambda dot: st.just("") if not dot else
                    st.text("0123456789", min_size=1, max_size=5).map(lambda f: "." + f)),
                st.sampled_from(["", "", "", "e3", "E-2"]))


@given(st.lists(st.one_of(_US, st.just("")), min_size=1, max_size=12))
def test_times_converted_by_the_compiled_reader_are_arrows(values):
    """ts/dur as exact ns in C (``us_to_ns``): where every value of a column has the plain
    spelling it takes, the same values and absences as Arrow's conversion of the raw text
    (``raw_us_to_ns``), which no value of that spelling makes out of range; a column with
    any other spelling (an exponent, 4+ decimals, 9e15 us or more) is left to Arrow."""
    events = b",".join(b'{"ph":"X","name":"k"' + (f',"ts":{v}'.encode() if v else b"") + b"}"
                       for v in values)
    out = _kineto_native.read_events(events)
    off = np.frombuffer(out["ts"][0], dtype=np.int32)
    raw = pa.Array.from_buffers(pa.string(), len(values),
                                [None, pa.py_buffer(out["ts"][0]), pa.py_buffer(out["ts"][1])])
    ns, absent, bad = raw_us_to_ns(raw)
    plain = [re.fullmatch(r"-?\d+(\.\d{1,3})?", v) and int(v.lstrip("-").split(".")[0]) < 9e15
             for v in values if v]
    if not all(plain):
        assert out["ts_ns"] is None
        return
    assert not bad.any()
    assert np.frombuffer(out["ts_ns"], dtype=np.int64).tolist() == ns.tolist()
    assert (off[1:] == off[:-1]).tolist() == absent.tolist()


def test_deep_nesting_is_the_python_readers_to_judge(monkeypatch):
    shallow = _kernel(zz="[" * 20 + "]" * 20)
    _accepted(shallow, monkeypatch)
    for depth in (60, 5000):
        deep = _kernel(zz="[" * depth + "]" * depth)
        status, value = _declined(deep, monkeypatch)
        assert status == ("ok" if depth == 60 else "invalid"), value


def test_a_cut_buffer_is_never_read_past(monkeypatch):
    data = b",".join([_kernel(name=r'"\u00e9\ud83d\ude00"'), _kernel()])
    for end in range(len(data)):
        cut = data[:end]
        # a copy of just the cut bytes: reading past them would read freed or foreign memory
        assert _kineto_native.read_events(bytes(cut)) is None or cut.endswith(b"}") \
            or not cut
        _decode(cut, monkeypatch)


def test_whitespace_empty_pieces_and_wrong_types(monkeypatch):
    _accepted(b" \n\t\r " + _kernel().replace(b", ", b" ,\n ") + b" \n", monkeypatch)
    assert _decode(b"  ", monkeypatch)[0] == "ok"
    for bad in (b"1", b"[]", b'"x"', _kernel(name="5"), _kernel(args="[1]"),
                _kernel(args='{"device": [0]}'), _kernel(ph="{}"), _kernel() + b",",
                _kernel() + b"]", b"\xef\xbb\xbf" + _kernel(),
                _kernel(name='"QQ"').replace(b"QQ", b"\xff")):
        _declined(bad, monkeypatch)


def test_the_whole_document_path(monkeypatch, tmp_path):
    """A small file is read whole: its metadata keys (the last of a repeated one, as
    msgspec keeps) and its events, the same by both readers."""
    events = b",".join([_kernel(), _kernel(name='"k2"')])
    doc = (b'{"schemaVersion": 1, "traceName": "a", "traceEvents": [' + events
           + b'], "traceName": "b", "deviceProperties": [{"id": 0, "name": "G"}], "x": [1]}')
    assert _kineto_native.read_events(doc, document=True)["meta"]["traceName"] is not None
    path = tmp_path / "t.json"
    path.write_bytes(doc)
    events_, meta = _both(path, monkeypatch)
    assert meta["kineto_traceName"] == "b" and meta["devices"] == {"0": "G"}
    assert len(events_) == 2
    # a second traceEvents key spelled with an escape: declined, the Python reader's
    path.write_bytes(doc.replace(b'"x"', b'"trace\\u0045vents"'))
    assert _kineto_native.read_events(path.read_bytes(), document=True) is None
    _both(path, monkeypatch)
    path.write_bytes(gzip.compress(doc))
    _both(tmp_path / "t.json", monkeypatch)


@given(st.binary(max_size=300), st.binary(max_size=4),
       st.sampled_from([b"", b'"traceEvents"', b"\x80", b"aa"]))
def test_ascii_count_is_the_bytes_methods(data, needle, inside):
    """``ascii_count`` (the whole document's check, without the GIL) answers what
    ``isascii`` and ``count`` answer: non-overlapping, an empty needle everywhere, and a
    high byte at any place, including the last 1-7 bytes read one by one."""
    for text in (data, data + inside + data, inside * 3 + data[:9], data + b"\xff"):
        for what in (needle, inside, text[:3]):
            assert _kineto_native.ascii_count(text, what) == (text.isascii(), text.count(what))
    assert _kineto_native.ascii_count(memoryview(data), bytearray(needle)) == \
        (data.isascii(), data.count(needle))


def test_the_whole_document_is_checked_alike_by_both(tmp_path, monkeypatch):
    """``plan.whole_document`` checks with the compiled ``ascii_count`` where it is the
    reader used (the read-ahead always passes it): a non-ASCII or twice-keyed document is
    streamed, as the bytes methods decide."""
    from traceviz.parsers.kineto import native, plan

    assert native.ascii_count() is _kineto_native.ascii_count
    monkeypatch.setenv("TRACEVIZ_READER", "python")
    assert native.ascii_count() is None
    doc = b'{"traceEvents": [' + _kernel() + b"]}"
    for body, whole in ((doc, True), (doc.replace(b'"k"', b'"k\xc3\xa9"'), False),
                        (doc[:-1] + b', "x": "\\"traceEvents\\""}', True),
                        (doc[:-1] + b', "y": {"traceEvents": 1}}', False)):
        (tmp_path / "t.json").write_bytes(body)
        for count in (None, _kineto_native.ascii_count):
            got = plan.whole_document(tmp_path / "t.json", 1 << 20, count)
            assert (got is not None) is whole, body
        assert plan.python_ascii_count(body, plan._TRACE_EVENTS) == \
            _kineto_native.ascii_count(body, plan._TRACE_EVENTS)


def test_the_reader_is_chosen_by_the_variable(monkeypatch):
    monkeypatch.setenv("TRACEVIZ_READER", "python")
    assert native.reader() == "python" and "Python" in native.reader_note()
    monkeypatch.setenv("TRACEVIZ_READER", "native")
    assert native.reader() == "native" and "compiled" in native.reader_note()
    monkeypatch.delenv("TRACEVIZ_READER")
    assert native.reader() == "native"
    monkeypatch.setenv("TRACEVIZ_READER", "fast")
    with pytest.raises(TraceVizError, match="TRACEVIZ_READER=fast: expected one of"):
        native.reader()
    monkeypatch.setattr(native, "_native", None)
    monkeypatch.setattr(native, "_MISSING", "No module named 'x'")
    monkeypatch.setenv("TRACEVIZ_READER", "native")
    with pytest.raises(TraceVizError, match="not built"):
        kineto.parse(Path("nowhere.json"))
    monkeypatch.delenv("TRACEVIZ_READER")
    assert native.reader() == "python" and "not built" in native.reader_note()


def test_buffers_are_wrapped_without_copying():
    out = _kineto_native.read_events(_kernel() + b"," + _kernel(pid="-3"))
    values = np.frombuffer(out["pid"][0], dtype=np.int64)
    assert values.tolist() == [0, -3] and not values.flags.writeable
    assert values.base is out["pid"][0] or values.base.obj is out["pid"][0]


def test_env_says_which_reader(monkeypatch, capsys):
    from traceviz.cli import main

    monkeypatch.delenv("TRACEVIZ_READER", raising=False)
    assert main(["env"]) == 0
    assert capsys.readouterr().err.strip() == \
        "note: Kineto reader: compiled (traceviz.parsers._kineto_native)"
    monkeypatch.setattr(native, "_native", None)
    monkeypatch.setattr(native, "_MISSING", "No module named '_kineto_native'")
    assert main(["env"]) == 0
    err = capsys.readouterr().err
    assert "Kineto reader: Python; the compiled one is not built (no C compiler" in err
    monkeypatch.setenv("TRACEVIZ_READER", "native")
    assert main(["env"]) == 2
    assert "traceviz: error: TRACEVIZ_READER=native: the compiled Kineto reader is not built" \
        in capsys.readouterr().err


def test_reads_in_threads_at_once_give_the_same_columns():
    """The reader releases the GIL and keeps no state between calls: pieces read in
    several threads at once give what they give one at a time."""
    from concurrent.futures import ThreadPoolExecutor

    pieces = [b",".join(_kernel(name=f'"k{i}"', ts=str(1000 + j)) for j in range(2000 + i))
              for i in range(8)]

    def names(piece: bytes) -> list:
        out = native.native_columns(piece)
        assert out is not None
        return out[2].name.to_pylist()

    alone = [names(p) for p in pieces]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(names, pieces)) == alone
