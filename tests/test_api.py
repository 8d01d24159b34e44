"""The notebook API (issue 15): traceviz.load, Trace.kernels/launches/casts/ops/phases/
summary, and the export tables read by DuckDB and polars. Figures are recomputed from the
raw Kineto JSON in plain Python (tests/rawref.py's loader)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict

import pandas as pd
import pytest

import traceviz
from tests.conftest import KINETO, ROOT
from tests.rawref import load as raw_events
from tests.rawref import ns
from traceviz.analyses import summarize
from traceviz.cli import main

CPU_RUN = ROOT / "sample_traces" / "cpu" / "cudnn_torch"
GPU_TRAIN = ROOT / "sample_traces" / "gpu" / "cudnn_torch" / "train"
GPU_BF16 = ROOT / "sample_traces" / "gpu" / "cudnn_torch-bf16" / "train"
PHASES = ("data", "forward", "backward", "optimizer")


def test_readme_notebook_example_runs(monkeypatch, capsys):
    """The "Python API" page's notebook block, executed as written from the repository root."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("# Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 8
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(code, "docs/api.md", "exec"), scope)
    t = scope["t"]
    assert isinstance(t, traceviz.Trace)
    out = capsys.readouterr().out
    assert "aten::" in out or "mkldnn" in out.lower() or "kernel" in out.lower()


@pytest.mark.parametrize("path", [
    CPU_RUN,                                   # a run folder
    CPU_RUN / "trace.parquet",                 # traceviz Parquet
    CPU_RUN / "trace.pt.trace.json.gz",        # raw Kineto
    KINETO / "a100_diff_control.json.gz",      # a trace brought from elsewhere
], ids=["run-folder", "parquet", "raw-cpu", "raw-gpu"])
def test_load_takes_what_analyze_takes(path):
    t = traceviz.load(path)
    k = t.kernels()
    s = t.summary()
    assert len(k) == s["kernels"]["count"] > 0
    assert int(k["dur_ns"].sum()) == s["kernels"]["total_ns"]
    assert s == json.loads(json.dumps(summarize(t, with_efficiency=True).to_dict()))


def test_kernels_on_a_cpu_capture_are_the_work_ops():
    """On a CPU capture kernels() is the leaf ops analyze counts, not an empty frame."""
    t = traceviz.load(CPU_RUN)
    assert t.is_cpu and len(t.kernel_events) == 0
    k = t.kernels()
    raw = [e for e in raw_events(CPU_RUN / "trace.pt.trace.json.gz") if e.get("cat") == "cpu_op"]
    assert 0 < len(k) < len(raw)
    assert set(k["name"].astype(str)) <= {e["name"] for e in raw}


def test_bad_path_is_one_line_error(tmp_path):
    with pytest.raises(traceviz.TraceVizError, match="does not exist|no such|not found"):
        traceviz.load(tmp_path / "missing.json")


def _raw_op_tree(events: list[dict]) -> tuple[dict, dict]:
    """depth and self time of every cpu_op, by (tid, ts, name), with a stack per thread."""
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"),
                 key=lambda e: (e["tid"], ns(e["ts"]), -ns(e["dur"])))
    depth, self_ns = {}, {}
    stacks: dict = defaultdict(list)
    for e in ops:
        s, d = ns(e["ts"]), ns(e["dur"])
        stack = stacks[e["tid"]]
        while stack and stack[-1][1] <= s:
            stack.pop()
        key = (e["tid"], s, e["name"])
        depth[key] = len(stack)
        self_ns[key] = d
        if stack:
            self_ns[stack[-1][2]] -= d
        stack.append((s, s + d, key))
    return depth, self_ns


def test_ops_depth_leaf_and_self_time_match_raw():
    """MkldnnRnnLayerBackward-style nesting: depth and self time from a plain stack walk over
    the raw JSON; a sum of self_ns counts each nanosecond once."""
    t = traceviz.load(GPU_TRAIN / "trace.pt.trace.json.gz")
    ops = t.ops()
    depth, self_ns = _raw_op_tree(raw_events(GPU_TRAIN / "trace.pt.trace.json.gz"))
    assert len(ops) == len(depth)
    got = {(int(r.tid), int(r.ts_ns), str(r.name)): (int(r.depth), int(r.self_ns))
           for r in ops.itertuples(index=False)}
    origin = int(t.meta["origin_ns"])
    want = {(tid, s - origin, n): (depth[(tid, s, n)], max(self_ns[(tid, s, n)], 0))
            for (tid, s, n) in depth}
    assert got == want
    assert ops["depth"].max() >= 3
    assert bool((ops["is_leaf"] == ~ops.index.isin(ops["parent"])).all())
    # nested ops counted once: sum(self) per thread = union of its top-level ops
    top = ops[ops["depth"] == 0]
    assert int(ops["self_ns"].sum()) == int(top["dur_ns"].sum())
    assert int(ops["dur_ns"].sum()) > int(ops["self_ns"].sum())


