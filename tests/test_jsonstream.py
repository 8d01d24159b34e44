"""The chunked reader: cuts inside strings and nested values, parallel decoding, exactness."""

from __future__ import annotations

import gzip
import io
import json
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import KINETO, shared
from traceviz.errors import TraceVizError
from traceviz.parsers import kineto
from traceviz.parsers.jsonstream import ArrayChunks, decode_in_order, file_ranges
from traceviz.parsers.kineto import kineto_reader, times


def _decode_json(piece) -> tuple[str, object]:
    try:
        return "ok", json.loads(b"[" + piece.read() + b"]")
    except ValueError as e:
        return "syntax", str(e)


def _read(doc: bytes, chunk: int) -> tuple[list, ArrayChunks]:
    chunks = ArrayChunks(io.BytesIO(doc), b"traceEvents", chunk_bytes=chunk)
    out = []
    for _, part in decode_in_order(iter(chunks), _decode_json):
        out.extend(part)
    return out, chunks


def _read_ranges(tmp_path, doc: bytes, chunk: int) -> tuple[list, bytes]:
    path = tmp_path / "doc.json"
    path.write_bytes(doc)
    ranges, meta = file_ranges(str(path), b"traceEvents", chunk, window=256)
    out = []
    for _, part in decode_in_order(iter(ranges), _decode_json):
        out.extend(part)
    return out, meta


def test_cuts_inside_strings_and_nested_values_are_repaired(tmp_path):
    events = []
    for i in range(300):
        events.append({"ph": "X", "name": f"tricky}}, {{name {i}", "ts": i,
                       "args": {"list": [{"a": 1}, {"b": 2}, {"c": "}, {"}]}})
    doc = json.dumps({"before": [1, "]"], "traceEvents": events,
                      "INFO": ["x.cpp:1] done", "}]"], "traceName": "t"}, indent=1).encode()
    for chunk in (64, 200, 1000, 10_000, 1 << 20):
        got, chunks = _read(doc, chunk)
        assert got == events, chunk
        meta = json.loads(chunks.metadata_document())
        assert meta["INFO"] == ["x.cpp:1] done", "}]"] and meta["traceEvents"] == []
        got, meta = _read_ranges(tmp_path, doc, chunk)
        assert got == events, chunk
        meta = json.loads(meta)
        assert meta["INFO"] == ["x.cpp:1] done", "}]"] and meta["traceEvents"] == []


def test_bare_array_and_empty_array(tmp_path):
    got, _ = _read(b'[{"a": 1}, {"b": 2}]', 4)
    assert got == [{"a": 1}, {"b": 2}]
    got, chunks = _read(b'{"traceEvents": [ ], "x": 1}', 4)
    assert got == [] and json.loads(chunks.metadata_document())["x"] == 1
    got, _ = _read_ranges(tmp_path, b'[{"a": 1}, {"b": 2}]', 4)
    assert got == [{"a": 1}, {"b": 2}]
    got, meta = _read_ranges(tmp_path, b'{"traceEvents": [ ], "x": 1}', 4)
    assert got == [] and json.loads(meta)["x"] == 1


def test_truncated_array_is_an_error():
    with pytest.raises(TraceVizError, match="truncated"):
        _read(b'{"traceEvents": [{"a": 1}, {"b": 2}', 4)


def test_parallel_decoding_matches_serial(tmp_path):
    path = shared(KINETO / "ampere_sampled_rank0.json.gz")
    serial = kineto.parse(path, workers=1, chunk_bytes=1 << 20)
    parallel = kineto.parse(path, workers=2, chunk_bytes=64 << 10)
    pd.testing.assert_frame_equal(serial.events, parallel.events, check_categorical=False)
    whole = kineto.parse(path, workers=1, chunk_bytes=1 << 30)
    pd.testing.assert_frame_equal(serial.events, whole.events, check_categorical=False)
    # an uncompressed copy goes the file-range way (workers read their own byte ranges)
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    ranged = kineto.parse(plain, workers=2, chunk_bytes=64 << 10)
    pd.testing.assert_frame_equal(serial.events, ranged.events, check_categorical=False)


