"""The H100 captures committed under sample_traces/gpu: each committed Parquet is what
the parser makes of its raw Kineto trace, checked against figures recomputed from the raw
JSON in plain Python (tests/rawref.py), and the findings script (docs/findings-h100.md)
runs on them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.rawref import Reference, ns
from traceviz import Trace, load
from traceviz.analyses.summary.figures import summarize

GPU = Path(__file__).parent.parent / "sample_traces" / "gpu"
RAW = sorted(GPU.glob("*/train/trace.pt.trace.json.gz"))


@pytest.mark.parametrize("raw", RAW, ids=lambda p: p.parent.parent.name)
def test_committed_parquet_is_the_raw_trace(raw):
    ref = Reference(raw)
    committed = Trace.load(raw.parent / "trace.parquet")
    k = committed.kernels()
    assert len(k) == ref.kernel_count > 0
    assert int(k["dur_ns"].sum()) == ref.kernel_total_ns
    per_name = Counter()
    for e in ref.kernels:
        per_name[e["name"]] += ns(e["dur"])
    got = k.groupby("name", observed=True)["dur_ns"].sum()
    assert {n: int(v) for n, v in got.items() if v} == {n: v for n, v in per_name.items() if v}
    assert summarize(committed).trace_busy_ns == ref.busy_ns()
    # and parsing the raw trace again today gives the same table
    again = load(raw)
    assert len(again.kernels()) == len(k)
    assert int(again.events["dur_ns"].sum()) == int(committed.events["dur_ns"].sum())


def test_bench_figures_are_the_batch_times():
    runs = sorted(GPU.glob("*/*/bench.json"))
    assert len(runs) >= 36
    for b in runs:
        bench = json.loads(b.read_text())
        times = bench["batch_times_s"]
        assert bench["batches"] == len(times) > 0
        assert bench["time_per_batch_s"]["min"] == min(times)
        assert bench["time_per_batch_s"]["max"] == max(times)
        meta = Trace.load(b.parent / "trace.parquet").meta
        assert meta["bench"]["batch_times_s"] == times
        assert "H100" in (GPU / "machine.txt").read_text()


def test_findings_script_prints_every_variant():
    out = subprocess.run([sys.executable, str(GPU.parent / "gpu_findings.py")],
                         capture_output=True, text=True, check=True).stdout
    cudnn = json.loads((GPU / "cudnn_torch/train/bench.json").read_text())
    median_ms = 1e3 * cudnn["time_per_batch_s"]["median"]
    # Markdown table cells: names escaped (render/escape.markdown), "cudnn\_torch"
    row = next(line for line in out.splitlines() if line.startswith("| cudnn\\_torch | "))
    assert f"| {median_ms:.2f} |" in row
    for v in ("cell", "fine", "jit", "compile", "static", "naive8", "fused", "graph"):
        assert f"| {v}\\_torch | bf16 |" in out
