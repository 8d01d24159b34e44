"""The notebook display (issue 60): a Trace, Trace.summary() and Trace.bound() shown as
escaped HTML and a few lines of text, and their DataFrames in named units, on the
project's own GPU and CPU captures. Every table figure is checked against the
integer-nanosecond figure it was converted from, and the top kernel's against the
kernels table summed again."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

import traceviz
from tests.conftest import ROOT, SHARED_TRACES, shared
from traceviz.analyses import summarize
from traceviz.render.escape import html_text

CPU_RUN = ROOT / "sample_traces" / "cpu" / "cudnn_torch"
GPU_TRAIN = ROOT / "sample_traces" / "gpu" / "cudnn_torch" / "train"
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>\x1b]0;owned\x07'


@pytest.fixture(scope="module")
def gpu():
    t = traceviz.load(GPU_TRAIN)
    return t, t.summary(), t.bound()


@pytest.fixture(scope="module")
def cpu():
    t = traceviz.load(CPU_RUN)
    return t, t.summary(), t.bound()


@pytest.fixture(params=["gpu", "cpu"])
def loaded(request):
    return request.getfixturevalue(request.param)


def _ns(ms: pd.Series) -> list[int]:
    return [round(v * 1e6) for v in ms]


def test_the_summary_is_still_analyze_json(loaded):
    t, s, b = loaded
    assert isinstance(s, dict) and isinstance(b, dict)
    assert json.loads(json.dumps(s)) == json.loads(json.dumps(
        summarize(t, with_efficiency=True).to_dict()))
    assert dict(b) == s["bound"]


def test_kernel_table_is_the_json_converted(loaded):
    t, s, _ = loaded
    df = s.kernels_df()
    top = s["top_kernels"]
    assert len(df) == len(top) == min(20, s["kernels"]["distinct"]) > 0
    assert list(df.columns) == ["rank", "name", "category", "count", "time_ms", "share_pct",
                                "mean_us", "median_us", "min_us", "max_us", "std_us"]
    assert list(df["name"]) == [k["name"] for k in top]
    assert list(df["count"]) == [k["count"] for k in top]
    assert _ns(df["time_ms"]) == [k["total_ns"] for k in top]
    assert [round(v * 1e3) for v in df["mean_us"]] == [k["mean_ns"] for k in top]
    assert [round(v * 1e3) for v in df["max_us"]] == [k["max_ns"] for k in top]
    assert list(df["share_pct"]) == pytest.approx([100 * k["share"] for k in top])
    # the top kernel's time, summed again from the kernels table
    k = t.kernels()
    first = k.loc[k["name"].astype(str) == df["name"][0], "dur_ns"]
    assert round(df["time_ms"][0] * 1e6) == int(first.sum()) and len(first) == df["count"][0]


def test_gpu_figures(gpu):
    t, s, b = gpu
    # sample_traces/gpu/cudnn_torch/train: H100, 3 steps, 34 distinct kernels
    assert s["span_ns"] == 67_711_639 and s["host_wait_ns"] == 42_629_763
    totals = s.totals_df().set_index("figure")
    assert round(totals.loc["span", "time_ms"] * 1e6) == 67_711_639
    assert round(totals.loc["host wait", "time_ms"] * 1e6) == 42_629_763
    assert totals.loc["host wait", "share_pct"] == pytest.approx(
        100 * 42_629_763 / 67_711_639)
    cats = s.categories_df().set_index("category")
    assert round(cats.loc["gemm", "time_ms"] * 1e6) == s["categories"]["gemm"]["total_ns"]
    assert cats.loc["gemm", "count"] == 1278 and cats["time_ms"].is_monotonic_decreasing
    waits = s.host_wait_df()
    causes = s["host_wait_split"]["causes"]
    assert list(waits.columns) == ["cause", "time_ms", "per_step_ms", "share_pct"]
    assert dict(zip(waits["cause"], _ns(waits["time_ms"]), strict=True)) == {
        c: v["ns"] for c, v in causes.items() if v["ns"]}
    assert sum(_ns(waits["time_ms"])) == s["host_wait_ns"]
    # Trace.host_wait(): the same causes, in ns and in ms
    table = t.host_wait()
    assert _ns(table["time_ms"]) == list(table["ns"])
    assert list(table["share_pct"]) == pytest.approx(list(100 * table["share"]))
    assert list(table["cause"]) == list(waits["cause"])
    fig = b.figures_df().set_index("figure")
    assert round(fig.loc["host", "time_ms"] * 1e6) == b["figures"]["host_ns"] == 42_629_763
    assert round(fig.loc["host: launch", "time_ms"] * 1e6) == 42_551_132
    assert fig.loc["host", "share_pct"] == pytest.approx(100 * 42_629_763 / 67_711_639)


def test_cpu_figures(cpu):
    t, s, b = cpu
    # sample_traces/cpu/cudnn_torch: 2 steps, the work ops play the kernels
    assert s.kernels_df()["name"][0] == "aten::index_select"
    assert round(s.kernels_df()["time_ms"][0] * 1e6) == 3_990_488
    assert list(s.totals_df()["figure"]) == ["span", "busy", "idle"]
    assert s.host_wait_df().empty and t.host_wait().empty
    phases = s.phases_df()
    assert list(phases["phase"]) == ["forward"]
    assert round(phases["busy_ms"][0] * 1e6) == s["phases"][0]["busy_ns"] == 6_731_344
    fig = b.figures_df()
    assert list(fig["figure"]) == ["busy"] and round(fig["time_ms"][0] * 1e6) == 6_731_344
    assert fig["share_pct"].isna().all()


def test_html_shows_the_figures_escaped(loaded):
    t, s, b = loaded
    page = s._repr_html_()
    top = s["top_kernels"][0]
    assert html_text(top["name"]) in page
    assert f"{top['total_ns'] / 1e6:,.3f}" in page
    assert html_text(s["bound"]["why"]) in page
    # every name with markup in it shows as text (the GPU trace's cutlass templates)
    for k in s["top_kernels"][:10]:
        assert html_text(k["name"]) in page
        if "<" in k["name"]:
            assert k["name"] not in page
    trace_page = t._repr_html_()
    assert f"{len(t.events):,} events" in trace_page and "<table>" in trace_page
    assert html_text(b["why"]) in b._repr_html_()


def test_text_display_is_a_few_lines(loaded):
    t, s, b = loaded
    assert "\n" not in repr(t) and "\n" not in repr(s) and "\n" not in repr(b)
    text = str(t)
    assert text.splitlines()[0] == repr(t) and 4 <= len(text.splitlines()) <= 8
    assert f"{t.overview()['kinds']['op']:,} op" in text
    lines = str(s).splitlines()
    assert 3 <= len(lines) <= 8 and "kernels_df()" in lines[-1]
    assert s["bound"]["by"] in str(b).splitlines()[0]


def test_a_hostile_name_is_text(tmp_path):
    """A kernel, a device and a source file named with markup and a terminal escape: the
    HTML shows them as text, the text display shows the escape as ``\\x1b``."""
    t = traceviz.load(GPU_TRAIN)
    top = t.summary(top=1)["top_kernels"][0]["name"]
    t.events["name"] = t.events["name"].cat.rename_categories({top: HOSTILE})
    t.meta["devices"] = {"0": HOSTILE}
    t.meta["source_file"] = HOSTILE
    s = t.summary(top=3)
    assert s["top_kernels"][0]["name"] == HOSTILE == s.kernels_df()["name"][0]
    e = t.efficiency()
    assert e["kernels"][0]["kernel"] == HOSTILE
    for page in (s._repr_html_(), t._repr_html_(), e._repr_html_()):
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img" in page
        assert not re.search(r"<\s*(script|img)", page, re.I)
        assert "\x1b" not in page and "\\x1b]0;owned\\x07" in page
    for text in (str(s), str(t), repr(t), str(e)):
        assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;owned" in str(t)


def test_the_docs_example_runs(monkeypatch, capsys):
    """docs/api.md's notebook display block, executed as written from the repository root."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("## In a notebook", 1)[1]
    code, shown = re.search(r"```python\n(.*?)```\s*```\n(.*?)```", section, re.S).groups()
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(code, "docs/api.md", "exec"), scope)
    assert isinstance(scope["s"], dict) and isinstance(scope["df"], pd.DataFrame)
    assert capsys.readouterr().out == shown  # the output the page shows, as printed now
    trace_text = re.search(r"```\n(<Trace .*?)```", section, re.S).group(1)
    assert trace_text == str(scope["t"]) + "\n"