def test_raw_us_to_ns_exact():
    raws = [b"1712195495505543.2", b"41.768", b"7", b"-3.5", b"0.0004", b"0.0005", b"1e3", b"",
            b"null", b"123456789012345678901", b"1e30", b"9000000000000000", b"-1e300"]
    import msgspec
    values, missing, bad = times.raw_us_to_ns([msgspec.Raw(r) for r in raws])
    assert list(values[:7]) == [1712195495505543200, 41768, 7000, -3500, 0, 1, 1_000_000]
    assert list(missing) == [False] * 7 + [True, True] + [False] * 4
    # numbers int64 ns cannot hold are flagged, never wrapped
    assert list(bad) == [False] * 9 + [True] * 4
    # the fast path (plain integers) flags them too
    values, missing, bad = times.raw_us_to_ns([msgspec.Raw(r) for r in
                                                (b"7", b"9223372036854775807", b"12")])
    assert list(bad) == [False, True, False] and list(values[[0, 2]]) == [7000, 12000]


# forces the general (regex) path: 4 decimals are not a whole ns
_SLOW = b"0.0004"


def _both_paths(raws: list[bytes]):
    import msgspec

    fast = times.raw_us_to_ns([msgspec.Raw(r) for r in raws])
    slow = times.raw_us_to_ns([msgspec.Raw(r) for r in raws + [_SLOW]])
    return fast, tuple(a[:-1] for a in slow)


def test_raw_us_to_ns_decimal_path_exact_at_the_edges():
    """Values of at most 3 decimals take one decimal cast: exact to the ns, the int64
    limit flagged (never wrapped), and the same answers as the general path."""
    raws = [b"1712195495505543.217", b"8999999999999999.999", b"-4611686018427387.904",
            b"9000000000000000", b"-9000000000000000.001", b"0.001", b"-0", b"5.", b"2.50"]
    (values, missing, bad), (s_values, s_missing, s_bad) = _both_paths(raws)
    assert list(values[:3]) == [1712195495505543217, 8999999999999999999,
                                -4611686018427387904]
    assert list(bad) == [False, False, False, True, True, False, False, False, False]
    assert list(values[5:]) == [1, 0, 5000, 2500] and not missing.any()
    # a flagged value's number is never used (its event is dropped)
    assert list(bad) == list(s_bad) and list(values[~bad]) == list(s_values[~s_bad])
    assert list(missing) == list(s_missing)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-(10 ** 17), 10 ** 17), st.integers(0, 999),
                          st.integers(0, 3)), min_size=1, max_size=30))
def test_raw_us_to_ns_decimal_path_equals_general_path(parts):
    raws = []
    for whole, frac, digits in parts:
        text = str(whole)
        if digits:
            text += "." + str(frac).zfill(3)[:digits]
        raws.append(text.encode())
    (values, missing, bad), (s_values, s_missing, s_bad) = _both_paths(raws)
    assert list(bad) == list(s_bad) and list(missing) == list(s_missing)
    assert list(values[~bad]) == list(s_values[~s_bad])


def _parse_both_ways(path, monkeypatch) -> tuple[object, object, bool]:
    """``kineto.parse`` of ``path`` decoding a small file whole and streaming it in pieces
    (the whole-document path switched off): each a (events, meta) pair or the error text;
    and whether the whole-document path took the file."""
    def run() -> object:
        try:
            t = kineto.parse(path)
        except TraceVizError as e:
            return str(e)
        return t.events, t.meta

    whole = run()
    used = kineto_reader._whole_document(path, 4 << 20, None, True) is not None
    with monkeypatch.context() as m:
        m.setattr(kineto_reader, "_whole_document", lambda *a, **k: None)
        streamed = run()
    return whole, streamed, used


def _assert_same(a: object, b: object) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    pd.testing.assert_frame_equal(a[0], b[0])
    assert a[1] == b[1]