def test_phases_match_raw_launch_times():
    """Kernels per phase: each raw kernel goes to the host phase range holding its launch
    call's start (looked up by correlation id)."""
    raw = raw_events(GPU_BF16 / "trace.pt.trace.json.gz")
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in raw
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    ranges = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in raw
              if e.get("cat") == "user_annotation" and e["name"] in PHASES]
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in raw
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in (e.get("args") or {})}
    want: Counter = Counter()
    casts: Counter = Counter()
    for k in (e for e in raw if e.get("cat") == "kernel"):
        t0 = launch.get(k["args"]["correlation"])
        if t0 is None or not any(a <= t0 < b for a, b in steps):
            continue
        phase = next((n for a, b, n in ranges if a <= t0 < b), "(no phase)")
        want[phase] += 1
    t = traceviz.load(GPU_BF16 / "trace.parquet")
    got = t.phases().set_index("phase")["kernels"].to_dict()
    assert got == dict(want) and set(got) >= {"forward", "backward", "optimizer"}
    k = t.kernels()
    assert k["phase"].value_counts().to_dict() == {**dict(want), **{
        p: 0 for p in set(k["phase"].cat.categories) - set(want)}}
    casts = k[k["is_cast"]].groupby("phase", observed=True).size().to_dict()
    assert t.phases().set_index("phase")["casts"].to_dict() == {
        p: casts.get(p, 0) for p in got}
    assert sum(casts.values()) == t.summary()["casts"]["count"] > 0


def test_exports_read_by_duckdb_and_polars(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    assert main(["analyze", str(GPU_BF16), "--export", str(tmp_path), "--json"]) == 0
    t = traceviz.load(GPU_BF16)
    s = t.summary()
    con = duckdb.connect()
    q = lambda sql: con.execute(sql.replace("$D", str(tmp_path))).fetchall()  # noqa: E731
    assert q("SELECT count(*), sum(dur_ns) FROM '$D/kernels.parquet'")[0] == (
        s["kernels"]["count"], s["kernels"]["total_ns"])
    assert q("SELECT count(*) FROM '$D/casts.parquet'")[0][0] == s["casts"]["count"]
    # self_ns sums nested ops once; dur_ns over all ops would count them per ancestor
    self_sum, top_sum = q("SELECT sum(self_ns), sum(dur_ns) FILTER (WHERE depth = 0) "
                          "FROM '$D/ops.parquet'")[0]
    assert self_sum == top_sum
    by_phase = dict(q("SELECT phase, count(*) FROM '$D/kernels.parquet' GROUP BY phase"))
    assert by_phase == {p["phase"]: p["kernels"] for p in s["phases"]}
    joined = q("SELECT count(*) FROM '$D/kernels.parquet' k JOIN '$D/launches.parquet' l "
               "USING (launch_id)")[0][0]
    assert joined == s["launches"]["matched"]
    k = pl.read_parquet(tmp_path / "kernels.parquet")
    assert k.height == s["kernels"]["count"]
    assert pl.read_parquet(tmp_path / "phases.parquet")["kernels"].sum() == s["kernels"]["count"]
    assert set(pl.read_parquet(tmp_path / "ops.parquet").columns) >= {
        "depth", "is_leaf", "self_ns", "parent"}


def _ns_values(obj, key=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _ns_values(v, k)
    elif isinstance(obj, list):
        for v in obj:
            yield from _ns_values(v, key)
    elif key.endswith("_ns"):
        yield key, obj


@pytest.mark.parametrize("path", [GPU_BF16, CPU_RUN, KINETO / "v100_19k_kernels.json.gz"],
                         ids=["gpu-run", "cpu-run", "v100"])
def test_json_times_are_integers(path, capsys):
    assert main(["analyze", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    values = list(_ns_values(doc))
    assert len(values) > 20
    bad = [(k, v) for k, v in values if v is not None and type(v) is not int]
    assert not bad
    assert "phases" in doc and "timings" in doc


def test_repr_is_one_line():
    r = repr(traceviz.load(CPU_RUN))
    assert "\n" not in r and "cudnn_torch" in r and "CPU" in r


def test_public_names():
    from traceviz.trace import Trace

    assert set(traceviz.__all__) == {"Trace", "TraceAnalysis", "TraceVizError", "__version__",
                                     "load", "ranks", "profile", "step"}
    for name in traceviz.__all__:
        assert getattr(traceviz, name) is not None
    # traceviz.Trace is the notebook's (the table with the notebook API); the table alone,
    # traceviz.trace.Trace, has none of its methods
    assert traceviz.Trace is traceviz.TraceAnalysis and issubclass(traceviz.Trace, Trace)
    for name in ("kernels", "launches", "casts", "ops", "phases", "summary"):
        assert getattr(traceviz.Trace, name).__doc__ and not hasattr(Trace, name)
    assert isinstance(traceviz.load(CPU_RUN).launches(), pd.DataFrame)


def test_export_names_are_the_tables():
    from traceviz.analyses.summary.tables import export_tables
    from traceviz.cli.analyze import EXPORTS
    from traceviz.table.exports import EXPORTS as TABLES

    assert tuple(export_tables(traceviz.load(CPU_RUN))) == EXPORTS == tuple(TABLES)


