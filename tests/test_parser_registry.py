"""A new input format is its parser and one row of ``parsers.formats.FORMATS``: a tiny
format made here (a CSV of kernels, one per line) registered in one place is detected,
loaded by ``traceviz.load`` and summarized by ``analyze --json``, each figure checked
against the CSV itself; unregistered, it is refused as before."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import traceviz
from traceviz.cli import main
from traceviz.errors import TraceVizError
from traceviz.parsers import detect_format
from traceviz.parsers.formats import FORMATS, Format, Probe, register, unregister
from traceviz.parsers.normalize import BASE_COLUMNS, finish
from traceviz.trace import Trace

HEADER = b"# kernels csv"
DEVICE = "NVIDIA A100-SXM4-40GB"
# name, start (µs), duration (µs), stream: two steps of three kernels on two streams
ROWS = [("volta_sgemm_128x64_nn", 10, 120, 7), ("vectorized_elementwise_kernel", 140, 15, 7),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", 100, 60, 13),
        ("volta_sgemm_128x64_nn", 400, 118, 7), ("vectorized_elementwise_kernel", 530, 16, 7),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", 480, 70, 13)]


def parse_kernels_csv(path: Path, progress: object = None) -> Trace:
    """The toy format's parser: every line after the header one kernel of device 0."""
    with open(path, newline="") as f:
        lines = [r for r in csv.reader(f) if r and not r[0].startswith("#")]
    k = pd.DataFrame(lines, columns=["name", "ts_us", "dur_us", "stream"])
    n = len(k)
    base = pd.DataFrame({
        "kind": "kernel", "name": k["name"].astype("category"),
        "ts_ns": k["ts_us"].astype(np.int64) * 1000, "dur_ns": k["dur_us"].astype(np.int64) * 1000,
        "pid": 0, "tid": k["stream"].astype(np.int64), "device": np.zeros(n, np.int64),
        "stream": k["stream"].astype(np.int64), "correlation": -1, "step": -1, "bytes": -1,
    })[list(BASE_COLUMNS)]
    return finish(base, {"source_format": "kernels-csv", "source_file": str(path),
                         "devices": {"0": DEVICE}})


TOY = Format("kernels-csv", lambda p: not p.is_dir and p.text.startswith(HEADER),
             parse_kernels_csv)


@pytest.fixture
def toy(tmp_path: Path):
    path = tmp_path / "run.kernels.csv"
    path.write_text(HEADER.decode() + "\n" + "\n".join(",".join(map(str, r)) for r in ROWS)
                    + "\n")
    register(TOY, before="mxnet")  # before the JSON formats: its claim reads the text
    try:
        yield path
    finally:
        unregister(TOY.name)
    assert TOY not in FORMATS


def test_a_registered_format_is_detected_loaded_and_analyzed(toy: Path, capsys) -> None:
    assert detect_format(toy) == "kernels-csv"
    trace = traceviz.load(toy)
    k = trace.events[trace.events["kind"] == "kernel"]
    assert sorted(k["name"].astype(str)) == sorted(r[0] for r in ROWS)
    assert sorted(k["dur_ns"].tolist()) == sorted(r[2] * 1000 for r in ROWS)
    assert main(["analyze", str(toy), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # each name's calls and time, the device's span and busy time, from the CSV
    calls = {r[0]: sum(1 for x in ROWS if x[0] == r[0]) for r in ROWS}
    total = {r[0]: sum(x[2] for x in ROWS if x[0] == r[0]) * 1000 for r in ROWS}
    assert {k["name"]: k["count"] for k in out["top_kernels"]} == calls
    assert {k["name"]: k["total_ns"] for k in out["top_kernels"]} == total
    assert out["span_ns"] == (max(r[1] + r[2] for r in ROWS) - min(r[1] for r in ROWS)) * 1000
    busy, end = 0, -1
    for start, stop in sorted((r[1], r[1] + r[2]) for r in ROWS):  # the union's length
        busy += max(0, stop - max(start, end))
        end = max(end, stop)
    assert out["busy_ns"] == busy * 1000


def test_unregistered_the_format_is_refused_as_before(toy: Path) -> None:
    unregister(TOY.name)
    with pytest.raises(TraceVizError, match="unrecognised trace format"):
        detect_format(toy)


def test_the_rows_are_asked_in_order_and_a_folder_reads_no_bytes(tmp_path: Path) -> None:
    """The rows' order is the detection order: an ``.xplane.pb`` name wins over content,
    and a folder's probe has no bytes to read."""
    names = [f.name for f in FORMATS]
    assert names.index("xplane") < names.index("kineto")
    odd = tmp_path / "x.xplane.pb"
    odd.write_text('{"traceEvents": []}')
    assert detect_format(odd) == "xplane"
    probe = Probe(tmp_path)
    assert probe.is_dir and probe.magic == b"" and probe.text == b""
