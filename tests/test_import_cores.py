"""Decoding a Kineto trace on several cores: threads for the compiled reader (it releases
the GIL), worker processes for the Python one; the same table as one worker, in file
order, and the number of decoders chosen from the usable cores and the file's size."""

from __future__ import annotations

import gzip
import threading

import pandas as pd
import pytest

from tests.conftest import KINETO, SHARED_TRACES, missing, shared
from traceviz.errors import TraceVizError
from traceviz.parsers.inorder import decode_in_order
from traceviz.parsers.jsonstream import Piece
from traceviz.parsers.kineto import kineto_reader, native, plan

PLAIN = SHARED_TRACES / "foreign" / "kineto" / "deepseek_v3_train.json"
GZIPPED = KINETO / "v100_diff_test.json.gz"


def _same_table(a, b) -> None:
    pd.testing.assert_frame_equal(a.events, b.events)  # values, dtypes, category order
    assert a.meta == b.meta


@pytest.mark.parametrize("trace", [PLAIN, GZIPPED])
def test_threads_give_the_table_of_one_worker(trace, monkeypatch, tmp_path):
    """3 threads over 256 KB pieces: the table (and the Parquet, byte for byte) one worker
    reads, as one document where it fits, and the pieces were decoded by the threads
    (several of them)."""
    if native.reader() != "native":
        missing("the compiled Kineto reader is not built here (pip install -e . with a C "
                "compiler)")
    one = kineto_reader.parse(shared(trace), workers=1)
    seen: list[str] = []
    decode = kineto_reader.decode_piece

    def recording(piece, details=True):
        seen.append(threading.current_thread().name)
        return decode(piece, details)

    monkeypatch.setattr(kineto_reader, "decode_piece", recording)
    three = kineto_reader.parse(trace, workers=3, chunk_bytes=256 << 10)
    _same_table(one, three)
    saved = [t.save(tmp_path / f"{n}.parquet").read_bytes() for n, t in (("1", one),
                                                                          ("3", three))]
    assert saved[0] == saved[1]
    assert len(seen) >= 10 and all(n.startswith("traceviz-decode") for n in seen), seen[:5]
    assert len(set(seen)) > 1


def test_the_python_reader_decodes_in_processes(monkeypatch):
    """TRACEVIZ_READER=python: the pieces go to worker processes, as before; same table."""
    monkeypatch.setenv("TRACEVIZ_READER", "python")
    calls = []
    real = kineto_reader.decode_in_order

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(kineto_reader, "decode_in_order", spy)
    two = kineto_reader.parse(shared(PLAIN), workers=2, chunk_bytes=512 << 10)
    assert calls == [{"workers": 2, "name": str(PLAIN), "threads": False}]
    _same_table(kineto_reader.parse(PLAIN, workers=1, chunk_bytes=512 << 10), two)


@pytest.mark.parametrize(("mb", "gzipped", "cores", "threads", "forced", "want"), [
    (20, False, 16, True, "", 1),      # under two threads' worth: one pass
    (100, False, 16, True, "", 6),     # 16 MB of JSON per thread
    (1000, False, 16, True, "", 8),    # at most MAX_THREADS
    (1000, False, 2, True, "", 2),     # at most the usable cores
    (10, True, 16, True, "", 5),       # gzip recording no size: ~8x its size in JSON
    (600, False, 16, False, "", 2),    # processes: 256 MB each
    (400, False, 16, False, "", 1),
    (40, False, 16, True, "5", 5),     # TRACEVIZ_IMPORT_WORKERS decides
])
def test_decoders_by_cores_and_size(tmp_path, monkeypatch, mb, gzipped, cores, threads,
                                    forced, want):
    path = tmp_path / ("t.json.gz" if gzipped else "t.json")
    with open(path, "wb") as f:  # a sparse file of that size: only its size is read
        f.write(b"\x1f\x8b" if gzipped else b"{")
        f.truncate(mb << 20)
    monkeypatch.setattr(plan, "usable_cores", lambda: cores)
    monkeypatch.setenv("TRACEVIZ_IMPORT_WORKERS", forced)
    assert kineto_reader._workers(path, threads) == want


@pytest.mark.shared(KINETO)
def test_a_gzip_file_says_its_size(tmp_path, monkeypatch):
    """A small trace's gzip records its JSON's size (35 MB for a 1.8 MB file): two
    threads read it, where 8x its compressed size would have made one."""
    path = shared(KINETO / "a100_diff_control.json.gz")
    size = len(gzip.decompress(path.read_bytes()))
    assert plan.json_size(path) == size > 30 << 20
    monkeypatch.setattr(plan, "usable_cores", lambda: 2)
    monkeypatch.setenv("TRACEVIZ_IMPORT_WORKERS", "")
    assert kineto_reader._workers(path, True) == 2
    assert kineto_reader._workers(path, False) == 1  # processes: not at this size


def _decode_json(piece):
    import json

    try:
        return "ok", json.loads(b"[" + piece.read() + b"]")
    except json.JSONDecodeError as e:
        return ("invalid" if b"!" in piece.read() else "syntax"), str(e)


@pytest.mark.parametrize("threads", [False, True])
def test_threads_settle_in_order_and_stop_on_error(threads):
    """Results come in file order whatever thread finishes first; a piece cut inside a
    value is joined with the next; an unreadable piece ends it with its one line."""
    pieces = [Piece(b'{"a": %d}' % i, b",") for i in range(40)]
    pieces[7:9] = [Piece(b'{"a": [7', b","), Piece(b'8]}', b",")]  # cut inside a value
    out = [v for _, v in decode_in_order(iter(pieces), _decode_json, workers=3,
                                         threads=threads)]
    assert len(out) == 39 and out[8] == [{"a": 9}] and out[7] == [{"a": [7, 8]}]
    pieces[20] = Piece(b"{!}", b",")
    with pytest.raises(TraceVizError, match=r"^input: Expecting property name"):
        list(decode_in_order(iter(pieces), _decode_json, workers=3, threads=threads))