def test_efficiency_whatif_advice_tables(gpu):
    """The other results: still their --json values, with tables in named units."""
    t, s, _ = gpu
    e = t.efficiency()
    assert isinstance(e, dict) and all(e[k] == s["efficiency"][k]
                                       for k in ("device", "peak", "run", "notes"))
    k = e.kernels_df()
    assert len(k) == len(e["kernels"]) > 3 and list(k["kernel"]) == [
        r["kernel"] for r in e["kernels"]]
    assert _ns(k["time_ms"]) == [r["time_ns"] for r in e["kernels"]]
    assert list(k["peak_pct"]) == pytest.approx([100 * r["pct_peak"] for r in e["kernels"]])
    assert list(k["flops"]) == [r["flops"] for r in e["kernels"]]
    g = e.groups_df()
    assert int(g["flops"].sum()) <= e["run"]["flops"] and _ns(g["time_ms"]) == [
        r["time_ns"] for r in e["groups"]]
    assert "MFU 17.2%" in repr(e) and html_text(e["kernels"][2]["kernel"]) in e._repr_html_()

    w = t.whatif("cuda_graphs", "host_speedup=2")
    sc = w.scenarios_df()
    assert list(sc["name"]) == ["cuda_graphs", "host_speedup=2"]
    assert _ns(sc["saving_ms"]) == [r["saving_ns"] for r in w["scenarios"]]
    assert _ns(sc["predicted_ms"]) == [r["predicted_ns"] for r in w["scenarios"]]
    assert list(sc["saving_pct"]) == pytest.approx(
        [100 * r["saving_fraction"] for r in w["scenarios"]])
    assert sc["saving_ms"][0] * 1e6 + sc["predicted_ms"][0] * 1e6 == pytest.approx(
        w["measured_ns"]) and w["measured_ns"] == s["span_ns"]
    assert "cuda_graphs: saves" in str(w)

    a = t.advise()
    assert isinstance(a, list) and a[0]["rule"] == "host_bound"
    f = a.findings_df()
    assert list(f["rule"]) == [x["rule"] for x in a]
    assert round(f["saving_ms"][0] * 1e6) == a[0]["saving_ns"]
    assert html_text(a[0]["evidence"][0]) in a._repr_html_()
    assert str(a).splitlines()[1].startswith("  1. Host-bound")


