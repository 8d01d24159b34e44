"""A small Kineto trace read ahead on a thread while a command imports: the parse takes
the pieces and raw reads (and makes the table it makes without them), nothing is taken
where the file or the plan changed or the reading failed, and the read-ahead itself
imports no pandas."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import KINETO, SHARED_TRACES, missing, shared
from traceviz.errors import TraceVizError
from traceviz.parsers.kineto import kineto_reader, native, prefetch

SMALL = KINETO / "a100_diff_control.json.gz"  # 35 MB of JSON: two threads, or read whole
PLAIN = SHARED_TRACES / "foreign" / "kineto" / "deepseek_v3_train.json"
NOT_ASCII = "not-ascii"  # the small trace with one non-ASCII character: never read whole


def _not_ascii(tmp_path):
    """The small trace, gzipped, with a document key holding "é": read in pieces."""
    text = gzip.decompress(shared(SMALL).read_bytes()).rstrip()
    assert text.endswith(b"}")
    path = tmp_path / "not_ascii.json.gz"
    path.write_bytes(gzip.compress(text[:-1] + ', "note": "é"}'.encode(), compresslevel=1))
    return path


@pytest.fixture(autouse=True)
def _compiled():
    if native.reader() != "native":
        missing("the compiled Kineto reader is not built here (pip install -e . with a C "
                "compiler)")


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.events, b.events)  # values, dtypes, category order
    assert a.meta == b.meta


def _taken(monkeypatch) -> list:
    """What each parse took from the read-ahead (None: nothing)."""
    seen: list = []
    real = prefetch.take

    def spy(*args):
        got = real(*args)
        seen.append(got)
        return got

    monkeypatch.setattr(prefetch, "take", spy)
    return seen


@pytest.mark.parametrize("trace, decoders", [(SMALL, 2), (SMALL, 1), (PLAIN, 2),
                                             (NOT_ASCII, 2), (NOT_ASCII, 1)])
def test_the_read_ahead_gives_the_table_read_without_it(trace, decoders, monkeypatch,
                                                       tmp_path):
    """A small ASCII document, gzipped or plain, is read whole whatever the parse's plan
    (2 threads, or 1); one that is not ASCII is read in the parse's gzip pieces where it
    has 2 threads, and not at all where it has 1 (the parse streams it itself). Each
    time: taken, every read used, the same table as without it."""
    trace = _not_ascii(tmp_path) if trace == NOT_ASCII else shared(trace)
    monkeypatch.setenv("TRACEVIZ_IMPORT_WORKERS", str(decoders))
    without = kineto_reader.parse(trace)
    taken = _taken(monkeypatch)
    prefetch.start(trace)
    with_ahead = kineto_reader.parse(trace)
    _same(without, with_ahead)
    ahead = taken[0]
    assert ahead is not None and ahead.done and ahead.decoders == decoders
    if trace.name != "not_ascii.json.gz":
        assert ahead.whole is not None and ahead.whole[0].count(b'"traceEvents"') == 1
        assert ahead.pieces == []
    elif decoders == 1:
        assert ahead.whole is None and ahead.pieces == []
    else:
        assert ahead.whole is None and len(ahead.pieces) >= 1
        assert ahead.reads == {}  # each piece's read was taken by its decoder
    assert prefetch.take(trace, decoders, ahead.piece) is None  # taken once


def test_nothing_is_taken_from_a_changed_file_or_pieces_of_another_plan(monkeypatch,
                                                                       tmp_path):
    """A file rewritten after the read-ahead began: the parse reads the file itself. A
    parse with another piece size takes a whole document (one piece of any plan), but
    not pieces cut for another size."""
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(shared(SMALL).read_bytes())
    prefetch.start(trace)
    os.utime(trace, ns=(1, 1))
    taken = _taken(monkeypatch)
    kineto_reader.parse(trace)
    assert taken == [None]
    prefetch.start(trace)
    taken.clear()
    other = kineto_reader.parse(trace, chunk_bytes=4 << 20)
    assert taken[0] is not None and taken[0].whole is not None
    pd.testing.assert_frame_equal(other.events, kineto_reader.parse(trace).events)
    monkeypatch.setenv("TRACEVIZ_IMPORT_WORKERS", "2")
    pieces = _not_ascii(tmp_path)
    prefetch.start(pieces)
    taken.clear()
    other = kineto_reader.parse(pieces, chunk_bytes=4 << 20)
    assert taken == [None]
    pd.testing.assert_frame_equal(other.events, kineto_reader.parse(pieces).events)


def test_a_failed_read_ahead_leaves_the_parse_its_own_error(monkeypatch, tmp_path):
    """A truncated gzip: the read-ahead fails, takes nothing, and the parse says what is
    wrong in the words it uses without one."""
    trace = tmp_path / "cut.json.gz"
    trace.write_bytes(shared(SMALL).read_bytes()[:400_000])
    with pytest.raises(TraceVizError) as plain:
        kineto_reader.parse(trace)
    taken = _taken(monkeypatch)
    prefetch.start(trace)
    with pytest.raises(TraceVizError) as ahead:
        kineto_reader.parse(trace)
    assert taken == [None] and str(ahead.value) == str(plain.value)


def test_only_small_kineto_files_with_the_compiled_reader_are_read_ahead(monkeypatch,
                                                                         tmp_path):
    """Not a .json/.json.gz file, a folder, JSON above MAX_MB, a limit that is not a
    number, or TRACEVIZ_READER=python: no thread is started, and no error raised."""
    big = tmp_path / "big.json.gz"
    with gzip.open(big, "wb", compresslevel=1) as f:  # its size record says > MAX_MB
        f.write(b'{"traceEvents": [' + b" " * ((prefetch.MAX_MB << 20) + 10) + b"]}")
    before = dict(prefetch._ahead)
    cases = [shared(KINETO / "a100_diff_control.json.gz").with_suffix(".parquet"),
             tmp_path, big]
    for path in cases:
        prefetch.start(path)
    monkeypatch.setenv("TRACEVIZ_MAX_ELEMENT_MB", "lots")  # the parse says so, not this
    prefetch.start(shared(SMALL))
    monkeypatch.delenv("TRACEVIZ_MAX_ELEMENT_MB")
    monkeypatch.setenv("TRACEVIZ_READER", "python")
    prefetch.start(shared(SMALL))
    assert prefetch._ahead == before


def test_the_read_ahead_imports_no_pandas():
    """Started before the command's imports, it must not make them: a process that
    starts it and waits for it has imported neither pandas, numpy nor pyarrow."""
    code = ("import sys; from pathlib import Path\n"
            "from traceviz.parsers.kineto import prefetch\n"
            f"p = Path({str(shared(SMALL))!r}); prefetch.start(p)\n"
            "thread, ahead = prefetch._ahead[prefetch._key(p)]; thread.join()\n"
            "print(ahead.done, ahead.whole is not None,"
            " [m for m in ('pandas', 'numpy', 'pyarrow') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True", "[]"]


# ``traceviz analyze`` as the console script runs it, noting what its parse took
_TAKEN = """
import sys
from traceviz.parsers.kineto import prefetch
real = prefetch.take
def take(*args):
    got = real(*args)
    print("taken", got is not None and got.done, file=sys.stderr)
    return got
