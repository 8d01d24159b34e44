"""Property-based fuzzing of the readers of what traceviz itself writes: a Parquet events
table (its columns and its metadata) and a run folder's records (bench.json,
config.json, meta.json). Every mutation ends in exit 0, or in exit 2 with one
``traceviz: error:`` line; never an internal error, a traceback, a RuntimeWarning or
``--json`` that is not JSON. Budget and replay as in ``test_fuzz.py``
(``TRACEVIZ_FUZZ_EXAMPLES``, ``TRACEVIZ_FUZZ_RANDOM``)."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import warnings
from contextlib import redirect_stderr, redirect_stdout
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_parquet
from tests.test_fuzz import EXAMPLES, FUZZ, VALUES
from traceviz.cli import main

RUN = Path(__file__).resolve().parents[1] / "sample_traces" / "cpu" / "cell_torch"
# the records are read on every example: a third of the budget is enough to cover them
RECORDS = settings(FUZZ, max_examples=max(10, EXAMPLES // 3))


def _no_nan(text: str) -> None:
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def _analyze(path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["analyze", str(path), "--json"])
    text = err.getvalue()
    lines = [x for x in text.splitlines() if x.startswith("traceviz: error:")]
    assert (code == 0 and not lines) or (code == 2 and len(lines) == 1), text
    assert "Traceback" not in text, text
    if code == 0:
        _no_nan(out.getvalue())  # valid JSON: no NaN, no Infinity
    return code, text


# --- Parquet ----------------------------------------------------------------------------

@cache
def _table() -> pa.Table:
    return pq.read_table(shared_parquet("kineto", "mi250_rocm_train.json.gz"))


COLUMN_VALUES = st.one_of(
    st.none(), st.sampled_from([0, -1, -(2 ** 63), 2 ** 63 - 1, 2 ** 62, 1, 7]),
    st.floats(), st.text(max_size=12), st.booleans())


@st.composite
def parquet_edits(draw) -> tuple[dict | None, list[tuple[str, int, object]]]:
    t = _table()
    meta = None
    if draw(st.booleans()):
        meta = json.loads(t.schema.metadata[b"traceviz"])
        for _ in range(draw(st.integers(1, 3))):
            key = draw(st.sampled_from(sorted(meta) + ["bench", "workload", "runner"]))
            meta[key] = draw(VALUES)
    cells = []
    for _ in range(draw(st.integers(0 if meta else 1, 3))):
        cells.append((draw(st.sampled_from(t.column_names)),
                      draw(st.integers(0, t.num_rows - 1)), draw(COLUMN_VALUES)))
    return meta, cells


@FUZZ
@given(parquet_edits())
def test_fuzz_parquet(edit):
    meta, cells = edit
    t = _table()
    for column, row, value in cells:
        values = t.column(column).to_pylist()
        values[row] = value
        try:
            arr = pa.array(values, t.schema.field(column).type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            arr = pa.array([None if v is None else str(v) for v in values], pa.string())
        t = t.set_column(t.schema.get_field_index(column), column, arr)
    if meta is not None:
        t = t.replace_schema_metadata({b"traceviz": json.dumps(meta).encode()})
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.parquet"
        pq.write_table(t, path)
        _analyze(path)


# --- run records ------------------------------------------------------------------------

@st.composite
def record_edits(draw) -> list[tuple[str, str | None, str, object]]:
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(["bench.json", "config.json", "meta.json"]))
        record = json.loads((RUN / name).read_text())
        keys = sorted(record)
        key = draw(st.sampled_from(keys))
        sub = None
        if isinstance(record[key], dict) and record[key] and draw(st.booleans()):
            sub, key = key, draw(st.sampled_from(sorted(record[key])))
        value = draw(st.one_of(VALUES, st.sampled_from([float("nan"), -1.5, float("inf")])))
        edits.append((name, sub, key, value))
    return edits


@RECORDS
@given(record_edits())
def test_fuzz_run_records(edits):
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run"
        shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("trace.parquet"))
        for name, sub, key, value in edits:
            record = json.loads((run / name).read_text())
            (record[sub] if sub else record)[key] = value
            (run / name).write_text(json.dumps(record))
        _analyze(run)