def test_memory_tables_in_mib():
    """Memory figures are bytes in the JSON and MiB in the tables (no committed trace
    records allocator events: the figures here are made up, the conversion is not)."""
    from traceviz.render.notebook_results import MemoryView

    m = MemoryView({"devices": [{"device": 0, "events": 12, "base": 2**20,
                                 "peak_allocated": 3 * 2**20 + 2**19,
                                 "allocated": 5 * 2**20, "freed": 4 * 2**20}],
                    "phases": [{"device": 0, "phase": "forward", "events": 6,
                                "allocated": 5 * 2**20, "freed": 2**20}],
                    "bench": None, "notes": ["<b>note</b>"]})
    d = m.devices_df()
    assert list(d.columns) == ["device", "events", "base_mib", "peak_allocated_mib",
                               "allocated_mib", "freed_mib"]
    assert d.iloc[0].tolist() == [0, 12, 1.0, 3.5, 5.0, 4.0]
    assert m.phases_df()["allocated_mib"].tolist() == [5.0]
    assert "peak 3.50 MiB" in str(m) and "&lt;b&gt;note" in m._repr_html_()


def test_critical_path_tables(gpu):
    """The path's parts add up to each window's length, in the tables as in the JSON."""
    t, _, _ = gpu
    c = t.critical_path()
    steps = c.steps_df()
    assert list(steps["step"]) == [r["step"] for r in c["steps"]] == [2, 3, 4]
    assert _ns(steps["length_ms"]) == [r["length_ns"] for r in c["steps"]]
    parts = ["host_ms", "launch_ms", "device_ms", "queue_ms", "sync_ms"]
    assert [round(v) for v in steps[parts].sum(axis=1) * 1e6] == _ns(steps["length_ms"])
    p = c.parts_df().set_index("part")
    assert round(p["time_ms"].sum() * 1e6) == c["totals"]["length"] == 67_711_639
    assert round(p.loc["host", "time_ms"] * 1e6) == c["totals"]["host"]
    assert p["share_pct"].sum() == pytest.approx(100)
    h = c.host_calls_df()
    assert _ns(h["on_path_ms"]) == [r["on_path_ns"] for r in c["host_calls"]]
    assert html_text(c["host_calls"][0]["name"]) in c._repr_html_()
    assert "critical path · 3 step windows" in repr(c)


def test_memory_tables_on_allocator_events():
    """A trace with allocator events (TensorFlow's, three GPUs and the host): the tables'
    MiB are the JSON's bytes."""
    path = shared(SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz")
    m = traceviz.load(path).memory()
    d = m.devices_df()
    assert len(d) == len(m["devices"]) >= 2
    assert [round(v * 2**20) for v in d["peak_allocated_mib"]] == [
        r["peak_allocated"] for r in m["devices"]]
    assert [round(v * 2**20) for v in d["allocated_mib"]] == [
        r["allocated"] for r in m["devices"]]
    p = m.phases_df()
    assert [round(v * 2**20) for v in p["freed_mib"]] == [r["freed"] for r in m["phases"]]
    assert f"{d['peak_allocated_mib'][0]:,.2f} MiB" in str(m)