def test_a_small_file_decoded_whole_equals_its_streamed_pieces(tmp_path, monkeypatch):
    src = shared(KINETO / "ampere_sampled_rank0.json.gz")
    text = gzip.decompress(src.read_bytes())
    doc = json.loads(text)
    events = doc["traceEvents"][:400]
    plain = tmp_path / "plain.json"
    plain.write_bytes(text)
    cases = {
        "real.json.gz": (src.read_bytes(), True),
        "plain.json": (text, True),
        "null-name.json": (json.dumps({"traceName": None, "traceEvents": events}).encode(),
                           True),
        # the streaming reader takes the first "traceEvents" it meets, wherever it is
        "nested-key.json": (json.dumps({"x": {"traceEvents": events[:5]},
                                        "traceEvents": events}).encode(), False),
        "non-ascii.json": (json.dumps({"traceEvents": [dict(e, name=e.get("name", "") + "é")
                                                       for e in events]},
                                      ensure_ascii=False).encode(), False),
        "bare-array.json": (json.dumps(events).encode(), False),
        "trailing.json": (json.dumps({"traceEvents": events}).encode() + b" x", False),
        "two-members.json.gz": (gzip.compress(text[:1000]) + gzip.compress(text[1000:]),
                                False),
        "truncated.json.gz": (src.read_bytes()[:50_000], False),
        "no-events.json": (b'{"traceEvents": [], "traceName": "t"}', True),
        "no-key.json": (b'{"events": []}', False),
    }
    for name, (data, whole_expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        whole, streamed, used = _parse_both_ways(path, monkeypatch)
        assert used == whole_expected, name
        _assert_same(whole, streamed)
    # the real trace: events and meta as the streaming reader makes them
    whole, _, _ = _parse_both_ways(tmp_path / "real.json.gz", monkeypatch)
    assert len(whole[0]) == 4810 and whole[1]["kineto_distributedInfo"]["rank"] == 0


def test_read_whole_within_its_limit_with_either_inflater(tmp_path, monkeypatch):
    import zlib

    from traceviz.files import fileio

    text = b'{"traceEvents": []}' * 1000
    gz, plain = tmp_path / "a.json.gz", tmp_path / "a.json"
    gz.write_bytes(gzip.compress(text))
    plain.write_bytes(text)
    for inflater in (fileio._zlib, zlib):  # ISA-L's where installed, and zlib's
        monkeypatch.setattr(fileio, "_zlib", inflater)
        assert fileio.read_whole(gz, len(text)) == text
        assert fileio.read_whole(plain, len(text)) == text
        assert fileio.read_whole(gz, len(text) - 1) is None
        assert fileio.read_whole(plain, len(text) - 1) is None
        cut = tmp_path / "cut.json.gz"
        cut.write_bytes(gz.read_bytes()[:-10])
        assert fileio.read_whole(cut, len(text)) is None
        corrupt = bytearray(gz.read_bytes())
        corrupt[-6] ^= 1  # the CRC
        cut.write_bytes(bytes(corrupt))
        assert fileio.read_whole(cut, len(text)) is None
    assert fileio.read_whole(tmp_path, 10) is None  # a folder


def test_streamed_gzip_with_the_standard_librarys_inflater(monkeypatch):
    from traceviz.files import fileio

    path = shared(KINETO / "ampere_sampled_rank1.json.gz")
    fast = kineto.parse(path, chunk_bytes=1 << 20)  # 1 MB pieces: streamed
    monkeypatch.setattr(fileio, "_gzip", gzip)
    slow = kineto.parse(path, chunk_bytes=1 << 20)
    pd.testing.assert_frame_equal(fast.events, slow.events)


def test_escaped_names_and_names_that_are_not_text(tmp_path):
    """An escaped spelling of a name is the same name (whole or in pieces); a null name is
    dropped with a note; a name that is not text is the event layout's fault, reported at
    the first event at fault."""
    def doc(names: list[str]) -> bytes:
        events = ",".join(f'{{"ph": "X", "cat": "cpu_op", "name": {n}, "pid": 1, "tid": 1, '
                          f'"ts": {i}, "dur": 1}}' for i, n in enumerate(names))
        return f'{{"traceEvents": [{events}]}}'.encode()

    path = tmp_path / "names.json"
    path.write_bytes(doc(['"ab"', '"a\\u0062"', 'null', '"caf\\u00e9"', '"ab"']))
    for chunk in (None, 64):  # whole, and in pieces
        trace = kineto.parse(path, chunk_bytes=chunk)
        names = trace.events["name"]
        # the null name is dropped, and said: a table with it is one every command refuses
        assert names.cat.codes.tolist() == [0, 0, 1, 0]
        assert "1 event dropped: no name (null)" in trace.meta["notes"]
        assert list(names.cat.categories) == ["ab", "café"]
    for bad, where in (('5', "$[1].name"), ('{"x": 1}', "$[1].name"), ('["a"]', "$[1].name")):
        path.write_bytes(doc(['"ok"', bad, '"ok"']))
        with pytest.raises(TraceVizError, match=r"unexpected event layout \(Expected `str \| "
                           rf"null`, got `\w+` - at `{re.escape(where)}`\)"):
            kineto.parse(path)
    # a bad pid after a bad name: the name, the first fault, is the one reported
    path.write_bytes(doc(['5', '"ok"']).replace(b'"pid": 1, "tid": 1, "ts": 1',
                                                 b'"pid": [], "tid": 1, "ts": 1'))
    with pytest.raises(TraceVizError, match=r"at `\$\[0\]\.name`"):
        kineto.parse(path)