prefetch.take = take
sys.argv = ["traceviz", *sys.argv[1:]]
from traceviz.entry import entry
entry()
"""


def test_analyze_takes_what_it_read_ahead():
    """The ``traceviz`` process starts the read-ahead and its parse takes it; the output
    is the one the Python reader gives (TRACEVIZ_READER=python: nothing read ahead)."""
    outs = []
    for reader in ("native", "python"):
        r = subprocess.run([sys.executable, "-c", _TAKEN, "analyze", str(shared(SMALL)),
                            "--json"], capture_output=True, text=True, check=True,
                           env={**os.environ, "TRACEVIZ_READER": reader})
        outs.append((json.loads(r.stdout), r.stderr.split()))
    assert outs[0][1] == ["taken", "True"] and outs[1][1] == []
    assert outs[0][0] == outs[1][0]


def test_main_in_a_process_with_pandas_reads_nothing_ahead(monkeypatch):
    """``main`` called where pandas is imported already (a test, a notebook): nothing to
    read beside, and a read the command never took would stay held; the parse reads the
    file itself."""
    from traceviz.cli import main

    taken = _taken(monkeypatch)
    before = dict(prefetch._ahead)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["analyze", str(shared(SMALL)), "--json"]) == 0
        assert main(["analyze", str(shared(SMALL)), "--top", "0"]) == 2
    assert prefetch._ahead == before and taken == [None]
